package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/testutil/nstest"
)

// The newer components (systemd 262, Debian testing "forky"), chrooted in a sandbox: every program
// of these tests (resolved, networkd, netplan, dnsmasq, dbus and the nodedns binary) runs in the
// tree, whose tar .ci/run builds with .ci/suite-tree and names in NODEDNS_FORKY_TAR.

// forkyNode is a sandbox running in the forky tree (nstest.Options.Suite) with its system bus up and
// the nodedns binary.
type forkyNode struct {
	sb  *nstest.Sandbox
	bin string
}

func newForkyNode(t *testing.T) *forkyNode {
	t.Helper()
	nstest.Require(t)
	tree := nstest.SuiteTree(t, nstest.ForkyTarEnv)
	bin := nstest.Build(t)
	sb := nstest.NewWith(t, nstest.Options{UTSNamespace: true, Suite: nstest.Suite{Name: nstest.Forky, Tree: tree}})
	// networkd runs without udev on a read-only sysfs only.
	sb.Run(t, "mount -o remount,bind,ro /sys")
	sb.Isolate(t)
	sb.SystemBus(t)
	return &forkyNode{sb: sb, bin: bin}
}

// write writes a file inside the node (its directories made as needed).
func (n *forkyNode) write(t *testing.T, p, data string, mode os.FileMode) {
	t.Helper()
	host := n.sb.Path(p)
	must(t, os.MkdirAll(filepath.Dir(host), 0o755))
	must(t, os.WriteFile(host, []byte(data), mode))
}

// nodedns runs the nodedns binary in the node and returns its output and exit code.
func (n *forkyNode) nodedns(t *testing.T, args ...string) (string, int) {
	t.Helper()
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = nstest.Quote(a)
	}
	out, err := n.sb.Try(nstest.Quote(n.bin) + " " + strings.Join(q, " "))
	code := 0
	if err != nil {
		code = -1
		if ee, ok := err.(interface{ ExitCode() int }); ok {
			code = ee.ExitCode()
		}
	}
	t.Logf("nodedns %s -> %d\n%s", strings.Join(args, " "), code, out)
	return out, code
}

// checkStatus runs `nodedns check -o json` and returns the exit code and the status and message of
// check id.
func (n *forkyNode) checkStatus(t *testing.T, id string) (code int, status, msg string) {
	t.Helper()
	out, code := n.nodedns(t, "check", "-o", "json")
	var rep struct {
		Checks []struct{ ID, Status, Message string }
	}
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &rep); err != nil {
		t.Fatalf("check -o json: %v\n%s", err, out)
	}
	for _, c := range rep.Checks {
		if c.ID == id {
			return code, c.Status, c.Message
		}
	}
	t.Fatalf("check -o json has no %s:\n%s", id, out)
	return
}

// TestForkyResolvedDelegateLoop: on systemd-resolved 262, kubespray's node-local cache as a DNS
// delegate (/etc/systemd/dns-delegate.d/kubespray.dns-delegate, DNS=169.254.25.10 Domains=~.
// DefaultRoute=yes) takes every host lookup, whatever resolved.conf says. The cache is a dnsmasq
// with --log-queries on 169.254.25.10; the upstream a dnsmasq on 10.0.0.1. check must exit 1
// naming the delegate file and line; after apply no host lookup reaches the cache (counted in its
// log); restore puts the file back byte for byte.
func TestForkyResolvedDelegateLoop(t *testing.T) {
	// In /etc the file is edited in place; in /usr/lib (a package's) a same-named copy in /etc
	// without the loop masks it, and restore removes the copy.
	for _, dir := range []string{"/etc/systemd/dns-delegate.d", "/usr/lib/systemd/dns-delegate.d"} {
		t.Run(dir, func(t *testing.T) { testForkyDelegateLoop(t, dir) })
	}
}

