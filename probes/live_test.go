package probes_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/nstest"
	"github.com/nodedns/nodedns/probes"
)

// liveIDs are the checks that need the running node.
var liveIDs = []string{"nodelocaldns.interface", "nodelocaldns.routes", "nodelocaldns.iptables", "nodelocaldns.dns", "dns.loop", "dns.search-nxdomain", "boot.persistence"}

// corednsBinary finds the CoreDNS v1.15.0 that .ci/run builds and caches, or skips.
func corednsBinary(t testing.TB) string {
	t.Helper()
	cands := []string{os.Getenv("NODEDNS_COREDNS")}
	if c := os.Getenv("NODEDNS_CACHE"); c != "" {
		cands = append(cands, filepath.Join(c, "coredns-v1.15.0/bin/coredns"))
	}
	if h, err := os.UserHomeDir(); err == nil {
		cands = append(cands, filepath.Join(h, ".cache/nodedns-ci/coredns-v1.15.0/bin/coredns"))
	}
	if p, err := exec.LookPath("coredns"); err == nil {
		cands = append(cands, p)
	}
	for _, c := range cands {
		if fi, err := os.Stat(c); c != "" && err == nil && fi.Mode().IsRegular() {
			return c
		}
	}
	t.Skip("needs CoreDNS v1.15.0: .ci/run builds it into $NODEDNS_CACHE/coredns-v1.15.0/bin (or set NODEDNS_COREDNS)")
	return ""
}

func needTools(t testing.TB, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s (.ci/run installs it)", tool)
		}
	}
}

// liveNode is a healthy node-local DNS setup in two sandboxes: the node, with a `nodelocaldns` bridge
// (this kernel has no dummy) carrying 169.254.25.10/32, the raw-table NOTRACK rules and a real CoreDNS
// bound to it; and an upstream sandbox running dnsmasq, reached over a veth. CoreDNS serves
// cluster.local itself (as node-cache forwards it to kube-dns, outside the upstream chain) and
// forwards everything else to the resolv.conf its pod would get.
type liveNode struct {
	nd, up   *nstest.Sandbox
	bin      string
	coredns  string
	corefile string
	cache    *exec.Cmd
	upstream *exec.Cmd
	bind     string // the cache's bind addresses; "" means cacheAddr only
	resolv   string // the resolv.conf the cache forwards to
}

const (
	nodeAddr     = "10.77.5.1"
	upstreamAddr = "10.77.5.2"
	cacheAddr    = "169.254.25.10"
)

// healthyUpstream is dnsmasq answering NXDOMAIN for names under example.com (and cluster.local).
var healthyUpstream = []string{"--local=/example.com/", "--local=/cluster.local/"}

func newLiveNode(t testing.TB) *liveNode {
	t.Helper()
	nstest.Require(t)
	needTools(t, "dnsmasq", "iptables", "nsenter")
	n := &liveNode{coredns: corednsBinary(t), bin: nstest.Build(t)}
	n.nd, n.up = nstest.New(t), nstest.New(t)
	n.nd.Isolate(t)
	nstest.Veth(t, n.nd, n.up, nodeAddr+"/24", upstreamAddr+"/24")
	n.startUpstream(t, healthyUpstream...)

	unit, err := os.ReadFile("../packaging/systemd/nodedns.service")
	if err != nil {
		t.Fatal(err)
	}
	unitPath := filepath.Join(n.nd.Dir(), "nodedns.service")
	if err := os.WriteFile(unitPath, unit, 0o644); err != nil {
		t.Fatal(err)
	}
	n.corefile = filepath.Join(n.nd.Dir(), "Corefile")
	n.writeCorefile(t, "/run/coredns/resolv.conf")
	n.nd.Run(t, fmt.Sprintf(`set -e
printf 'nameserver %[1]s\nsearch example.com\n' > /etc/resolv.conf
mkdir -p /run/coredns && printf 'nameserver %[1]s\n' > /run/coredns/resolv.conf
mkdir -p /etc/systemd/system/multi-user.target.wants
cp %[2]s /etc/systemd/system/nodedns.service
ln -sf /etc/systemd/system/nodedns.service /etc/systemd/system/multi-user.target.wants/nodedns.service
ip link add nodelocaldns type bridge
ip addr add %[3]s/32 dev nodelocaldns
`, upstreamAddr, unitPath, cacheAddr))
	n.addNotrack(t)
	n.startCache(t)
	return n
}

