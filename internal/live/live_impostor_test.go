package live_test

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/testutil/nstest"
	"github.com/nodedns/nodedns/probes"
)

// impostorDir holds nobody's programs and Corefiles on the impostor tests' nodes, in a tmpfs the
// node mounts over /var/tmp: the cached CoreDNS bound in as coredns and as node-cache (the binary itself lives under
// root's 0700 home, which nobody cannot walk), Corefiles owned by nobody.
const impostorDir = "/var/tmp/imp"

// nobody is the unprivileged user the impostors run as (no passwd entry is added).
const nobody = 65534

// impostorNode is a node whose cache and cluster DNS are real and healthy: CoreDNS as the
// node-local cache on nodelocaldns (169.254.25.10, fd00:25::10) in kubespray's Corefile shape
// (cluster.local, in-addr.arpa and ip6.arpa to the cluster DNS 10.233.0.3, the rest to the node's
// upstream), and a second CoreDNS as the cluster DNS in a kube-system pod (containerd's record of
// it: namespace kube-system), whose resolv.conf is loop-free.
func newImpostorNode(t *testing.T) (*liveNode, *nstest.Pod) {
	t.Helper()
	n, pod := newChainNode(t)
	coredns := nstest.CoreDNS(t)
	prepareImpostors(t, n)
	corefile := filepath.Join(n.nd.Dir(), "Corefile-coredns")
	if err := os.WriteFile(corefile, fmt.Appendf(nil, "cluster.local:53 {\n    hosts {\n        %s %s\n    }\n}\n.:53 {\n    forward . /etc/resolv.conf\n}\n",
		nstest.ClusterNameAddr, strings.TrimSuffix(nstest.ClusterName, ".")), 0o644); err != nil {
		t.Fatal(err)
	}
	n.nd.Run(t, fmt.Sprintf("mkdir -p /etc/netns/%[1]s && printf 'nameserver %[2]s\\n' > /etc/netns/%[1]s/resolv.conf", pod.Netns, upstreamAddr))
	n.nd.StartPID(t, "ip", "netns", "exec", pod.Netns, coredns, "-conf", corefile)
	nstest.WaitFor(t, 20*time.Second, "CoreDNS in its pod", func() bool {
		out, err := n.nd.Try(fmt.Sprintf("dig +tries=1 +time=1 @%s %s A", chainClusterDNS, nstest.ClusterName))
		return err == nil && strings.Contains(out, nstest.ClusterNameAddr)
	})
	n.cache = n.nd.StartCache(t, nstest.CacheOptions{Forward: "/run/coredns/resolv.conf", ClusterDNS: netip.MustParseAddr(chainClusterDNS)})
	return n, pod
}

// prepareImpostors mounts a tmpfs over the node's /var/tmp and binds the cached CoreDNS into
// impostorDir as coredns and node-cache.
func prepareImpostors(t *testing.T, n *liveNode) {
	t.Helper()
	n.nd.Run(t, fmt.Sprintf(`set -e
mount -t tmpfs -o mode=1777 tmpfs /var/tmp
mkdir -m 0755 %[1]s
touch %[1]s/coredns %[1]s/node-cache
mount --bind %[2]s %[1]s/coredns && mount --bind %[2]s %[1]s/node-cache
`, impostorDir, nstest.Quote(nstest.CoreDNS(t))))
}

// startImpostor runs CoreDNS under comm (coredns or node-cache) as nobody with corefile: asRoot is
// a shell prefix run as root before the uid is dropped (entering a pod's namespaces), asNobody one
// run as nobody after it (nobody's own namespaces). It returns the process's PID as the node numbers
// it once it holds a socket of its own on port port, and kills it when the test ends.
func startImpostor(t *testing.T, n *liveNode, comm, asRoot, asNobody, corefile string, port int) int {
	return startImpostorAfter(t, n, "", comm, asRoot, asNobody, corefile, port)
}