func testForkyDelegateLoop(t *testing.T, dir string) {
	n := newForkyNode(t)
	n.sb.Run(t, `set -e
ip link add nodelocaldns type bridge; ip addr add 169.254.25.10/32 dev nodelocaldns; ip link set nodelocaldns up
ip link add up0 type bridge; ip addr add 10.0.0.1/24 dev up0; ip link set up0 up`)
	n.sb.Run(t, `set -e
dnsmasq --no-resolv --no-hosts --listen-address=169.254.25.10 --bind-interfaces --log-queries --log-facility=/run/cache.log --address=/example.test/192.0.2.77 -x /run/cache.pid
dnsmasq --no-resolv --no-hosts --listen-address=10.0.0.1 --bind-interfaces --log-queries --log-facility=/run/upstream.log --address=/example.test/192.0.2.1 -x /run/upstream.pid
ln -sf /run/systemd/resolve/stub-resolv.conf /etc/resolv.conf`)
	n.write(t, "/etc/systemd/resolved.conf", "[Resolve]\nDNS=10.0.0.1\n", 0o644)
	delegate := dir + "/kubespray.dns-delegate"
	const fixed = "/etc/systemd/dns-delegate.d/kubespray.dns-delegate" // what apply writes
	const original = "# kubespray: host lookups through the node-local cache\n[Delegate]\nDNS=169.254.25.10\nDomains=~.\nDefaultRoute=yes\n"
	n.write(t, delegate, original, 0o644)
	restart := n.sb.StartDaemon(t, "resolved", "/usr/lib/systemd/systemd-resolved")
	waitResolved := func() {
		nstest.WaitFor(t, 15*time.Second, "systemd-resolved 262 answering", func() bool {
			_, err := n.sb.Try("resolvectl status >/dev/null 2>&1")
			return err == nil
		})
	}
	waitResolved()
	n.write(t, "/etc/nodedns/config.yaml", "resolved:\n  restartCommand: ["+strconv.Quote(restart)+"]\nnetplan:\n  mode: \"off\"\n", 0o644)

	cacheQueries := func(name string) int {
		data, _ := os.ReadFile(n.sb.Path("/run/cache.log"))
		return strings.Count(string(data), "] "+name+" from ")
	}
	lookup := func(name string) string {
		out, _ := n.sb.Try("resolvectl query --cache=no " + name)
		return out
	}
	// The defect, reproduced: resolved sends host lookups to the cache through the delegate.
	if out := lookup("before.example.test"); !strings.Contains(out, "192.0.2.77") || cacheQueries("before.example.test") == 0 {
		t.Fatalf("the delegate does not send lookups to the cache here (cache saw %d): %s", cacheQueries("before.example.test"), out)
	}

	code, status, msg := n.checkStatus(t, "resolved.dns")
	if code != 1 || status != "problem" || !strings.Contains(msg, delegate+":3") {
		t.Fatalf("check: exit %d, resolved.dns %s %q; want exit 1 and a problem naming %s:3", code, status, msg, delegate)
	}

	if out, code := n.nodedns(t, "apply"); code != 0 || !strings.Contains(out, "wrote "+fixed) {
		t.Fatalf("apply exited %d without writing %s", code, fixed)
	}
	waitResolved()
	for i := range 5 {
		name := fmt.Sprintf("after%d.example.test", i)
		if out := lookup(name); !strings.Contains(out, "192.0.2.1") {
			t.Errorf("%s after apply: %s", name, out)
		}
		if q := cacheQueries(name); q != 0 {
			t.Errorf("%s after apply reached the cache %d times", name, q)
		}
	}
	if _, status, msg := n.checkStatus(t, "resolved.dns"); status != "ok" {
		t.Errorf("resolved.dns after apply: %s %q", status, msg)
	}

	if _, code := n.nodedns(t, "restore"); code != 0 {
		t.Fatalf("restore exited %d", code)
	}
	data, err := os.ReadFile(n.sb.Path(delegate))
	if err != nil || string(data) != original {
		t.Fatalf("after restore %s = %q (%v), want the original bytes", delegate, data, err)
	}
	if fixed != delegate {
		if _, err := os.Lstat(n.sb.Path(fixed)); err == nil {
			t.Errorf("after restore the masking copy %s is still there", fixed)
		}
	}
	waitResolved()
	if out := lookup("restored.example.test"); !strings.Contains(out, "192.0.2.77") {
		t.Errorf("after restore resolved does not run with the restored delegate: %s", out)
	}

	// An operator removes the delegate without restarting resolved: the files are clean, resolved
	// still runs with the delegate (read back over D-Bus, ListDelegates and the DnsDelegate object),
	// so check says so and apply restarts it.
	n.sb.Run(t, "rm "+delegate)
	code, status, msg = n.checkStatus(t, "resolved.dns")
	if status != "problem" || !strings.Contains(msg, `runs with DNS delegate "kubespray" listing 169.254.25.10`) {
		t.Fatalf("check with a stale live delegate: exit %d, resolved.dns %s %q", code, status, msg)
	}
	if out, code := n.nodedns(t, "apply"); code != 0 || !strings.Contains(out, "restart-resolved") {
		t.Fatalf("apply exited %d without restarting resolved", code)
	}
	waitResolved()
	if out := lookup("stale.example.test"); !strings.Contains(out, "192.0.2.1") || cacheQueries("stale.example.test") != 0 {
		t.Errorf("after the restart the cache still saw stale.example.test %d times: %s", cacheQueries("stale.example.test"), out)
	}
}

