package main

import (
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/testutil/nstest"
	"github.com/nodedns/nodedns/probes"
	"github.com/nodedns/nodedns/systemd"
	"github.com/nodedns/nodedns/systemd/bus"
)

// TestSeed001RealResolved is incident 001 on a real systemd-resolved (252, and 262 in forky) in a sandbox: kubespray's
// drop-in points resolved's global DNS at the node-local cache (DNS=169.254.25.10), and a dhclient
// hook has set the lease's server and search domain example.org on an unmanaged link over D-Bus
// (as Ubuntu's dhclient hook does). The lease file itself carries no domain, so example.org is
// known to be a DHCP domain only from resolved's per-link domains on a DHCP link. The real
// nodedns binary runs inside the sandbox: `apply` must leave resolved's resolv.conf without
// 169.254.25.10 and example.org and write a right kubelet file (restarting resolved with
// resolved.restartCommand, since PID 1 is not systemd there); `restore` must bring back the start.
func TestSeed001RealResolved(t *testing.T) { nstest.Suites(t, testSeed001RealResolved) }

func testSeed001RealResolved(t *testing.T, s nstest.Suite) {
	bin := nstest.Build(t)
	sb := nstest.NewWith(t, nstest.Options{Suite: s})
	sb.Isolate(t)
	seed001Node(t, sb, "ndr1")
	sb.SystemBus(t)
	res := sb.StartResolved(t)
	cfg := sb.Dir() + "/config.yaml"
	must(t, os.WriteFile(cfg, []byte("resolved:\n  restartCommand: ["+strconv.Quote(res.RestartScript)+"]\nnetplan:\n  mode: \"off\"\n"), 0o644))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := bus.DialResolved(ctx, bus.ResolvedOptions{Address: sb.BusAddress()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	idx, err := strconv.Atoi(strings.TrimSpace(sb.Run(t, "cat /sys/class/net/ndr1/ifindex")))
	if err != nil {
		t.Fatal(err)
	}
	must(t, c.SetLinkDNS(ctx, idx, []systemd.DNSServer{{Addr: netip.MustParseAddr("10.77.0.2")}}))
	must(t, c.SetLinkDomains(ctx, idx, []systemd.Domain{{Name: "example.org"}}))

	resolvConf := func() string { return readSandboxFile(t, sb, "/run/systemd/resolve/resolv.conf") }
	start := resolvConf()
	contains(t, "resolved's resolv.conf at the start", start, "nameserver 169.254.25.10")
	contains(t, "resolved's resolv.conf at the start", start, "search example.org")

	run := func(args ...string) (string, int) {
		t.Helper()
		cmd := sb.Cmd(ctx, bin, append([]string{"--config", cfg}, args...)...)
		out, err := cmd.CombinedOutput()
		code := 0
		if err != nil {
			code = cmd.ProcessState.ExitCode()
		}
		t.Logf("nodedns %s -> %d\n%s", strings.Join(args, " "), code, out)
		return string(out), code
	}

	out, code := run("apply")
	if code != 0 {
		t.Fatalf("apply exited %d", code)
	}
	contains(t, "apply output", out, "wrote /etc/systemd/resolved.conf.d/zz-nodedns.conf")
	after := resolvConf()
	notContains(t, "resolved's resolv.conf after apply", after, "169.254.25.10")
	notContains(t, "resolved's resolv.conf after apply", after, "example.org")
	contains(t, "resolved's resolv.conf after apply", after, "nameserver 10.77.0.2")
	kubelet := readSandboxFile(t, sb, "/var/lib/nodedns/resolv.conf")
	contains(t, "kubelet file", kubelet, "nameserver 10.77.0.2")
	for _, bad := range []string{"169.254.25.10", "example.org", "127.0.0.53"} {
		notContains(t, "kubelet file", kubelet, bad)
	}
	m, err := c.Manager(ctx)
	must(t, err)
	for _, s := range m.DNS {
		if s.Addr == netip.MustParseAddr("169.254.25.10") {
			t.Errorf("resolved still lists %v after apply", s)
		}
	}
	li, err := c.Link(ctx, idx)
	must(t, err)
	if len(li.Domains) != 0 || len(li.DNS) != 1 {
		t.Errorf("link after apply: DNS %v domains %v; want 10.77.0.2 and no domain", li.DNS, li.Domains)
	}

	// The node is now right: the live checks agree and a second pass changes nothing.
	out, code = run("check", "-o", "json")
	var rep probes.Report
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &rep); err != nil {
		t.Fatalf("check -o json (exit %d): %v", code, err)
	}
	for _, id := range []string{"resolved.dns", "resolved.domains", "kubelet.resolvconf"} {
		if r := byID(rep, id); r.Status != probes.OK {
			t.Errorf("%s after apply = %s: %s", id, r.Status, r.Message)
		}
	}
	if out, code = run("plan", "--detailed-exitcode"); code != 0 {
		t.Errorf("plan after apply exited %d, want 0 (nothing to change):\n%s", code, out)
	}

	out, code = run("restore")
	if code != 0 {
		t.Fatalf("restore exited %d", code)
	}
	contains(t, "restore output", out, "kept /var/lib/nodedns/resolv.conf")
	if _, err := os.Stat(sb.Path("/etc/systemd/resolved.conf.d/zz-nodedns.conf")); !os.IsNotExist(err) {
		t.Errorf("the drop-in is still there after restore (%v)", err)
	}
	if got := readSandboxFile(t, sb, "/etc/systemd/resolved.conf.d/kubespray.conf"); got != "[Resolve]\nDNS=169.254.25.10\n" {
		t.Errorf("kubespray.conf changed: %q", got)
	}
	li, err = c.Link(ctx, idx)
	must(t, err)
	if !slices.Equal(li.Domains, []systemd.Domain{{Name: "example.org"}}) || len(li.DNS) != 1 || li.DNS[0].Addr != netip.MustParseAddr("10.77.0.2") {
		t.Errorf("link after restore: DNS %v domains %v; want the start", li.DNS, li.Domains)
	}
	if got := resolvConf(); got != start {
		t.Errorf("resolved's resolv.conf after restore:\n%s\nwant the start:\n%s", got, start)
	}
	if _, err := os.Stat(sb.Path("/var/lib/nodedns/resolved-links.json")); !os.IsNotExist(err) {
		t.Errorf("the link record is still there after restore (%v)", err)
	}
}

func readSandboxFile(t *testing.T, sb *nstest.Sandbox, p string) string {
	t.Helper()
	data, err := os.ReadFile(sb.Path(p))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// seed001Node lays out incident 001's node inside sb: kubespray's drop-in DNS=169.254.25.10, the
// stub symlink, a dhclient lease for link (a bridge it creates) whose server is 10.77.0.2 and which
// hands out no domain, and a kubelet config pointed at nodedns's file.
func seed001Node(t *testing.T, sb *nstest.Sandbox, link string) {
	t.Helper()
	sb.Run(t, strings.ReplaceAll(`set -e
ip link add LINK type bridge && ip link set LINK up
mkdir -p /etc/systemd/resolved.conf.d /var/lib/dhcp /var/lib/kubelet
chmod 0755 /etc/systemd/resolved.conf.d
printf '[Resolve]\nDNS=169.254.25.10\n' > /etc/systemd/resolved.conf.d/kubespray.conf
rm -f /etc/resolv.conf && ln -s /run/systemd/resolve/stub-resolv.conf /etc/resolv.conf
cat > /var/lib/dhcp/dhclient.LINK.leases <<'END'
lease {
  interface "LINK";
  fixed-address 10.77.0.10;
  option subnet-mask 255.255.255.0;
  option routers 10.77.0.1;
  option domain-name-servers 10.77.0.2;
  renew 4 2099/01/01 00:00:00;
  rebind 4 2099/01/01 00:00:00;
  expire 4 2099/01/01 00:00:00;
}
END
cat > /var/lib/kubelet/config.yaml <<'END'
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
clusterDNS: [169.254.25.10]
clusterDomain: cluster.local
resolvConf: /var/lib/nodedns/resolv.conf
END
`, "LINK", link))
}
