package probes

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/testutil/fixture"
	"github.com/nodedns/nodedns/probes/podprobe"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"

	"github.com/nodedns/nodedns/internal/policy"
	"github.com/nodedns/nodedns/resolvconf"
)

// kubesprayCoreDNSCorefile is the cluster's CoreDNS Corefile as kubespray writes it: the kubernetes
// plugin answers cluster.local and passes unknown reverse names on to the forward.
const kubesprayCoreDNSCorefile = `.:53 {
    errors
    health {
        lameduck 5s
    }
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
      pods insecure
      fallthrough in-addr.arpa ip6.arpa
    }
    prometheus :9153
    forward . /etc/resolv.conf {
      prefer_udp
      max_concurrent 1000
    }
    cache 30
    loop
    reload
    loadbalance
}
`

func TestParseServerBlocksKubernetes(t *testing.T) {
	blocks, err := ParseServerBlocks([]byte(kubesprayCoreDNSCorefile))
	if err != nil {
		t.Fatal(err)
	}
	want := []ServerBlock{{Zones: []string{"."}, Line: 1,
		Forwards:   []Forward{{Zones: []string{"."}, From: ".", To: []string{"/etc/resolv.conf"}, Line: 12}},
		Kubernetes: &KubernetesPlugin{Zones: []string{"cluster.local", "in-addr.arpa", "ip6.arpa"}, Fallthrough: []string{"in-addr.arpa", "ip6.arpa"}, Line: 7}}}
	if d := cmp.Diff(want, blocks); d != "" {
		t.Fatalf("blocks (-want +got):\n%s", d)
	}
	k := blocks[0].Kubernetes
	for z, want := range map[string]bool{"cluster.local": true, "svc.cluster.local": true, "in-addr.arpa": false, "10.in-addr.arpa": false, "ip6.arpa": false, "example.org": false} {
		if got := k.Answers(z); got != want {
			t.Errorf("Answers(%q) = %v, want %v", z, got, want)
		}
	}
	for _, tc := range []struct {
		corefile string
		zone     string
		answers  bool
	}{
		{"cluster.local {\n kubernetes\n}\n", "cluster.local", true},                            // the block's zones
		{".:53 {\n kubernetes cluster.local {\n  fallthrough\n }\n}\n", "cluster.local", false}, // every zone falls through
		{".:53 {\n kubernetes cluster.local { fallthrough }\n}\n", "cluster.local", true},       // options on its line are not read
		{".:53 {\n cache {\n  kubernetes cluster.local\n }\n}\n", "cluster.local", false},       // not a plugin line
	} {
		blocks, err := ParseServerBlocks([]byte(tc.corefile))
		if err != nil || len(blocks) != 1 {
			t.Fatalf("%q: %v %+v", tc.corefile, err, blocks)
		}
		if got := blocks[0].Kubernetes.Answers(tc.zone); got != tc.answers {
			t.Errorf("%q: Answers(%q) = %v, want %v", tc.corefile, tc.zone, got, tc.answers)
		}
	}
}

func TestBlockFor(t *testing.T) {
	blocks, err := ParseServerBlocks([]byte(fixture.KubesprayCorefile))
	if err != nil {
		t.Fatal(err)
	}
	for z, want := range map[string]int{"cluster.local": 1, "svc.cluster.local": 1, "in-addr.arpa": 16, "10.in-addr.arpa": 16, "ip6.arpa": 27, "arpa": 38, "example.org": 38, "local": 38} {
		if b := BlockFor(blocks, z); b == nil || b.Line != want {
			t.Errorf("BlockFor(%q) = %+v, want the block of line %d", z, b, want)
		}
	}
	if b := BlockFor(blocks[:1], "example.org"); b != nil {
		t.Errorf("a name outside every block got %+v", b)
	}
}