func (n *liveNode) writeCorefile(t testing.TB, resolv string) {
	t.Helper()
	bind := n.bind
	if bind == "" {
		bind = cacheAddr
	}
	corefile := fmt.Sprintf(`cluster.local:53 {
    bind %[1]s
    hosts {
        10.233.0.1 kubernetes.default.svc.cluster.local
    }
}
.:53 {
    bind %[1]s
    errors
    forward . %[2]s
}
`, bind, resolv)
	n.resolv = resolv
	if err := os.WriteFile(n.corefile, []byte(corefile), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (n *liveNode) addNotrack(t testing.TB) {
	t.Helper()
	n.notrack(t, "-A", cacheAddr)
}

// notrack adds (-A) or deletes (-D) the raw-table NOTRACK rules node-cache installs for addr.
func (n *liveNode) notrack(t testing.TB, op, addr string) {
	t.Helper()
	n.nd.Run(t, `for c in PREROUTING OUTPUT; do for p in udp tcp; do iptables -t raw `+op+` $c -d `+addr+`/32 -p $p --dport 53 -j NOTRACK; done; done`)
}

func (n *liveNode) startUpstream(t testing.TB, args ...string) {
	t.Helper()
	if n.upstream != nil {
		_ = n.upstream.Process.Kill()
		_ = n.upstream.Wait()
	}
	base := []string{"--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv", "--no-hosts", "--listen-address=" + upstreamAddr, "--bind-interfaces", "--log-queries", "--log-facility=-"}
	n.upstream = n.up.Start(t, "dnsmasq", append(base, args...)...)
	n.waitAnswer(t, n.up, upstreamAddr, "x.example.com")
}

func (n *liveNode) startCache(t testing.TB) {
	t.Helper()
	n.stopCache()
	n.cache = n.nd.Start(t, n.coredns, "-conf", n.corefile)
	n.waitAnswer(t, n.nd, cacheAddr, "kubernetes.default.svc.cluster.local")
}

func (n *liveNode) stopCache() {
	if n.cache != nil {
		_ = n.cache.Process.Kill()
		_ = n.cache.Wait()
		n.cache = nil
	}
}

// waitAnswer waits until a DNS server in sb answers (any rcode), asking with dig.
func (n *liveNode) waitAnswer(t testing.TB, sb *nstest.Sandbox, server, name string) {
	t.Helper()
	needTools(t, "dig")
	nstest.WaitFor(t, 20*time.Second, "DNS on "+server, func() bool {
		out, err := sb.Try("dig +tries=1 +time=1 @" + server + " " + name + " A")
		return err == nil && strings.Contains(out, "status:")
	})
}

// check runs `nodedns check -o json` inside the node sandbox.
func (n *liveNode) check(t testing.TB, env ...string) (probes.Report, int) {
	t.Helper()
	cmd := n.nd.Cmd(context.Background(), n.bin, "check", "-o", "json")
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("nodedns check: %v\n%s", err, stderr.String())
	}
	var rep probes.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("nodedns check -o json: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	return rep, code
}

func byID(rep probes.Report) map[string]probes.Result {
	m := map[string]probes.Result{}
	for _, c := range rep.Checks {
		m[c.ID] = c
	}
	return m
}

func problems(rep probes.Report) []string {
	var out []string
	for _, c := range rep.Checks {
		if c.Status == probes.Problem {
			out = append(out, c.ID)
		}
	}
	return out
}

func dump(rep probes.Report) string {
	var b strings.Builder
	for _, c := range rep.Checks {
		fmt.Fprintf(&b, "  %-8s %-24s %s", c.Status, c.ID, c.Message)
		if c.Hint != "" {
			fmt.Fprintf(&b, " (hint: %s)", c.Hint)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// requireHealthy asserts that every check is ok: the whole report, not only the live ids.
func (n *liveNode) requireHealthy(t testing.TB, what string) {
	t.Helper()
	rep, code := n.check(t)
	if rep.Status != probes.OK || code != 0 {
		t.Fatalf("%s: status %s exit %d, want ok 0:\n%s", what, rep.Status, code, dump(rep))
	}
	got := byID(rep)
	for _, id := range liveIDs {
		if got[id].Status != probes.OK {
			t.Errorf("%s: %s is %s, want ok: %s", what, id, got[id].Status, got[id].Message)
		}
	}
}

// TestLiveChecks builds a healthy node, proves every live id ok on it, then breaks one thing at a
// time and proves that exactly the ids the fault belongs to turn into problems, with a hint that
// names the fix, and that the node is healthy again once the fault is repaired.
func TestLiveChecks(t *testing.T) {
	n := newLiveNode(t)
	n.requireHealthy(t, "healthy node")

	faults := []struct {
		name   string
		break_ func(t *testing.T)
		repair func(t *testing.T)
		want   []string // the ids that must be problems, and no other
		say    []string // in the problem's message or hint
	}{
		{
			name:   "address removed",
			break_: func(t *testing.T) { n.nd.Run(t, "ip addr del "+cacheAddr+"/32 dev nodelocaldns") },
			repair: func(t *testing.T) { n.nd.Run(t, "ip addr add "+cacheAddr+"/32 dev nodelocaldns") },
			want:   []string{"nodelocaldns.interface"},
			say:    []string{"lacks cache address 169.254.25.10", "ip addr add 169.254.25.10/32 dev nodelocaldns"},
		},
		{
			name:   "local route deleted",
			break_: func(t *testing.T) { n.nd.Run(t, "ip route del table local local "+cacheAddr+" dev nodelocaldns") },
			repair: func(t *testing.T) {
				n.nd.Run(t, "ip route add table local local "+cacheAddr+" dev nodelocaldns scope host proto kernel src "+cacheAddr)
			},
			want: []string{"nodelocaldns.routes"},
			say:  []string{"no local-table route for 169.254.25.10", "ip route replace local 169.254.25.10"},
		},
		{
			// Seed 004 (EKS security groups for pods): the local rule moved to 20, a VLAN rule at 10.
			name: "seed 004 ip rule",
			break_: func(t *testing.T) {
				n.nd.Run(t, `set -e
ip link add vlan.eth.2 type bridge
ip link set vlan.eth.2 up
ip route add default dev vlan.eth.2 table 102
ip rule add priority 20 lookup local
ip rule del priority 0 lookup local
ip rule add priority 10 iif vlan.eth.2 lookup 102`)
			},
			repair: func(t *testing.T) {
				n.nd.Run(t, `set -e
ip rule del priority 10 iif vlan.eth.2 lookup 102
ip rule add priority 0 lookup local
ip rule del priority 20 lookup local
ip link del vlan.eth.2`)
			},
			want: []string{"nodelocaldns.routes"},
			say:  []string{"10: from all iif vlan.eth.2 lookup 102", "traffic arriving on vlan.eth.2", "ip rule add to 169.254.25.10 lookup local priority 9"},
		},
		{
			name:   "raw table flushed",
			break_: func(t *testing.T) { n.nd.Run(t, "iptables -t raw -F") },
			repair: func(t *testing.T) { n.addNotrack(t) },
			want:   []string{"nodelocaldns.iptables"},
			say:    []string{"NOTRACK", "PREROUTING udp", "OUTPUT tcp", "restart its pod"},
		},
		{
			name:   "CoreDNS stopped",
			break_: func(t *testing.T) { n.stopCache() },
			repair: func(t *testing.T) { n.startCache(t) },
			want:   []string{"nodelocaldns.dns"},
			say:    []string{"nothing listens on 169.254.25.10 port 53", "node-local-dns pod"},
		},
		{
			// Seed 000: interface, address and route fine, packets to the cache vanish (there: Cilium
			// BPF host routing; here: a DROP rule).
			name: "packets to the cache dropped",
			break_: func(t *testing.T) {
				n.nd.Run(t, "iptables -I INPUT -d "+cacheAddr+" -p udp --dport 53 -j DROP && iptables -I INPUT -d "+cacheAddr+" -p tcp --dport 53 -j DROP")
			},
			repair: func(t *testing.T) { n.nd.Run(t, "iptables -F INPUT") },
			want:   []string{"nodelocaldns.dns"},
			say:    []string{"does not answer within 2s although nodelocaldns carries 169.254.25.10", "timed out", "hostLegacyRouting"},
		},
		{
			// Seed 003: the upstream answers NOERROR without records for a name that does not exist.
			name: "upstream NODATA under example.com",
			break_: func(t *testing.T) {
				n.startUpstream(t, "--local=/example.com/", "--address=/example.com/10.9.9.9", "--local=/cluster.local/")
			},
			repair: func(t *testing.T) { n.startUpstream(t, healthyUpstream...) },
			want:   []string{"dns.search-nxdomain"},
			say:    []string{"search domain example.com", upstreamAddr + " answers NODATA", "AAAA", "musl"},
		},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			f.break_(t)
			rep, code := n.check(t)
			got := problems(rep)
			if !slices.Equal(got, f.want) || code != 1 {
				t.Fatalf("problems %v exit %d, want exactly %v exit 1:\n%s", got, code, f.want, dump(rep))
			}
			r := byID(rep)[f.want[0]]
			for _, s := range f.say {
				if !strings.Contains(r.Message+" "+r.Hint, s) {
					t.Errorf("%s does not say %q:\n  message: %s\n  hint: %s", r.ID, s, r.Message, r.Hint)
				}
			}
			if r.Hint == "" {
				t.Errorf("%s has no hint", r.ID)
			}
			f.repair(t)
			n.requireHealthy(t, "after repairing "+f.name)
		})
	}

	t.Run("CoreDNS forwarding through a resolved stub that forwards back to the cache", func(t *testing.T) {
		n.nd.SystemBus(t)
		n.nd.Run(t, `set -e
mkdir -p /etc/systemd/resolved.conf.d
printf '[Resolve]\nDNS=`+cacheAddr+`\n' > /etc/systemd/resolved.conf.d/kubespray.conf
chmod -R a+rX /etc/systemd`)
		res := n.nd.StartResolved(t)
		defer func() {
			res.Stop(t)
			n.nd.Run(t, "rm -rf /etc/systemd/resolved.conf.d/kubespray.conf /run/systemd/resolve")
			n.nd.Run(t, "printf 'nameserver "+upstreamAddr+"\\n' > /run/coredns/resolv.conf")
			n.startCache(t)
			n.requireHealthy(t, "after the resolved loop")
		}()
		// The cache pod's resolv.conf names the stub (what kubelet hands a pod whose node file is
		// resolved's stub-resolv.conf); CoreDNS's loop plugin does not catch this loop.
		n.nd.Run(t, "printf 'nameserver 127.0.0.53\\n' > /run/coredns/resolv.conf")
		n.startCache(t)
		rep, code := n.check(t)
		got := problems(rep)
		// resolved.dns is the same fault seen from resolved's configuration (DNS=169.254.25.10 in a
		// drop-in); dns.loop is the live chain. Both are right, and nothing else may be a problem.
		if want := []string{"resolved.dns", "dns.loop"}; !slices.Equal(got, want) || code != 1 {
			t.Fatalf("problems %v exit %d, want exactly %v exit 1:\n%s", got, code, want, dump(rep))
		}
		r := byID(rep)["dns.loop"]
		for _, s := range []string{"coredns (pid", "127.0.0.53", "systemd-resolved's stub", "169.254.25.10", "loop plugin does not catch"} {
			if !strings.Contains(r.Message, s) {
				t.Errorf("dns.loop does not say %q: %s", s, r.Message)
			}
		}
	})

	t.Run("baseline after a faked reboot", func(t *testing.T) {
		// The healthy check above recorded the baseline; a reboot is faked by changing the boot id
		// recorded in it (the kernel's cannot change), with a grace period already over.
		state := n.nd.Path(probes.StatePath)
		fakeReboot := func(t *testing.T) {
			t.Helper()
			data, err := os.ReadFile(state)
			if err != nil {
				t.Fatalf("no baseline after healthy checks: %v", err)
			}
			b, err := probes.ParseBaseline(data)
			if err != nil {
				t.Fatal(err)
			}
			b.BootID = "00000000-0000-0000-0000-000000000000"
			data, _ = json.Marshal(b)
			if err := os.WriteFile(state, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		grace := "NODEDNS_PROBES_BOOTGRACE=1s"

		// An address node-cache also binds (the cluster DNS IP) that did not come back: only the
		// baseline knows it was there. Every address on the interface is a cache address
		// (docs/contract.md), so while it is there node-cache binds it and has NOTRACK rules for it, as
		// the real node-cache does for both of its addresses.
		n.nd.Run(t, "ip addr add 10.233.0.3/32 dev nodelocaldns")
		n.notrack(t, "-A", "10.233.0.3")
		n.bind = cacheAddr + " 10.233.0.3"
		n.writeCorefile(t, n.resolv)
		n.startCache(t)
		t.Cleanup(func() {
			// Back to the one-address node for the later cases (the address itself is deleted below).
			n.bind = ""
			_, _ = n.nd.Try("ip addr del 10.233.0.3/32 dev nodelocaldns")
			n.writeCorefile(t, n.resolv)
			n.startCache(t)
			n.notrack(t, "-D", "10.233.0.3")
		})
		n.requireHealthy(t, "with the cluster DNS IP on the interface")
		if data, _ := os.ReadFile(state); !bytes.Contains(data, []byte("10.233.0.3/32")) {
			t.Fatalf("baseline lacks the new address:\n%s", data)
		}
		fakeReboot(t)
		n.nd.Run(t, "ip addr del 10.233.0.3/32 dev nodelocaldns")
		rep, code := n.check(t, grace)
		if got := problems(rep); !slices.Equal(got, []string{"boot.persistence"}) || code != 1 {
			t.Fatalf("problems %v exit %d, want exactly [boot.persistence]:\n%s", got, code, dump(rep))
		}
		r := byID(rep)["boot.persistence"]
		for _, s := range []string{"missing since the reboot", "10.233.0.3/32", "grace period"} {
			if !strings.Contains(r.Message, s) {
				t.Errorf("boot.persistence does not say %q: %s", s, r.Message)
			}
		}
		// Within the grace period the same state is not yet a problem: unknown, so --wait keeps going.
		rep, code = n.check(t, "NODEDNS_PROBES_BOOTGRACE=1000h")
		if got := byID(rep)["boot.persistence"]; got.Status != probes.Unknown || code != 2 || !strings.Contains(got.Message, "within the 1000h0m0s grace period") {
			t.Errorf("within the grace period: %s exit %d: %s", got.Status, code, got.Message)
		}

		// The baseline interface itself missing: the interface check sees it now, boot.persistence
		// says it was there at the last boot.
		n.nd.Run(t, "ip addr add 10.233.0.3/32 dev nodelocaldns")
		n.requireHealthy(t, "address back")
		fakeReboot(t)
		n.nd.Run(t, "ip link del nodelocaldns")
		rep, code = n.check(t, grace)
		if got := problems(rep); !slices.Equal(got, []string{"nodelocaldns.interface", "boot.persistence"}) || code != 1 {
			t.Fatalf("problems %v exit %d, want [nodelocaldns.interface boot.persistence]:\n%s", got, code, dump(rep))
		}
		if r := byID(rep)["boot.persistence"]; !strings.Contains(r.Message, "interface nodelocaldns") || !strings.Contains(r.Hint, "node-local-dns") {
			t.Errorf("boot.persistence: %s (hint %s)", r.Message, r.Hint)
		}
		n.nd.Run(t, "ip link add nodelocaldns type bridge && ip addr add "+cacheAddr+"/32 dev nodelocaldns && ip addr add 10.233.0.3/32 dev nodelocaldns")
		n.startCache(t)
		n.requireHealthy(t, "interface back")
	})

	t.Run("--wait returns 0 once the fault is repaired", func(t *testing.T) {
		n.nd.Run(t, "iptables -t raw -F")
		cmd := n.nd.Cmd(context.Background(), n.bin, "check", "--wait", "60s", "--npd")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		start := time.Now()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1500 * time.Millisecond)
		n.addNotrack(t)
		err := cmd.Wait()
		if err != nil || strings.TrimSpace(out.String()) != "ok" {
			t.Fatalf("check --wait: %v, output %q; want exit 0 and `ok`", err, out.String())
		}
		// It returned because the node became ok, not because the wait ran out.
		if el := time.Since(start); el >= 60*time.Second {
			t.Errorf("check --wait returned after %s: the wait ran out", el)
		}
	})

	t.Run("--npd and exit codes", func(t *testing.T) {
		n.nd.Run(t, "iptables -t raw -F")
		out, err := n.nd.Cmd(context.Background(), n.bin, "check", "--npd").Output()
		n.addNotrack(t)
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 1 {
			t.Fatalf("check --npd on a problem: %v, want exit 1", err)
		}
		line := strings.TrimSuffix(string(out), "\n")
		if strings.Contains(line, "\n") || len(line) > probes.NPDMaxLen || !strings.HasPrefix(line, "nodelocaldns.iptables: ") {
			t.Errorf("--npd printed %q (%d chars): want one line of at most %d naming nodelocaldns.iptables", line, len(line), probes.NPDMaxLen)
		}
		// With the cache down a loop cannot be probed: dns.loop is unknown, not a problem (docs/contract.md).
		n.stopCache()
		rep, code := n.check(t)
		n.startCache(t)
		if st := byID(rep)["dns.loop"].Status; st != probes.Unknown || code != 1 {
			t.Errorf("cache down: dns.loop %s exit %d, want unknown and exit 1:\n%s", st, code, dump(rep))
		}
		n.requireHealthy(t, "after --npd")
	})
}

// shellPreflight is what a preflight script does without nodedns, on the same node: the interface
// and address, the local route, the rules, the raw table in both iptables flavours, resolved (when
// resolvectl exists), the cache over UDP and TCP, its process and upstream file, a random name
// through it, and NXDOMAIN under the search domain at the upstream.
const shellPreflight = `set -e
ip -o addr show dev nodelocaldns | grep -q 'inet 169.254.25.10/32'
ip route show table local | grep -q '^local 169.254.25.10 dev nodelocaldns'
ip rule show | awk '/lookup local/ {exit} {bad=1} END {exit bad}'
for c in PREROUTING OUTPUT; do for p in udp tcp; do
  (iptables-save -t raw; iptables-legacy-save -t raw 2>/dev/null) | grep -q -- "-A $c -d 169.254.25.10/32 -p $p -m $p --dport 53 -j \(NOTRACK\|CT --notrack\)"
done; done
if command -v resolvectl >/dev/null; then resolvectl dns >/dev/null || true; fi
dig +time=2 +tries=1 @169.254.25.10 kubernetes.default.svc.cluster.local A | grep -q 'status: NOERROR'
dig +tcp +time=2 +tries=1 @169.254.25.10 kubernetes.default.svc.cluster.local A | grep -q 'status: NOERROR'
pid=$(ss -Hlunp 'sport = :53' | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2)
grep -q nameserver /proc/$pid/root/run/coredns/resolv.conf
dig +time=2 +tries=1 @169.254.25.10 $RANDOM$RANDOM.$RANDOM. HINFO | grep -q 'status: \(REFUSED\|NXDOMAIN\|NOERROR\)'
for t in A AAAA; do
  dig +time=2 +tries=1 @10.77.5.2 nodedns-$RANDOM.example.com $t | grep -q 'status: NXDOMAIN'
done
`

// BenchmarkCheck measures the wall time of a full `nodedns check` on the healthy sandbox node next to
// the shell preflight doing the same checks with ip, iptables-save, resolvectl (absent here) and dig,
// in the same run. Both run inside the sandbox through nsenter, so they pay the same entry cost.
func BenchmarkCheck(b *testing.B) {
	nstest.Require(b)
	needTools(b, "dig", "ss")
	n := newLiveNode(b)
	b.Run("nodedns-check", func(b *testing.B) {
		for b.Loop() {
			out, err := n.nd.Cmd(context.Background(), n.bin, "check", "--npd").CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != "ok" {
				b.Fatalf("nodedns check: %v: %s", err, out)
			}
		}
	})
	b.Run("shell-preflight", func(b *testing.B) {
		for b.Loop() {
			if out, err := n.nd.Cmd(context.Background(), "bash", "-c", shellPreflight).CombinedOutput(); err != nil {
				b.Fatalf("shell preflight: %v: %s", err, out)
			}
		}
	})
}
