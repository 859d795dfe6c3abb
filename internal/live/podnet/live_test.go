package podnet_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nodedns/nodedns/internal/live/podnet"
	"github.com/nodedns/nodedns/internal/testutil/nstest"
	"github.com/nodedns/nodedns/probes/podprobe"
)

// node is a sandbox node with its own PID and UTS namespaces (so a /proc scan sees only its
// processes) and a healthy dual-stack node-local cache: the nodelocaldns bridge up with
// 169.254.25.10/32, fd00:25::10/128 and the kernel's fe80:: address, NOTRACK rules for both
// families, a real CoreDNS bound to both addresses. Forwarding is on, as on every Kubernetes node.
type node struct {
	sb    *nstest.Sandbox
	cache *nstest.Cache
}

// newNode runs on this machine's Debian only, not per suite: podnet reads /proc and the pods'
// namespaces and sends queries itself; the node's netfilter (the NOTRACK rules, the seed's nft drop)
// lives in the kernel, which enforces it the same whichever suite's iptables or nft wrote it, and
// podnet never reads it. The live checks' tests (internal/live) run per suite where nodedns does
// read those rules.
func newNode(t testing.TB) *node {
	t.Helper()
	nstest.Require(t)
	nstest.NeedTools(t, "apt-get install nftables", "nft")
	sb := nstest.NewWith(t, nstest.Options{UTSNamespace: true})
	sb.Run(t, "hostname node-1 && sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1")
	return &node{sb: sb, cache: sb.StartCache(t, nstest.CacheOptions{})}
}

// options point Find at the node: its /proc and /run, its init as the host process.
func (n *node) options() podnet.Options {
	return podnet.Options{ProcRoot: n.sb.Path("/proc"), RunRoot: n.sb.Path("/run"), Host: fmt.Sprintf("/proc/%d", n.sb.PID)}
}

func (n *node) query(timeout time.Duration) podprobe.Query {
	return podprobe.Query{Name: nstest.ClusterName, Targets: n.cache.Addrs, Timeout: timeout, Host: fmt.Sprintf("/proc/%d", n.sb.PID)}
}

func (n *node) find(t testing.TB) []podprobe.Pod {
	t.Helper()
	pods, err := podnet.Find(context.Background(), n.options())
	if err != nil {
		t.Fatal(err)
	}
	return pods
}

// requireThreadsHome fails the test when any thread of this process is in another network or UTS
// namespace than the process's main thread.
func requireThreadsHome(t testing.TB) {
	t.Helper()
	home := map[string]string{}
	for _, ns := range []string{"net", "uts"} {
		l, err := os.Readlink("/proc/self/ns/" + ns)
		if err != nil {
			t.Fatal(err)
		}
		home[ns] = l
	}
	tasks, err := filepath.Glob("/proc/self/task/*/ns")
	if err != nil || len(tasks) == 0 {
		t.Fatalf("list threads: %v", err)
	}
	for _, task := range tasks {
		for ns, want := range home {
			got, err := os.Readlink(filepath.Join(task, ns))
			if err != nil {
				continue // the thread exited
			}
			if got != want {
				t.Errorf("thread %s is in %s, want %s", filepath.Dir(task), got, want)
			}
		}
	}
}

type summary struct {
	Name, NamedBy, HostIf, PodIf, Netns, PodUID, QoS string
	Kubepods                                         bool
}

func summarize(pods []podprobe.Pod) []summary {
	var out []summary
	for _, p := range pods {
		out = append(out, summary{p.Name, p.NamedBy, p.HostIf, p.PodIf, p.Netns, p.PodUID, p.QoS, p.Kubepods})
	}
	return out
}

// answeredAll fails unless every query in rs was answered NOERROR.
func answeredAll(t testing.TB, who string, rs []podprobe.Result, targets int) {
	t.Helper()
	if len(rs) != 2*targets {
		t.Errorf("%s: %d results, want %d: %v", who, len(rs), 2*targets, rs)
	}
	for _, r := range rs {
		if r.Outcome != podprobe.Answered || r.Rcode != 0 {
			t.Errorf("%s: %s (%v)", who, r, r.Err)
		}
	}
}