// corednsProcess is a CoreDNS process of a test: its Corefile and the resolv.conf files it reads.
func corednsProcess(t *testing.T, pid int, corefile string, files map[string]string) *CacheProcess {
	t.Helper()
	s := &CacheProcess{PID: pid, Comm: "coredns", Corefile: "/etc/coredns/Corefile", Resolv: map[string]*resolvconf.File{}}
	var err error
	if s.Blocks, err = ParseServerBlocks([]byte(corefile)); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		rf, err := resolvconf.Parse([]byte(data))
		if err != nil {
			t.Fatal(err)
		}
		s.Resolv[name] = rf
	}
	return s
}

// cacheProcessOf is the cache's process as the live host reads it from /proc (internal/live): comm
// run with -conf /etc/Corefile, its server blocks and their forward lines, and the resolv.conf
// files it forwards to.
func cacheProcessOf(t *testing.T, pid int, comm, corefile string, files map[string]string) *CacheProcess {
	t.Helper()
	cp := corednsProcess(t, pid, corefile, files)
	cp.Comm, cp.Corefile = comm, "/etc/Corefile"
	cp.Forwards = AllForwards(cp.Blocks)
	return cp
}

// boundTo is a FindCache seam finding cp while a holds port 53 among the cache addresses asked.
func boundTo(a netip.Addr, cp *CacheProcess) func([]netip.Addr) *CacheProcess {
	return func(addrs []netip.Addr) *CacheProcess {
		if !slices.Contains(addrs, a) {
			return nil
		}
		return cp
	}
}

