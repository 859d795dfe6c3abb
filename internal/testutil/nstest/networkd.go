package nstest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// NeedTools skips t unless every program is on PATH; hint says how to install them.
func NeedTools(t testing.TB, hint string, programs ...string) {
	t.Helper()
	for _, p := range programs {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("needs %s (%s): %v", p, hint, err)
		}
	}
}

// DHCPOptions are what a DHCPServer hands out.
type DHCPOptions struct {
	// Range is dnsmasq's --dhcp-range, e.g. "10.77.0.50,10.77.0.99,255.255.255.0,1h".
	Range string
	// Router is option 3.
	Router string
	// DNS are option 6's servers.
	DNS []string
	// Domain, when set, is handed out as option 15 (domain-name) and option 119 (domain-search).
	// networkd 252 does not ask for option 119 unless told to (RequestOptions=), but its
	// UseDomains=yes searches option 15 just the same.
	Domain string
	// Options are more --dhcp-option values, e.g. "option:T1,4" to make a client renew every 4 s
	// (dnsmasq's shortest lease is 2 minutes, but it sends the T1 and T2 it is given).
	Options []string
}

// DHCPServer is dnsmasq serving DHCP only (no DNS: --port=0) on one interface of a sandbox, with
// its lease database kept across restarts so a client's renewal is answered with the new options.
type DHCPServer struct {
	sb    *Sandbox
	iface string
	cmd   *exec.Cmd
	// Log is dnsmasq's log (--log-dhcp): one line per DHCP packet.
	Log string
}

// StartDHCPServer starts dnsmasq on iface inside sb.
func (sb *Sandbox) StartDHCPServer(t testing.TB, iface string, o DHCPOptions) *DHCPServer {
	t.Helper()
	sb.Opts.Suite.Need(t, "apt-get install dnsmasq-base", "dnsmasq")
	d := &DHCPServer{sb: sb, iface: iface}
	d.start(t, o)
	return d
}

func (d *DHCPServer) start(t testing.TB, o DHCPOptions) {
	t.Helper()
	args := []string{"--keep-in-foreground", "--conf-file=/dev/null", "--port=0", "--pid-file=",
		"--interface=" + d.iface, "--bind-interfaces", "--dhcp-authoritative",
		"--dhcp-range=" + o.Range,
		"--dhcp-leasefile=" + filepath.Join(d.sb.Dir(), "dnsmasq-"+d.iface+".leases"),
		"--log-dhcp", "--log-facility=-"}
	if o.Router != "" {
		args = append(args, "--dhcp-option=option:router,"+o.Router)
	}
	if len(o.DNS) > 0 {
		args = append(args, "--dhcp-option=option:dns-server,"+strings.Join(o.DNS, ","))
	}
	if o.Domain != "" {
		args = append(args, "--dhcp-option=option:domain-name,"+o.Domain, "--dhcp-option=option:domain-search,"+o.Domain)
	}
	for _, opt := range o.Options {
		args = append(args, "--dhcp-option="+opt)
	}
	d.cmd = d.sb.Start(t, "dnsmasq", args...)
	if d.Log == "" {
		d.Log = d.cmd.Stdout.(*os.File).Name()
	}
	// Ready when dnsmasq has logged its DHCP range: its socket is bound then.
	WaitFor(t, 10*time.Second, "dnsmasq serving DHCP on "+d.iface, func() bool {
		data, _ := os.ReadFile(d.cmd.Stdout.(*os.File).Name())
		return strings.Contains(string(data), "DHCP, IP range")
	})
}

// Restart stops dnsmasq and starts it again with new options; leases it handed out stay valid.
func (d *DHCPServer) Restart(t testing.TB, o DHCPOptions) {
	t.Helper()
	// Only this dnsmasq, by its process (the command Start returns is the program itself).
	_ = d.cmd.Process.Kill()
	_ = d.cmd.Wait()
	d.start(t, o)
}

// Requests counts the DHCPDISCOVER and DHCPREQUEST packets the current dnsmasq has logged.
func (d *DHCPServer) Requests() int {
	data, _ := os.ReadFile(d.cmd.Stdout.(*os.File).Name())
	return len(regexp.MustCompile(`DHCP(DISCOVER|REQUEST)\(`+regexp.QuoteMeta(d.iface)+`\)`).FindAll(data, -1))
}

// StartNetworkd starts the suite's systemd-networkd (the host's 252, or the tree's) inside the sandbox, on the sandbox's
// system bus (start one with SystemBus first). It makes the sandbox's /sys read-only first:
// networkd 252 waits for udev forever on a writable /sys. .network files go in the sandbox's
// /run/systemd/network (private) or /etc/systemd/network (after Isolate).
func (sb *Sandbox) StartNetworkd(t testing.TB) *exec.Cmd {
	t.Helper()
	sb.Opts.Suite.Need(t, "apt-get install systemd", "/lib/systemd/systemd-networkd", "networkctl")
	sb.Run(t, "grep -q ' /sys sysfs ro' /proc/self/mounts || mount -o remount,bind,ro /sys")
	cmd := sb.Start(t, "/lib/systemd/systemd-networkd")
	WaitFor(t, 15*time.Second, "systemd-networkd on the sandbox bus", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return sb.Cmd(ctx, "networkctl", "list").Run() == nil
	})
	return cmd
}

// IfIndex returns an interface's ifindex inside the sandbox, as networkd names its lease and link
// state files (/run/systemd/netif/leases/IFINDEX, /run/systemd/netif/links/IFINDEX).
func (sb *Sandbox) IfIndex(t testing.TB, iface string) string {
	t.Helper()
	return strings.TrimSpace(sb.Run(t, "cat /sys/class/net/"+iface+"/ifindex"))
}

// FileHas reports whether the file at host path p exists and contains s.
func FileHas(p, s string) bool {
	data, err := os.ReadFile(p)
	return err == nil && strings.Contains(string(data), s)
}

// NetworkFile writes a .network file for iface into the sandbox's /run/systemd/network, asking for
// DHCPv4 with the DHCP domains used (UseDomains=yes, as Ubuntu's patched networkd does by default;
// Debian's 252 does not), and returns its path inside the sandbox.
func (sb *Sandbox) NetworkFile(t testing.TB, name, iface string) string {
	t.Helper()
	p := "/run/systemd/network/" + name + ".network"
	sb.Run(t, fmt.Sprintf("mkdir -p /run/systemd/network && cat > %s <<'EOF'\n[Match]\nName=%s\n\n[Network]\nDHCP=ipv4\n\n[DHCPv4]\nUseDomains=yes\n\nEOF\n", Quote(p), iface))
	return p
}