const (
	webUID = "0b8f5a6c-2d1e-4f3a-9c7b-1a2b3c4d5e6f"
	apiUID = "11111111-2222-4333-8444-555555555555"
)

// twoPods adds web-0 (Cilium-style lxc… peer, containerd, systemd cgroup driver on cgroup v2) and
// api-0 (AWS branch-ENI-style vlan… peer, containerd, cgroupfs driver on cgroup v1 where this
// machine has a v1 hierarchy).
func (n *node) twoPods(t testing.TB) (web, api *nstest.Pod) {
	t.Helper()
	web = n.sb.AddPod(t, nstest.PodOptions{Name: "web-0", HostIf: "lxc4f2a9c1b7d3e",
		Cgroup: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(webUID, "-", "_") + ".slice/cri-containerd-aaaa.scope"})
	api = n.sb.AddPod(t, nstest.PodOptions{Name: "api-0", HostIf: "vlan8c0e1d2f3a4",
		Cgroup: "/kubepods/besteffort/pod" + apiUID + "/bbbb", CgroupV1: true})
	return web, api
}

// TestPodsHealthy: on a healthy dual-stack node both pods are found once each (by cgroup and by
// name), named by their hostnames, paired with their host-side veths, and answered over UDP and TCP
// on both cache addresses, as the host is. Nothing in the pods' namespaces changes, and no thread of
// this process is left in a pod's namespace.
func TestPodsHealthy(t *testing.T) {
	n := newNode(t)
	web, api := n.twoPods(t)
	t.Logf("cgroups: web-0 %s, api-0 %s", web.Cgroup, api.Cgroup)
	before := map[string]string{web.Name: web.NetState(t), api.Name: api.NetState(t)}

	pods := n.find(t)
	want := []summary{
		{"api-0", podprobe.NamedByHostname, api.HostIf, "eth0", api.Netns, apiUID, "besteffort", true},
		{"web-0", podprobe.NamedByHostname, web.HostIf, "eth0", web.Netns, webUID, "burstable", true},
	}
	if d := cmp.Diff(want, summarize(pods)); d != "" {
		t.Fatalf("Find (-want +got):\n%s", d)
	}
	for _, p := range pods {
		if !strings.HasPrefix(p.NetNS, n.sb.Path("/run/netns/")) {
			t.Errorf("%s is entered through %s, want its /run/netns file", p.Name, p.NetNS)
		}
	}
	if !strings.Contains(n.sb.Run(t, "ip -6 addr show dev nodelocaldns"), "fe80::") {
		t.Error("the up nodelocaldns bridge has no fe80:: address: the node is not the one the issue describes")
	}

	rep := podnet.Probe(context.Background(), pods, n.query(2*time.Second))
	if rep.HostErr != nil {
		t.Fatal(rep.HostErr)
	}
	answeredAll(t, "host", rep.Host, 2)
	for _, pr := range rep.Pods {
		if pr.Err != nil {
			t.Errorf("%s: %v", pr.Pod.Name, pr.Err)
		}
		answeredAll(t, pr.Pod.Name, pr.Results, 2)
	}
	if f := rep.Failures(); len(f) != 0 {
		t.Errorf("failures on a healthy node: %v", f)
	}
	t.Logf("find and probe of 2 pods: probe round %v", rep.Elapsed)

	requireThreadsHome(t)
	for _, p := range []*nstest.Pod{web, api} {
		if d := cmp.Diff(before[p.Name], p.NetState(t)); d != "" {
			t.Errorf("pod %s's network changed (-before +after):\n%s", p.Name, d)
		}
	}
}