// TestPodLoops judges the cluster side of the cache's chain, one node per row: which zones the cache
// sends to the cluster DNS, which DNS servers send them back and through what.
func TestPodLoops(t *testing.T) {
	facts := policy.Facts{CacheAddrs: []netip.Addr{cache, netip.MustParseAddr("fd00:25::10")}, ClusterDomain: "cluster.local"}
	kubespray, err := parseCorefile([]byte(fixture.KubesprayCorefile))
	if err != nil {
		t.Fatal(err)
	}
	cf := CacheClusterForwards(facts, kubespray, true)
	if want := (ClusterForwards{Zones: []string{"cluster.local", "in-addr.arpa", "ip6.arpa"}, To: []netip.Addr{netip.MustParseAddr("10.233.0.3")}}); !cmp.Equal(want, cf, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })) {
		t.Fatalf("CacheClusterForwards = %+v, want %+v", cf, want)
	}
	oldResolv := map[string]string{"/etc/resolv.conf": "domain cluster.local\nsearch cluster.local default.svc.cluster.local. svc.cluster.local.\nnameserver 169.254.25.10\n"}
	tests := []struct {
		name    string
		cf      ClusterForwards
		servers []*CacheProcess
		want    map[int][]string // pid: zones
		via     []string         // in some Via
	}{
		{
			// Incident 002 after apply: CoreDNS kept the resolv.conf it was made with.
			name:    "kubespray's CoreDNS with the old host resolv.conf",
			cf:      cf,
			servers: []*CacheProcess{corednsProcess(t, 42, kubesprayCoreDNSCorefile, oldResolv)},
			want:    map[int][]string{42: {"in-addr.arpa", "ip6.arpa"}},
			via:     []string{"/etc/resolv.conf (read through /proc/42/root) lists 169.254.25.10 (the node-local cache)"},
		},
		{
			name:    "kubespray's CoreDNS re-created with real upstreams",
			cf:      cf,
			servers: []*CacheProcess{corednsProcess(t, 42, kubesprayCoreDNSCorefile, map[string]string{"/etc/resolv.conf": "nameserver 10.0.0.2\n"})},
		},
		{
			name: "CoreDNS with its own cluster.local block and a catch-all",
			cf:   cf,
			servers: []*CacheProcess{corednsProcess(t, 7, "cluster.local:53 {\n hosts {\n  10.233.0.1 kubernetes.default.svc.cluster.local\n }\n}\n.:53 {\n forward . /etc/resolv.conf\n}\n",
				map[string]string{"/etc/resolv.conf": "nameserver 10.0.0.2\nnameserver fd00:25::10\n"})},
			want: map[int][]string{7: {"in-addr.arpa", "ip6.arpa"}},
		},
		{
			name:    "CoreDNS forwarding everything to the cluster DNS service (its own address)",
			cf:      cf,
			servers: []*CacheProcess{corednsProcess(t, 9, ".:53 {\n forward . 10.233.0.3:53\n}\n", nil)},
			want:    map[int][]string{9: {"cluster.local", "in-addr.arpa", "ip6.arpa"}},
			via:     []string{"/etc/coredns/Corefile line 2 forwards to 10.233.0.3 (the cluster DNS the cache forwards to)"},
		},
		{
			name:    "a resolv.conf the Corefile does not forward to",
			cf:      cf,
			servers: []*CacheProcess{corednsProcess(t, 9, ".:53 {\n forward . 10.0.0.2\n}\n", oldResolv)},
		},
		{
			name:    "only reverse zones forwarded, cluster.local elsewhere",
			cf:      cf,
			servers: []*CacheProcess{corednsProcess(t, 9, "in-addr.arpa:53 {\n forward . 169.254.20.10\n}\n", nil)},
			want:    map[int][]string{9: {"in-addr.arpa"}},
		},
		{
			name:    "a cache that sends no cluster zone to an address",
			cf:      CacheClusterForwards(facts, []Forward{{Zones: []string{"cluster.local"}, From: ".", To: []string{"/etc/resolv.conf"}}}, true),
			servers: []*CacheProcess{corednsProcess(t, 42, kubesprayCoreDNSCorefile, oldResolv)},
		},
		{
			name: "the cache down: kubespray's shape assumed, to config clusterDNS",
			cf: CacheClusterForwards(policy.Facts{CacheAddrs: []netip.Addr{cache}, ClusterDomain: "cluster.local",
				ClusterDNS: []netip.Addr{netip.MustParseAddr("10.233.0.3")}}, nil, false),
			servers: []*CacheProcess{corednsProcess(t, 42, kubesprayCoreDNSCorefile, oldResolv), corednsProcess(t, 43, kubesprayCoreDNSCorefile, map[string]string{"/etc/resolv.conf": "nameserver 10.0.0.2\n"})},
			want:    map[int][]string{42: {"in-addr.arpa", "ip6.arpa"}},
		},
		{
			name:    "a forward FROM that does not hold the zone",
			cf:      cf,
			servers: []*CacheProcess{corednsProcess(t, 9, ".:53 {\n forward example.org 169.254.25.10\n}\n", nil)},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := map[int][]string{}
			var via []string
			for _, pl := range PodLoops(facts, tc.cf, tc.servers) {
				got[pl.Server.PID] = pl.Zones
				via = append(via, pl.Via...)
			}
			if len(tc.want) == 0 {
				tc.want = map[int][]string{}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("loops (-want +got):\n%s", d)
			}
			for _, v := range tc.via {
				if !strings.Contains(strings.Join(via, "\n"), v) {
					t.Errorf("no Via says %q: %q", v, via)
				}
			}
		})
	}
}

func TestParseProcStatStart(t *testing.T) {
	// A real line (Linux 6.x) with a command name holding a space and a parenthesis.
	const line = "4242 (node cache)) S 1 4242 4242 0 -1 4194560 1260 0 0 0 3 1 0 0 20 0 12 0 123456 1281994752 9540 18446744073709551615 1 1 0 0 0 0 0 0 2143420159 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
	got, err := ParseProcStatStart([]byte(line))
	if err != nil || got != 1234560*time.Millisecond {
		t.Errorf("ParseProcStatStart = %v, %v; want 20m34.56s", got, err)
	}
	for _, bad := range []string{"", "4242 node-cache S 1", "4242 (x) S 1 2 3", "4242 (x) S 1 4242 4242 0 -1 4194560 1260 0 0 0 3 1 0 0 20 0 12 0 -5 1", "4242 (x) S 1 4242 4242 0 -1 4194560 1260 0 0 0 3 1 0 0 20 0 12 0 99999999999999999999 1"} {
		if d, err := ParseProcStatStart([]byte(bad)); err == nil {
			t.Errorf("ParseProcStatStart(%q) = %v, want an error", bad, d)
		}
	}
}