// TestForkyNetworkdVarlinkLease: networkd 262 keeps its DHCP lease in no file (/run/systemd/netif/
// leases/ stays empty, the link state has no DHCP_LEASE=): the lease dnsmasq hands veth0 (address,
// router, DNS, domain corp.example) is only on networkd's varlink interface. `netplan pin --dry-run`
// must pin that lease, and dhcp.search must see its domain; under --root pin must say that lease
// files are the only source there.
func TestForkyNetworkdVarlinkLease(t *testing.T) {
	n := newForkyNode(t)
	n.sb.Run(t, `set -e
ip link add veth0 type veth peer name veth1
ip addr add 10.9.0.1/24 dev veth1; ip link set veth1 up`)
	n.sb.Run(t, `dnsmasq --no-resolv --no-hosts --interface=veth1 --bind-interfaces --dhcp-range=10.9.0.50,10.9.0.60,255.255.255.0,1h \
--dhcp-option=option:router,10.9.0.1 --dhcp-option=option:dns-server,10.9.0.1 --domain=corp.example \
--dhcp-option=option:domain-search,corp.example -x /run/dhcp.pid --log-facility=/run/dhcp.log --log-dhcp`)
	n.write(t, "/etc/netplan/50-cloud-init.yaml", "network:\n  version: 2\n  ethernets:\n    veth0:\n      dhcp4: true\n", 0o600)
	n.sb.Run(t, "netplan generate")
	n.sb.StartDaemon(t, "networkd", "/usr/lib/systemd/systemd-networkd")
	nstest.WaitFor(t, 30*time.Second, "a DHCP address on veth0", func() bool {
		out, _ := n.sb.Try("ip -4 -o addr show dev veth0")
		return strings.Contains(out, "10.9.0.")
	})
	leased := strings.Fields(n.sb.Run(t, "ip -4 -o addr show dev veth0 | awk '{print $4}'"))[0]

	// The premise: networkd 262 wrote no lease file.
	if out := n.sb.Run(t, "ls -A /run/systemd/netif/leases/; grep -h DHCP_LEASE= /run/systemd/netif/links/* || true"); strings.TrimSpace(out) != "" {
		t.Fatalf("networkd 262 wrote a lease file here:\n%s", out)
	}

	out, code := n.nodedns(t, "netplan", "pin", "--dry-run")
	if code != 0 || !strings.Contains(out, leased) || !strings.Contains(out, "via: 10.9.0.1") {
		t.Fatalf("pin --dry-run exited %d without pinning %s via 10.9.0.1", code, leased)
	}
	if _, status, msg := n.checkStatus(t, "dhcp.search"); !strings.Contains(msg, "corp.example") {
		t.Errorf("dhcp.search does not see the lease's domain: %s %q", status, msg)
	}

	// Under --root (the same node bound at /mnt/node) nothing answers varlink: the message says so.
	n.sb.Run(t, "mkdir -p /mnt/node && mount --rbind / /mnt/node")
	rootOut, rootCode := n.nodedns(t, "--root", "/mnt/node", "netplan", "pin", "--dry-run")
	if rootCode == 0 || !strings.Contains(rootOut, "under --root nodedns reads lease files only") {
		t.Errorf("pin under --root: exit %d, want a refusal that names lease files as the only source", rootCode)
	}
}