// TestPodsSeed000 stands in for Cilium's BPF drop of pod traffic to the node-local address
// (cilium#36761) with a netfilter rule at prerouting priority -300 dropping what comes in on lxc*:
// the lxc pod times out on every address and protocol, the vlan pod and the host are answered, and
// Failures names only the lxc pod with its host-side interface.
func TestPodsSeed000(t *testing.T) {
	n := newNode(t)
	web, _ := n.twoPods(t)
	n.sb.Run(t, `set -e
nft add table inet nstest_seed000
nft add chain inet nstest_seed000 pre '{ type filter hook prerouting priority -300; }'
nft add rule inet nstest_seed000 pre iifname "lxc*" ip daddr 169.254.25.10 drop
nft add rule inet nstest_seed000 pre iifname "lxc*" ip6 daddr fd00:25::10 drop
`)
	pods := n.find(t)
	rep := podnet.Probe(context.Background(), pods, n.query(500*time.Millisecond))
	answeredAll(t, "host", rep.Host, 2)
	for _, pr := range rep.Pods {
		if pr.Pod.Name == "api-0" {
			answeredAll(t, "api-0", pr.Results, 2)
		}
	}
	requireFailure(t, rep, web, podprobe.Timeout)
	requireThreadsHome(t)
}

// TestPodsSeed004 puts an EKS branch-ENI rule ahead of the local table (`ip rule add iif vlan…
// lookup 102`, a blackhole default in 102, for both families): the vlan pod is cut off, the lxc pod
// and the host are answered.
func TestPodsSeed004(t *testing.T) {
	n := newNode(t)
	web, api := n.twoPods(t)
	n.sb.Run(t, fmt.Sprintf(`set -e
for v in -4 -6; do
  ip $v rule add pref 20 lookup local
  ip $v rule del pref 0
  ip $v rule add pref 10 iif %s lookup 102
  ip $v route add blackhole default table 102
done
`, api.HostIf))
	rep := podnet.Probe(context.Background(), n.find(t), n.query(500*time.Millisecond))
	answeredAll(t, "host", rep.Host, 2)
	for _, pr := range rep.Pods {
		if pr.Pod.Name == web.Name {
			answeredAll(t, web.Name, pr.Results, 2)
		}
	}
	requireFailure(t, rep, api, podprobe.Timeout)
}

// requireFailure asserts that Failures is exactly pod p with every query failed as want.
func requireFailure(t testing.TB, rep podprobe.Report, p *nstest.Pod, want podprobe.Outcome) {
	t.Helper()
	f := rep.Failures()
	if len(f) != 1 || f[0].Pod.Name != p.Name || f[0].Pod.HostIf != p.HostIf {
		t.Fatalf("failures %+v, want only %s on %s", f, p.Name, p.HostIf)
	}
	if len(f[0].Results) != 4 {
		t.Errorf("%s failed %d queries, want all 4: %v", p.Name, len(f[0].Results), f[0].Results)
	}
	for _, r := range f[0].Results {
		if r.Outcome != want {
			t.Errorf("%s: %s (%v), want %s", p.Name, r, r.Err, want)
		}
	}
}

// TestNotPods: a node with no pod has no pod namespace, even with a VPN's namespace and daemon,
// podman's namespace, a hostNetwork pod (kubepods, the host's namespace) and the host's namespace
// pinned under a containerd-like name. Then a real pod is the only one found.
func TestNotPods(t *testing.T) {
	n := newNode(t)
	if pods := n.find(t); len(pods) != 0 {
		t.Fatalf("a node without pods has %v", summarize(pods))
	}
	n.sb.Run(t, "ip netns add wg-corp && ip netns add netns-"+nstest.UUID(t))
	n.sb.StartPID(t, "ip", "netns", "exec", "wg-corp", "unshare", "--uts", "sh", "-c", "hostname vpn && exec sleep infinity")
	_, hostNetPID := n.sb.StartPID(t, "sleep", "infinity")
	nstest.FakeCgroup(t, hostNetPID, "/kubepods/besteffort/pod"+apiUID+"/cccc", false)
	pinned := "/run/netns/cni-" + nstest.UUID(t)
	n.sb.Run(t, ": > "+pinned+" && mount --bind /proc/1/ns/net "+pinned)
	if pods := n.find(t); len(pods) != 0 {
		t.Fatalf("found %v; none of them is a pod", summarize(pods))
	}

	web := n.sb.AddPod(t, nstest.PodOptions{Name: "web-0"})
	got := summarize(n.find(t))
	want := []summary{{"web-0", podprobe.NamedByHostname, web.HostIf, "eth0", web.Netns, "", "", false}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Find (-want +got):\n%s", d)
	}
}