func FuzzParseProcStatStart(f *testing.F) {
	f.Add([]byte("1 (init) S 0 1 1 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 5 1 1\n"))
	f.Add([]byte("1 ()) ( S"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if d, err := ParseProcStatStart(data); err == nil && d < 0 {
			t.Fatalf("negative start time %v", d)
		}
	})
}

func TestFirstSyncWait(t *testing.T) {
	for _, tc := range []struct {
		comm string
		age  time.Duration
		wait bool
		left time.Duration
	}{
		{"node-cache", 0, true, 60 * time.Second},
		{"node-cache", 12 * time.Second, true, 48 * time.Second},
		{"node-cache", 65 * time.Second, true, 0}, // the tick is due: its iptables calls may still run
		{"node-cache", 70 * time.Second, false, 0},
		{"node-cache", time.Hour, false, 0},
		{"node-cache", -time.Second, false, 0}, // a clock that went back: no excuse
		{"coredns", 5 * time.Second, false, 0}, // CoreDNS adds no rules at all
	} {
		wait, left := FirstSyncWait(tc.comm, tc.age)
		if wait != tc.wait || left != tc.left {
			t.Errorf("FirstSyncWait(%s, %s) = %v %s, want %v %s", tc.comm, tc.age, wait, left, tc.wait, tc.left)
		}
	}
}

// TestNotrackFirstSync runs nodelocaldns.iptables with the cache process started at different times
// (its /proc/PID/stat against the uptime): in node-cache's first minute it is unknown and says to
// wait; later, or for a coredns, it is the problem whose hint restarts the pod.
func TestNotrackFirstSync(t *testing.T) {
	const uptime = time.Hour
	statAt := func(pid int, comm string, age time.Duration) string {
		ticks := int64((uptime - age) / (time.Second / 100))
		return fmt.Sprintf("%d (%s) S 1 %d %d 0 -1 4194560 1260 0 0 0 3 1 0 0 20 0 12 0 %d 1281994752 9540\n", pid, comm, pid, pid, ticks)
	}
	for _, tc := range []struct {
		name   string
		comm   string
		age    time.Duration
		status Status
		say    []string
		not    string
	}{
		{"node-cache 12s after start", "node-cache", 12 * time.Second, Unknown, []string{"node-cache (pid 100) started 12s ago", "first sync tick, about 60s after start", "about 48s more", "nodedns check --wait 90s"}, "restart its pod on this node"},
		{"node-cache 5m after start", "node-cache", 5 * time.Minute, Problem, []string{"restart its pod on this node"}, "--wait"},
		{"coredns 12s after start", "coredns", 12 * time.Second, Problem, []string{"restart its pod on this node"}, "--wait"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, _ := testEnv(t, func(w dns.ResponseWriter, r *dns.Msg) {}, "example.com")
			env.Host.Uptime = func() (time.Duration, error) { return uptime, nil }
			env.Host.FindCache = boundTo(cache, cacheProcessOf(t, 100, tc.comm, ".:53 {\n forward . /etc/resolv.conf\n}\n", map[string]string{"/etc/resolv.conf": "nameserver 10.0.0.2\n"}))
			env.Host.ProcStat = func(pid int) ([]byte, error) {
				if pid != 100 {
					return nil, fs.ErrNotExist
				}
				return []byte(statAt(100, tc.comm, tc.age)), nil
			}
			r := nodelocalIptables{}.Run(context.Background(), env)
			if r.Status != tc.status {
				t.Fatalf("status %s, want %s: %s (hint %s)", r.Status, tc.status, r.Message, r.Hint)
			}
			for _, s := range tc.say {
				if !strings.Contains(r.Message+" "+r.Hint, s) {
					t.Errorf("does not say %q: %s (hint %s)", s, r.Message, r.Hint)
				}
			}
			if strings.Contains(r.Hint, tc.not) {
				t.Errorf("the hint says %q: %s", tc.not, r.Hint)
			}
			if !strings.Contains(r.Message, "raw-table NOTRACK rules for udp/tcp 53 missing for 169.254.25.10") {
				t.Errorf("the message does not name the missing rules: %s", r.Message)
			}
		})
	}
}