// startImpostorAfter is startImpostor with a script run first, in the same shell (which then
// forks the impostor: a write of ns_last_pid there decides its PID).
func startImpostorAfter(t *testing.T, n *liveNode, before, comm, asRoot, asNobody, corefile string, port int) int {
	t.Helper()
	cf := fmt.Sprintf("%s/Corefile-%s-%d", impostorDir, comm, time.Now().UnixNano())
	if err := os.WriteFile(n.nd.Path(cf), []byte(corefile), 0o644); err != nil {
		t.Fatal(err)
	}
	n.nd.Run(t, "chown 65534:65534 "+cf)
	cmd := fmt.Sprintf("%s setpriv --reuid=%d --regid=%d --clear-groups %s %s/%s -conf %s", asRoot, nobody, nobody, asNobody, impostorDir, comm, cf)
	n.nd.Run(t, before+"\n("+cmd+") >/dev/null 2>&1 &")
	pid := 0
	hex := fmt.Sprintf(":%04X ", port)
	nstest.WaitFor(t, 20*time.Second, fmt.Sprintf("nobody's %s holding port %d", comm, port), func() bool {
		ents, _ := os.ReadDir(n.nd.Path("/proc"))
		for _, e := range ents {
			p, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			dir := n.nd.Path("/proc/" + e.Name())
			c, _ := os.ReadFile(dir + "/comm")
			cmdline, _ := os.ReadFile(dir + "/cmdline")
			status, _ := os.ReadFile(dir + "/status")
			if strings.TrimSpace(string(c)) != comm || !strings.Contains(string(cmdline), cf) ||
				!strings.Contains(string(status), fmt.Sprintf("\nUid:\t%d\t%d\t%d\t%d\n", nobody, nobody, nobody, nobody)) {
				continue
			}
			udp, _ := os.ReadFile(dir + "/net/udp")
			udp6, _ := os.ReadFile(dir + "/net/udp6")
			if strings.Contains(string(udp)+string(udp6), hex) {
				pid = p
				return true
			}
		}
		return false
	})
	t.Cleanup(func() { n.nd.Run(t, fmt.Sprintf("kill %d 2>/dev/null; true", pid)) })
	return pid
}

// loopCorefile sends every zone, the cluster's and the reverse ones included, to the node-local
// cache: what a DNS pod on the node that loops back looks like to dns.loop.
const loopCorefile = ".:53 {\n    forward . " + cacheAddr + "\n}\n"

// verdicts are a report's statuses by check id.
func verdicts(rep probes.Report) map[string]probes.Status {
	m := map[string]probes.Status{}
	for _, c := range rep.Checks {
		m[c.ID] = c.Status
	}
	return m
}

// TestLiveCacheImpostors (docs/contract.md "Check ids", dns.loop; "Standby"): on a healthy node
// with a real cache and a real cluster DNS in its kube-system pod, processes that only call
// themselves coredns or node-cache, run by nobody (uid 65534), change no check's verdict, whatever
// their Corefile says (here: every zone forwarded to the cache, a loop):
//   - coredns and node-cache in a user and network namespace of their own, each bound to the
//     cache's address 169.254.25.10 port 53 there (any user can make both);
//   - coredns in a tenant's pod (containerd's record: namespace tenant-a), port 53 bound in the
//     pod's namespace (ip_unprivileged_port_start 0, containerd 2.x's default for pods), with a
//     pod name that reads like the cluster DNS's;
//   - coredns in a PID namespace of a pod's own, without a port-53 socket (it listens on 5353).
//
// Measured before (dns.loop judged every coredns or node-cache with a port-53 socket in its own
// namespace, named it by its hostname): the first three turned dns.loop from ok to problem, "coredns
// (pid 377) sends cluster.local, in-addr.arpa, ip6.arpa back: .../Corefile-coredns line 2 forwards
// to 169.254.25.10 (the node-local cache)", the same for node-cache (pid 418), and for the tenant's
// pod "coredns pod coredns-7f9c6b5d4-tenant (pid 460) ..." with the hint `kubectl -n kube-system
// delete pod coredns-7f9c6b5d4-tenant` (a tenant's pod, presented as kube-system's); the fourth
// changed nothing. The interface-mode cache itself was not taken (the host's socket table).
func TestLiveCacheImpostors(t *testing.T) {
	n, _ := newImpostorNode(t)
	base := n.requireHealthy(t, "the node before any impostor")
	t.Logf("dns.loop before any impostor: %s", byID(base)["dns.loop"].Message)
	tenant := n.nd.AddPod(t, nstest.PodOptions{Name: "coredns-7f9c6b5d4-tenant", Namespace: "tenant-a", HostIf: "lxc7e4a1b2c3d4e",
		Cgroup: "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod9a8b7c6d_5e4f_4a3b_8c2d_1e0f9a8b7c6d.slice/cri-containerd-eeee.scope"})
	n.watchPods(t, tenant)
	own := fmt.Sprintf("unshare -Urn sh -c 'ip link set lo up && ip addr add %s/32 dev lo && exec \"$@\"' sh", cacheAddr)
	inTenant := "ip netns exec " + tenant.Netns + " sh -c 'sysctl -qw net.ipv4.ip_unprivileged_port_start=0 && exec \"$@\"' sh"
	for _, tc := range []struct {
		name, comm, asRoot, asNobody, corefile string
		port                                   int
	}{
		{"coredns in namespaces of its own", "coredns", "", own, loopCorefile, 53},
		{"node-cache in namespaces of its own", "node-cache", "", own, loopCorefile, 53},
		{"coredns in a tenant's pod", "coredns", inTenant, "", loopCorefile, 53},
		{"coredns in a pod's PID namespace, no port-53 socket", "coredns", "unshare -p -f --mount-proc", "", ".:5353 {\n    forward . " + cacheAddr + "\n}\n", 5353},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pid := startImpostor(t, n, tc.comm, tc.asRoot, tc.asNobody, tc.corefile, tc.port)
			rep, _ := n.check(t)
			got, want := verdicts(rep), verdicts(base)
			for id, st := range want {
				if got[id] != st {
					t.Errorf("nobody's %s (pid %d) changed %s from %s to %s: %s (hint: %s)", tc.comm, pid, id, st, got[id], byID(rep)[id].Message, byID(rep)[id].Hint)
				}
			}
			t.Logf("dns.loop with nobody's %s (pid %d): %s %s", tc.comm, pid, got["dns.loop"], byID(rep)["dns.loop"].Message)
			n.requirePodsUnchanged(t)
		})
	}
}