// TestForkyDaemonWatchesDelegates: `nodedns run` on systemd-resolved 262 watches dns-delegate.d.
// A delegate that sends every host lookup to the cache, written while the daemon runs, is fixed
// and resolved restarted without a resync: no later host lookup reaches the cache.
func TestForkyDaemonWatchesDelegates(t *testing.T) {
	n := newForkyNode(t)
	n.sb.Run(t, `set -e
ip link add nodelocaldns type bridge; ip addr add 169.254.25.10/32 dev nodelocaldns; ip link set nodelocaldns up
ip link add up0 type bridge; ip addr add 10.0.0.1/24 dev up0; ip link set up0 up`)
	n.sb.Run(t, `set -e
dnsmasq --no-resolv --no-hosts --listen-address=169.254.25.10 --bind-interfaces --log-queries --log-facility=/run/cache.log --address=/example.test/192.0.2.77 -x /run/cache.pid
dnsmasq --no-resolv --no-hosts --listen-address=10.0.0.1 --bind-interfaces --address=/example.test/192.0.2.1 -x /run/upstream.pid
ln -sf /run/systemd/resolve/stub-resolv.conf /etc/resolv.conf`)
	n.write(t, "/etc/systemd/resolved.conf", "[Resolve]\nDNS=10.0.0.1\n", 0o644)
	restart := n.sb.StartDaemon(t, "resolved", "/usr/lib/systemd/systemd-resolved")
	waitResolved := func() {
		nstest.WaitFor(t, 15*time.Second, "systemd-resolved 262 answering", func() bool {
			_, err := n.sb.Try("resolvectl status >/dev/null 2>&1")
			return err == nil
		})
	}
	waitResolved()
	n.write(t, "/etc/nodedns/config.yaml", "resolved:\n  restartCommand: ["+strconv.Quote(restart)+"]\nnetplan:\n  mode: \"off\"\n", 0o644)
	n.sb.StartDaemon(t, "nodedns", n.bin, "--log-level", "debug", "run")
	nstest.WaitFor(t, 30*time.Second, "the daemon's first pass", func() bool {
		data, _ := os.ReadFile(n.sb.Path("/run/nodedns.log"))
		return strings.Contains(string(data), "daemon ready")
	})

	const delegate = "/etc/systemd/dns-delegate.d/kubespray.dns-delegate"
	n.sb.Run(t, "mkdir -p /etc/systemd/dns-delegate.d && printf '[Delegate]\\nDNS=169.254.25.10\\nDomains=~.\\nDefaultRoute=yes\\n' > "+delegate+".tmp && mv "+delegate+".tmp "+delegate)
	start := time.Now()
	nstest.WaitFor(t, 30*time.Second, "the daemon to fix the delegate", func() bool {
		data, _ := os.ReadFile(n.sb.Path(delegate))
		return strings.Contains(string(data), "nodedns") && !strings.Contains(string(data), "\nDNS=169.254.25.10")
	})
	t.Logf("fixed %v after the write", time.Since(start).Round(time.Millisecond))
	waitResolved()
	nstest.WaitFor(t, 15*time.Second, "resolved without the delegate's cache", func() bool {
		out, _ := n.sb.Try("resolvectl status")
		return strings.Contains(out, "Delegate kubespray") && !strings.Contains(out, "169.254.25.10")
	})
	before := strings.Count(readTree(n, "/run/cache.log"), "query[")
	for i := range 5 {
		out, _ := n.sb.Try(fmt.Sprintf("resolvectl query --cache=no d%d.example.test", i))
		if !strings.Contains(out, "192.0.2.1") {
			t.Errorf("d%d.example.test: %s", i, out)
		}
	}
	if after := strings.Count(readTree(n, "/run/cache.log"), "query["); after != before {
		t.Errorf("the cache saw %d host lookups after the daemon's fix", after-before)
	}
}

func readTree(n *forkyNode, p string) string {
	data, _ := os.ReadFile(n.sb.Path(p))
	return string(data)
}