// TestPodLoopHint: the hint names the pods to re-create, and sends to apply first only while
// kubelet's resolvConf (what a re-created pod gets) still lists a loop address.
func TestPodLoopHint(t *testing.T) {
	facts := policy.Facts{CacheAddrs: []netip.Addr{cache}, ClusterDomain: "cluster.local"}
	kubespray, _ := parseCorefile([]byte(fixture.KubesprayCorefile))
	cf := CacheClusterForwards(facts, kubespray, true)
	pls := PodLoops(facts, cf, []*CacheProcess{corednsProcess(t, 42, kubesprayCoreDNSCorefile, map[string]string{"/etc/resolv.conf": "nameserver 169.254.25.10\n"})})
	if len(pls) != 1 {
		t.Fatalf("loops %+v, want one", pls)
	}
	for _, tc := range []struct {
		kubelet string
		say     []string
		not     string
	}{
		{"nameserver 169.254.25.10\n", []string{"make kubelet's resolvConf loop-free first", "nodedns apply", "rollout restart deployment coredns"}, "is loop-free, but"},
		{"nameserver 10.0.0.2\n", []string{"kubelet's resolvConf is loop-free, but a pod keeps the resolv.conf it was made with", "rollout restart deployment coredns"}, "nodedns apply"},
	} {
		env, _ := testEnv(t, func(w dns.ResponseWriter, r *dns.Msg) {}, "example.com")
		env.Plan.Facts = facts
		env.Snapshot.KubeletResolv = readResolvForTest(t, tc.kubelet)
		r := podLoopResult(context.Background(), env, cf, pls, nil, "")
		if r.Status != Problem || !strings.Contains(r.Message, "coredns (pid 42) sends in-addr.arpa, ip6.arpa back") {
			t.Errorf("%s %s", r.Status, r.Message)
		}
		for _, s := range tc.say {
			if !strings.Contains(r.Hint, s) {
				t.Errorf("kubelet %q: the hint does not say %q: %s", tc.kubelet, s, r.Hint)
			}
		}
		if strings.Contains(r.Hint, tc.not) {
			t.Errorf("kubelet %q: the hint says %q: %s", tc.kubelet, tc.not, r.Hint)
		}
	}
}

// TestCacheLoopHintAfterApply: node-local-dns forwarding to its pod's resolv.conf, which lists the
// cache. While kubelet's resolvConf still lists it, the hint is apply; once it is loop-free (after
// apply), the hint is to re-create the pod, which keeps the copy it was made with.
func TestCacheLoopHintAfterApply(t *testing.T) {
	for _, tc := range []struct {
		kubelet string
		say     []string
		not     string
	}{
		{"nameserver 169.254.25.10\n", []string{"nodedns apply", "re-create the node-local-dns pod", "k8s-app=nodelocaldns"}, "is loop-free"},
		{"nameserver 10.0.0.2\n", []string{"kubelet's resolvConf is loop-free, but the pod keeps the resolv.conf it was made with", "delete pod -l k8s-app=nodelocaldns --field-selector spec.nodeName="}, "nodedns apply"},
	} {
		env, _ := testEnv(t, func(w dns.ResponseWriter, r *dns.Msg) {
			m := new(dns.Msg)
			m.SetRcode(r, dns.RcodeNameError)
			_ = w.WriteMsg(m)
		}, "example.com")
		env.Snapshot.KubeletResolv = readResolvForTest(t, tc.kubelet)
		env.Host.FindCache = boundTo(cache, cacheProcessOf(t, 100, "node-cache", fixture.KubesprayCorefile, map[string]string{"/etc/resolv.conf": "nameserver 169.254.25.10\n"}))
		r := dnsLoop{}.Run(context.Background(), env)
		if r.Status != Problem || !strings.Contains(r.Message, "169.254.25.10 (from /etc/resolv.conf, read through /proc/100/root) is the node-local cache") {
			t.Fatalf("kubelet %q: %s %s", tc.kubelet, r.Status, r.Message)
		}
		for _, s := range tc.say {
			if !strings.Contains(r.Hint, s) {
				t.Errorf("kubelet %q: the hint does not say %q: %s", tc.kubelet, s, r.Hint)
			}
		}
		if strings.Contains(r.Hint, tc.not) {
			t.Errorf("kubelet %q: the hint says %q: %s", tc.kubelet, tc.not, r.Hint)
		}
	}
}