// TestPodNaming: a namespace only a kubepods process holds (no name under /run/netns) whose process
// kept the node's hostname is named by PID and entered through /proc/PID/ns/net; a CRI-O sandbox
// before its process runs is named by its netns name. Both are probed like any pod.
func TestPodNaming(t *testing.T) {
	n := newNode(t)
	anon := n.sb.AddPod(t, nstest.PodOptions{Name: "anon", NoNetns: true, HostUTS: true, HostIf: "eni1a2b3c4d5e6",
		Cgroup: "/kubepods/pod" + webUID + "/dddd"})
	early := n.sb.AddPod(t, nstest.PodOptions{Name: "early", Netns: nstest.UUID(t), NoProcess: true, HostIf: "cali1a2b3c4d5e6"})
	pods := n.find(t)
	want := []summary{
		{early.Netns, podprobe.NamedByNetns, early.HostIf, "eth0", early.Netns, "", "", false},
		{fmt.Sprintf("pid %d", anon.NodePID), podprobe.NamedByPID, anon.HostIf, "eth0", "", webUID, "guaranteed", true},
	}
	if d := cmp.Diff(want, summarize(pods)); d != "" {
		t.Fatalf("Find (-want +got):\n%s", d)
	}
	if want := n.sb.Path(fmt.Sprintf("/proc/%d/ns/net", anon.NodePID)); pods[1].NetNS != want {
		t.Errorf("the unnamed namespace is entered through %s, want %s", pods[1].NetNS, want)
	}
	if pods[0].Runtime != podnet.RuntimeCRIO {
		t.Errorf("runtime %q for %s", pods[0].Runtime, pods[0].Netns)
	}
	rep := podnet.Probe(context.Background(), pods, n.query(2*time.Second))
	for _, pr := range rep.Pods {
		answeredAll(t, pr.Pod.Name, pr.Results, 2)
	}
}

// BenchmarkProbe prints the wall time of finding and probing 2 and 40 pod namespaces on a healthy
// node (targets: under 100 ms with 2, under 1 s with 40), and of a round in which every one of 40
// pods is cut off (seed 000 on all of them: one timeout for the round, not one per pod).
func BenchmarkProbe(b *testing.B) {
	for _, tc := range []struct {
		pods int
		cut  bool
	}{{2, false}, {40, false}, {40, true}} {
		name := fmt.Sprintf("pods=%d", tc.pods)
		if tc.cut {
			name += "/all-dropped"
		}
		b.Run(name, func(b *testing.B) {
			n := newNode(b)
			for i := range tc.pods {
				n.sb.AddPod(b, nstest.PodOptions{Name: fmt.Sprintf("pod-%02d", i),
					Cgroup: nstest.PodCgroup(i)})
			}
			timeout := 2 * time.Second
			if tc.cut {
				timeout = 500 * time.Millisecond
				n.sb.Run(b, `set -e
nft add table inet cut
nft add chain inet cut pre '{ type filter hook prerouting priority -300; }'
nft add rule inet cut pre iifname "lxc*" drop
`)
			}
			var find, probe time.Duration
			for b.Loop() {
				start := time.Now()
				pods, err := podnet.Find(context.Background(), n.options())
				if err != nil || len(pods) != tc.pods {
					b.Fatalf("Find: %d pods, %v", len(pods), err)
				}
				mid := time.Now()
				rep := podnet.Probe(context.Background(), pods, n.query(timeout))
				probe += time.Since(mid)
				find += mid.Sub(start)
				if f := rep.Failures(); tc.cut != (len(f) == tc.pods) || !tc.cut && len(f) != 0 {
					b.Fatalf("%d of %d pods failed", len(f), tc.pods)
				}
			}
			b.ReportMetric(float64(find.Microseconds())/1000/float64(b.N), "find-ms/op")
			b.ReportMetric(float64(probe.Microseconds())/1000/float64(b.N), "probe-ms/op")
			b.ReportMetric(float64((find+probe).Microseconds())/1000/float64(b.N), "total-ms/op")
		})
	}
}