// TestLiveLRPCacheImpostor (docs/contract.md "Cache mode", "Check ids"): on TestLRPMode's healthy
// node (node-local-dns in its kube-system pod behind the service IP's redirect), nobody's process
// named node-cache in a tenant's pod, port 53 bound there, whose Corefile forwards everything to the
// cluster DNS service IP (a loop, were it the cache), and one named coredns with a lower PID than
// the cache's, change no check's verdict: neither is the node's cache.
//
// Measured before (the cache in lrp mode was any node-cache, else the lowest-PID coredns, with a
// port-53 socket in its own namespace): dns.loop turned from ok to problem for both, "node-cache
// (pid 332) forwards in a loop: 10.233.0.10 (.../Corefile-node-cache line 2) is the cluster DNS
// service", then "coredns (pid 101) forwards in a loop: ...", with the hint to re-create the
// node-local-dns pod; a clean impostor would as well have hidden a real cache's loop.
func TestLiveLRPCacheImpostor(t *testing.T) {
	n, _, _ := newLRPNode(t)
	prepareImpostors(t, n)
	env := []string{"NODEDNS_NODELOCALDNS_MODE=lrp"}
	base, code := n.check(t, env...)
	if base.Status != probes.OK || code != 0 {
		t.Fatalf("the lrp node before any impostor: %s exit %d:\n%s", base.Status, code, dump(base))
	}
	t.Logf("dns.loop before any impostor: %s", byID(base)["dns.loop"].Message)
	m := regexp.MustCompile(`^coredns \(pid (\d+)\)`).FindStringSubmatch(byID(base)["dns.loop"].Message)
	if m == nil {
		t.Fatalf("dns.loop does not name the cache's process: %s", byID(base)["dns.loop"].Message)
	}
	cachePID, _ := strconv.Atoi(m[1])
	tenant := n.nd.AddPod(t, nstest.PodOptions{Name: "node-local-dns-tenant", Namespace: "tenant-a", HostIf: "lxc7e4a1b2c3d4f",
		Cgroup: "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod9a8b7c6d_5e4f_4a3b_8c2d_1e0f9a8b7c6e.slice/cri-containerd-ffff.scope"})
	n.watchPods(t, tenant)
	inTenant := "ip netns exec " + tenant.Netns + " sh -c 'sysctl -qw net.ipv4.ip_unprivileged_port_start=0 && exec \"$@\"' sh"
	loop := ".:53 {\n    forward . " + lrpClusterDNS + "\n}\n"
	for _, tc := range []struct{ name, comm, pre string }{
		{"node-cache in a tenant's pod", "node-cache", ""},
		// ns_last_pid: the kernel hands the next processes PIDs above 100, below the cache's.
		{"coredns in a tenant's pod, a lower PID than the cache", "coredns", "echo 100 > /proc/sys/kernel/ns_last_pid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pid := startImpostorAfter(t, n, tc.pre, tc.comm, inTenant, "", loop, 53)
			if tc.pre != "" && pid > cachePID {
				t.Fatalf("nobody's %s has PID %d, the cache %d: the case wants it below", tc.comm, pid, cachePID)
			}
			rep, _ := n.check(t, env...)
			got, want := verdicts(rep), verdicts(base)
			for id, st := range want {
				if got[id] != st {
					t.Errorf("nobody's %s (pid %d) changed %s from %s to %s: %s (hint: %s)", tc.comm, pid, id, st, got[id], byID(rep)[id].Message, byID(rep)[id].Hint)
				}
			}
			t.Logf("dns.loop with nobody's %s (pid %d): %s %s", tc.comm, pid, got["dns.loop"], byID(rep)["dns.loop"].Message)
		})
	}
}