// impostorServers are the DNS servers of a node where the cluster DNS's CoreDNS (pid 300) runs in
// its kube-system pod and four processes only call themselves coredns or node-cache, each bound to
// port 53 in its own namespace with a Corefile that sends everything to the cache: one in a
// tenant's pod (namespace tenant-a, a name that reads like the cluster DNS's), one in a pod no
// runtime's record names (hostname coredns-5d78c9869d-h2k4x), one in namespaces of its own (no pod's),
// and nobody's on the host where port 53 is not privileged. clusterResolv is the real CoreDNS's
// resolv.conf.
func impostorServers(t *testing.T, clusterResolv string) ([]*CacheProcess, []podprobe.Pod) {
	t.Helper()
	pods := []podprobe.Pod{
		{Name: "coredns-5d78c9869d-h2k4x", NamedBy: podprobe.NamedByHostname, Namespace: "kube-system", PodName: "coredns-5d78c9869d-h2k4x", ID: podprobe.NSID{Dev: 4, Ino: 1}, Netns: "cni-1"},
		{Name: "coredns-7f9c6b5d4-tenant", NamedBy: podprobe.NamedByHostname, Namespace: "tenant-a", PodName: "coredns-7f9c6b5d4-tenant", ID: podprobe.NSID{Dev: 4, Ino: 2}, Netns: "cni-2"},
		{Name: "coredns-5d78c9869d-h2k4x", NamedBy: podprobe.NamedByHostname, ID: podprobe.NSID{Dev: 4, Ino: 3}, Netns: "cni-3"},
	}
	loop := ".:53 {\n forward . 169.254.25.10\n}\n"
	in := func(cp *CacheProcess, ns uint64, comm string) *CacheProcess {
		cp.Comm = comm
		if ns != 0 {
			cp.NetNS = podprobe.NSID{Dev: 4, Ino: ns}
		}
		return cp
	}
	host := in(corednsProcess(t, 150, loop, nil), 0, "coredns")
	host.HostNet, host.NetNS = true, podprobe.NSID{Dev: 4, Ino: 99}
	return []*CacheProcess{
		in(corednsProcess(t, 300, kubesprayCoreDNSCorefile, map[string]string{"/etc/resolv.conf": clusterResolv}), 1, "coredns"),
		in(corednsProcess(t, 120, loop, nil), 2, "coredns"),
		in(corednsProcess(t, 130, loop, nil), 3, "coredns"),
		in(corednsProcess(t, 140, loop, nil), 9, "node-cache"),
		host,
	}, pods
}

// TestDNSLoopImpostors (docs/contract.md "Check ids", dns.loop): only the cluster DNS's servers are
// judged on the cluster side: a pod the container runtime puts in kube-system, or a privileged
// server on the host. Processes that only call themselves coredns or node-cache, whatever they
// forward to, change no verdict; the message names them as not judged, and no hint names their
// pods. A real loop in the kube-system pod is still found, and its hint names the pod by the
// runtime's namespace and name.
func TestDNSLoopImpostors(t *testing.T) {
	for _, tc := range []struct {
		name, clusterResolv string
		status              Status
		say, not            []string
	}{
		{"the cluster DNS loop-free", "nameserver 10.0.0.2\n", OK,
			[]string{"coredns pod kube-system/coredns-5d78c9869d-h2k4x (pid 300): cluster.local, in-addr.arpa, ip6.arpa not sent back",
				"not judged: coredns pod tenant-a/coredns-7f9c6b5d4-tenant (pid 120): a pod of namespace tenant-a, not kube-system's",
				"coredns in pod network namespace cni-3, hostname \"coredns-5d78c9869d-h2k4x\" (pid 130): no container runtime's record says whose pod this is",
				"node-cache (pid 140): in a network namespace that is no pod's", "and 1 more"},
			nil},
		{"the cluster DNS loops", "nameserver 169.254.25.10\n", Problem,
			[]string{"coredns pod kube-system/coredns-5d78c9869d-h2k4x (pid 300) sends in-addr.arpa, ip6.arpa back", "not judged:"},
			[]string{"pid 120) sends", "pid 130) sends", "pid 140) sends", "pid 150) sends"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, _ := testEnv(t, func(w dns.ResponseWriter, r *dns.Msg) {
				m := new(dns.Msg)
				m.SetRcode(r, dns.RcodeNameError)
				_ = w.WriteMsg(m)
			}, "example.com")
			servers, pods := impostorServers(t, tc.clusterResolv)
			env.Host.FindCache = boundTo(cache, cacheProcessOf(t, 100, "node-cache", fixture.KubesprayCorefile, map[string]string{"/etc/resolv.conf": "nameserver 10.0.0.2\n"}))
			env.Host.FindDNSServers = func() []*CacheProcess { return servers }
			env.Host.Pods = func(context.Context, *slog.Logger) ([]podprobe.Pod, error) { return pods, nil }
			r := dnsLoop{}.Run(context.Background(), env)
			t.Logf("%s: %s (hint: %s)", r.Status, r.Message, r.Hint)
			if r.Status != tc.status {
				t.Fatalf("dns.loop %s, want %s: %s", r.Status, tc.status, r.Message)
			}
			for _, s := range tc.say {
				if !strings.Contains(r.Message, s) {
					t.Errorf("dns.loop does not say %q", s)
				}
			}
			for _, s := range tc.not {
				if strings.Contains(r.Message, s) {
					t.Errorf("dns.loop says %q", s)
				}
			}
			if tc.status == Problem {
				if !strings.Contains(r.Hint, "`kubectl -n kube-system delete pod coredns-5d78c9869d-h2k4x`") || strings.Contains(r.Hint, "tenant") {
					t.Errorf("the hint: %s", r.Hint)
				}
			}
		})
	}
	t.Run("a root or privileged server on the host is judged", func(t *testing.T) {
		servers, pods := impostorServers(t, "nameserver 10.0.0.2\n")
		host := servers[4]
		for _, priv := range []struct{ root, port bool }{{true, false}, {false, true}} {
			host.Root, host.PrivilegedPort = priv.root, priv.port
			if _, why := serverTrust(host, pods); why != "" {
				t.Errorf("root %v, port 53 privileged %v: not believed (%s)", priv.root, priv.port, why)
			}
		}
	})
}

// TestPodModeCacheImpostors (docs/contract.md "Cache mode"): in lrp and none modes the cache is the
// node-cache or coredns the checks believe (a kube-system pod's), never a process that only calls
// itself node-cache (which would otherwise win over coredns) or has a lower PID.
func TestPodModeCacheImpostors(t *testing.T) {
	servers, pods := impostorServers(t, "nameserver 10.0.0.2\n")
	env, _ := podNode(t, &fakePods{pods: pods}, func(c *config.Config, s *node.Snapshot, n *dualNet) {
		c.NodeLocalDNS.Mode = config.CacheLRP
		delete(n.links, "nodelocaldns")
		n.routes = nil
		s.Kubelet.ClusterDNS = []netip.Addr{clusterIP}
	})
	env.Host.FindDNSServers = func() []*CacheProcess { return servers }
	if cp := env.cacheProcess(context.Background()); cp == nil || cp.PID != 300 {
		t.Fatalf("the cache in lrp mode: %+v, want the kube-system pod's coredns (pid 300)", cp)
	}
	checkResult(t, runCheck(env, "dns.loop"), OK, []string{"coredns (pid 300) forwards"}, []string{"pid 120) forwards", "pid 140) forwards"}, nil)
}
