package probes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/hostnet/netstate"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/policy"
	"github.com/nodedns/nodedns/probes/podprobe"
)

var (
	cache6    = netip.MustParseAddr("fd00:25::10")
	kernelLL  = netip.MustParsePrefix("fe80::b4c2:11ff:fe3a:9d01/64")
	clusterIP = netip.MustParseAddr("10.233.0.10")
)

// dualNet is a NetReader of a dual-stack node: links by name, local routes and rules of both
// families (a route's and a rule's family is its address's, or the rule's Family).
type dualNet struct {
	links  map[string]*netstate.Link
	routes []netstate.Route
	rules  []netstate.Rule
}

func (f dualNet) Link(name string) (*netstate.Link, error) { return f.links[name], nil }
func (f dualNet) LocalRoutes(fam int) ([]netstate.Route, error) {
	var out []netstate.Route
	for _, r := range f.routes {
		if r.Dst.Addr().Is6() == (fam == 6) {
			out = append(out, r)
		}
	}
	return out, nil
}
func (f dualNet) Rules(fam int) ([]netstate.Rule, error) {
	var out []netstate.Rule
	for _, r := range f.rules {
		if r.Family == fam {
			out = append(out, r)
		}
	}
	return out, nil
}

// healthyDualStack is the nodelocaldns bridge up with both cache addresses and the kernel's fe80::,
// their local routes and the default rules of both families.
func healthyDualStack() dualNet {
	return dualNet{
		links: map[string]*netstate.Link{"nodelocaldns": {Name: "nodelocaldns", Index: 7, Type: "bridge", AdminUp: true, OperState: "unknown",
			Addrs: []netip.Prefix{hostPrefix(cache), hostPrefix(cache6), kernelLL}}},
		routes: []netstate.Route{{Dst: hostPrefix(cache), LinkIndex: 7}, {Dst: hostPrefix(cache6), LinkIndex: 7}, {Dst: netip.PrefixFrom(kernelLL.Addr(), 128), LinkIndex: 7}},
		rules:  []netstate.Rule{localRuleAt(0), {Family: 6, Priority: 0, Table: netstate.TableLocal}},
	}
}

// recorder is an Exchanger that answers every query from one real server and records where each
// was sent.
type recorder struct {
	Exchanger
	mu     sync.Mutex
	asked  []netip.Addr
	refuse bool // every query gets "connection refused", as from a host where nothing listens
}

func (r *recorder) Exchange(ctx context.Context, m *dns.Msg, network string, server netip.AddrPort) (*dns.Msg, error) {
	r.mu.Lock()
	if !slices.Contains(r.asked, server.Addr()) {
		r.asked = append(r.asked, server.Addr())
	}
	r.mu.Unlock()
	if r.refuse {
		return nil, fmt.Errorf("query: %w", errRefused)
	}
	return r.Exchanger.Exchange(ctx, m, network, server)
}

var errRefused = syscall.ECONNREFUSED

// fakePods is the pod side of a node: the namespaces Find returns and, per pod, the outcome its
// queries get (absent: answered, as the host is).
type fakePods struct {
	pods    []podprobe.Pod
	findErr error
	outcome map[string]podprobe.Outcome
	enter   map[string]error // a pod whose namespace cannot be entered
	udpOnly map[string]bool  // the pod's outcome holds for its UDP queries only
	probed  []string         // the pods ProbePods was given
	targets []netip.Addr
}

func (f *fakePods) find(context.Context, *slog.Logger) ([]podprobe.Pod, error) {
	return f.pods, f.findErr
}

func (f *fakePods) probe(_ context.Context, pods []podprobe.Pod, q podprobe.Query) podprobe.Report {
	f.targets = q.Targets
	results := func(o podprobe.Outcome, udpOnly bool) []podprobe.Result {
		var rs []podprobe.Result
		for _, a := range q.Targets {
			for _, n := range []string{"udp", "tcp"} {
				r := podprobe.Result{Addr: a, Net: n, Outcome: o}
				if udpOnly && n == "tcp" {
					r.Outcome = podprobe.Answered
				}
				rs = append(rs, r)
			}
		}
		return rs
	}
	rep := podprobe.Report{Host: results(podprobe.Answered, false), Elapsed: 3 * time.Millisecond}
	for _, p := range pods {
		f.probed = append(f.probed, p.Name)
		if err := f.enter[p.Name]; err != nil {
			rep.Pods = append(rep.Pods, podprobe.PodResult{Pod: p, Err: err})
			continue
		}
		rep.Pods = append(rep.Pods, podprobe.PodResult{Pod: p, Results: results(f.outcome[p.Name], f.udpOnly[p.Name])})
	}
	return rep
}

func pod(name, hostIf string) podprobe.Pod {
	return podprobe.Pod{Name: name, NamedBy: podprobe.NamedByHostname, HostIf: hostIf, PodIf: "eth0"}
}

var (
	webPod = pod("web-0", "lxc4f2a9c1b7d3e")
	apiPod = pod("api-0", "vlan8c0e1d2f3a4")
)

// podNode is a live Env of a healthy dual-stack node with the given pods; mod changes the config,
// the snapshot or the host before the plan is derived.
func podNode(t *testing.T, fp *fakePods, mod func(cfg *config.Config, s *node.Snapshot, net *dualNet)) (*Env, *recorder) {
	t.Helper()
	cfg := config.Default()
	s := &node.Snapshot{Now: time.Now()}
	s.ResolvConf = readResolvForTest(t, "nameserver 10.0.0.2\n")
	net := healthyDualStack()
	if mod != nil {
		mod(&cfg, s, &net)
	}
	if l := net.links[cfg.NodeLocalDNS.Interface]; l != nil {
		for _, p := range l.Addrs {
			s.CacheInterfaceAddrs = append(s.CacheInterfaceAddrs, p.Addr())
		}
	}
	rec := &recorder{Exchanger: redirect{dnsServer(t, func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		if r.Question[0].Qtype == dns.TypeA && r.Question[0].Name == "kubernetes.default.svc.cluster.local." {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: []byte{10, 233, 0, 1}})
		} else {
			m.SetRcode(r, dns.RcodeNameError)
		}
		_ = w.WriteMsg(m)
	})}}
	host := noProcesses(&Host{
		Net:       net,
		Firewall:  func(context.Context) []Backend { return nil },
		DNS:       rec,
		DNSPort:   53,
		BootID:    func() (string, error) { return "boot-1", nil },
		Uptime:    func() (time.Duration, error) { return time.Hour, nil },
		State:     &memState{},
		Random:    func() string { return "r4nd0m" },
		Pods:      fp.find,
		ProbePods: fp.probe,
		HostPIDNS: func() bool { return true },
	})
	return &Env{Snapshot: s, Config: cfg, Plan: policy.Compute(s, cfg), Live: true, Host: host}, rec
}

func runCheck(env *Env, id string) Result {
	for _, c := range All() {
		if c.ID() == id {
			return c.Run(context.Background(), env)
		}
	}
	panic("no check " + id)
}

func TestPodsCheck(t *testing.T) {
	ciliumHost := func(_ *config.Config, _ *node.Snapshot, n *dualNet) {
		n.links["cilium_host"] = &netstate.Link{Name: "cilium_host", Index: 3, Type: "veth"}
	}
	// Incident 004: the branch ENI's rules ahead of the moved local table, for both families.
	branchENI := func(_ *config.Config, _ *node.Snapshot, n *dualNet) {
		n.rules = []netstate.Rule{
			{Family: 4, Priority: 10, Table: 102, IIF: apiPod.HostIf}, localRuleAt(20),
			{Family: 6, Priority: 10, Table: 102, IIF: apiPod.HostIf}, {Family: 6, Priority: 20, Table: netstate.TableLocal},
		}
	}
	many := func(n int) []podprobe.Pod {
		var ps []podprobe.Pod
		for i := range n {
			ps = append(ps, pod(fmt.Sprintf("pod-%02d", i), fmt.Sprintf("lxc%012d", i)))
		}
		return ps
	}
	tests := []struct {
		name       string
		pods       fakePods
		mod        func(*config.Config, *node.Snapshot, *dualNet)
		hostDown   bool
		hostPIDNS  bool
		want       Status
		msg, notIn []string
		hint       []string
		probed     []string
	}{
		{name: "a fresh node: no pod namespace yet", hostPIDNS: true, want: Skipped, msg: []string{"no pod network namespace on this node yet"}, notIn: []string{"PID namespace"}},
		{name: "no pod seen from a PID namespace of its own", want: Skipped, msg: []string{"no pod network namespace", "PID namespace of its own"}},
		{name: "probes.maxPods is 0", pods: fakePods{pods: []podprobe.Pod{webPod}}, hostPIDNS: true,
			mod:  func(c *config.Config, _ *node.Snapshot, _ *dualNet) { c.Probes.MaxPods = 0 },
			want: Skipped, msg: []string{"probes.maxPods is 0"}},
		{name: "the namespaces cannot be listed", pods: fakePods{findErr: errors.New("find pod namespaces: open /proc/1/ns/net: permission denied")}, hostPIDNS: true,
			want: Unknown, msg: []string{"cannot be listed", "permission denied"}, hint: []string{"root", "CAP_SYS_ADMIN", "hostPID"}},
		{name: "the cache does not answer the host: cannot tell", pods: fakePods{pods: []podprobe.Pod{webPod, apiPod}}, hostDown: true, hostPIDNS: true,
			want: Unknown, msg: []string{"does not answer the host either", "cannot be told"}},
		{name: "healthy: every pod answered on both families", pods: fakePods{pods: []podprobe.Pod{apiPod, webPod}}, hostPIDNS: true,
			want: OK, msg: []string{"answers api-0, web-0 on 169.254.25.10, fd00:25::10 over udp and tcp, as it answers the host", "2 pod network namespaces"},
			notIn: []string{"fe80"}, probed: []string{"api-0", "web-0"}},
		{name: "incident 000 without Cilium's interfaces: the CNI's datapath",
			pods:      fakePods{pods: []podprobe.Pod{apiPod, webPod}, outcome: map[string]podprobe.Outcome{"web-0": podprobe.Timeout}},
			hostPIDNS: true, want: Problem,
			msg:   []string{"web-0 (host side lxc4f2a9c1b7d3e) gets no answer from the cache on 169.254.25.10, fd00:25::10, which answers the host (1 of 2 pods): web-0: timeout on 169.254.25.10, fd00:25::10 over udp and tcp"},
			notIn: []string{"api-0 (host side"}, hint: []string{"CNI's datapath", "tcpdump"}},
		{name: "incident 000 on a Cilium node: hostLegacyRouting",
			pods:      fakePods{pods: []podprobe.Pod{apiPod, webPod}, outcome: map[string]podprobe.Outcome{"web-0": podprobe.Timeout}},
			hostPIDNS: true, mod: ciliumHost, want: Problem,
			msg: []string{"web-0 (host side lxc4f2a9c1b7d3e)"}, notIn: []string{"api-0 (host side"},
			hint: []string{"bpf.hostLegacyRouting=true", "LocalRedirectPolicy", "cilium#36761"}},
		{name: "incident 004: the rule on the pod's branch ENI",
			pods:      fakePods{pods: []podprobe.Pod{apiPod, webPod}, outcome: map[string]podprobe.Outcome{"api-0": podprobe.Timeout}},
			hostPIDNS: true, mod: branchENI, want: Problem,
			msg:   []string{"api-0 (host side vlan8c0e1d2f3a4)"},
			notIn: []string{"web-0 (host side"},
			hint:  []string{"`10: from all iif vlan8c0e1d2f3a4 lookup 102` sends what api-0 sends to 169.254.25.10 around the local table", "fd00:25::10", "POD_SECURITY_GROUP_ENFORCING_MODE=standard"}},
		{name: "a pod whose host side was not found is still named",
			pods:      fakePods{pods: []podprobe.Pod{pod("ipvlan-0", "")}, outcome: map[string]podprobe.Outcome{"ipvlan-0": podprobe.Refused}},
			hostPIDNS: true, want: Problem, msg: []string{"ipvlan-0 (host-side interface not found)", "refused"}},
		{name: "at most probes.maxPods, the first by name", pods: fakePods{pods: many(20)}, hostPIDNS: true,
			want: OK, msg: []string{"16 of 20, probes.maxPods", "pod-07 and 8 more"}, notIn: []string{"pod-08"}, probed: podNames(many(16))},
		{name: "a branch-ENI pod among many others is still asked from", hostPIDNS: true,
			pods: fakePods{pods: append(many(20), pod("zz-api-0", apiPod.HostIf)), outcome: map[string]podprobe.Outcome{"zz-api-0": podprobe.Timeout}},
			want: Problem, msg: []string{"zz-api-0 (host side vlan8c0e1d2f3a4) gets no answer", "16 of 21, probes.maxPods"},
			probed: append(podNames(many(15)), "zz-api-0")},
		{name: "no namespace could be entered", pods: fakePods{pods: []podprobe.Pod{webPod}, enter: map[string]error{"web-0": errors.New("enter namespace: operation not permitted")}},
			hostPIDNS: true, want: Unknown, msg: []string{"no pod network namespace could be entered", "operation not permitted"}, hint: []string{"CAP_SYS_ADMIN"}},
		{name: "a pod gone meanwhile does not hide the others",
			pods:      fakePods{pods: []podprobe.Pod{apiPod, webPod}, enter: map[string]error{"api-0": errors.New("open namespace: no such file")}, outcome: map[string]podprobe.Outcome{"web-0": podprobe.Timeout}},
			hostPIDNS: true, want: Problem, msg: []string{"(1 of 1 pods)", "web-0 (host side", "api-0 could not be entered"}},
		{name: "UDP fails, TCP is answered: each failed query is named",
			pods: fakePods{pods: []podprobe.Pod{webPod}, outcome: map[string]podprobe.Outcome{"web-0": podprobe.Timeout}, udpOnly: map[string]bool{"web-0": true}}, hostPIDNS: true,
			want: Problem, msg: []string{"web-0 (host side lxc4f2a9c1b7d3e) gets no answer", "web-0: 169.254.25.10 over udp: timeout, fd00:25::10 over udp: timeout; probed"},
			notIn: []string{"over tcp"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fp := tc.pods
			env, rec := podNode(t, &fp, tc.mod)
			env.Host.HostPIDNS = func() bool { return tc.hostPIDNS }
			rec.refuse = tc.hostDown
			r := runCheck(env, "nodelocaldns.pods")
			checkResult(t, r, tc.want, tc.msg, tc.notIn, tc.hint)
			if tc.probed != nil && !slices.Equal(fp.probed, tc.probed) {
				t.Errorf("probed %v, want %v", fp.probed, tc.probed)
			}
			if strings.Contains(r.Message+r.Hint, "fe80") {
				t.Errorf("mentions the kernel's fe80:: address: %s (%s)", r.Message, r.Hint)
			}
		})
	}
}

func TestPickPods(t *testing.T) {
	var pods []podprobe.Pod
	for i := range 6 {
		pods = append(pods, pod(fmt.Sprintf("a-%d", i), fmt.Sprintf("lxc%012d", i)))
	}
	pods = append(pods, pod("b-0", "vlanc6461fc2633"), pod("b-1", "vlan8c0e1d2f3a4"), pod("c-0", "eni1a2b3c4d5e6"), pod("d-0", ""), pod("e-0", "weird0"))
	tests := []struct {
		max  int
		want []string
	}{
		{20, podNames(pods)},
		{5, []string{"a-0", "b-0", "c-0", "d-0", "e-0"}},
		{7, []string{"a-0", "a-1", "b-0", "b-1", "c-0", "d-0", "e-0"}},
		{3, []string{"a-0", "b-0", "c-0"}},
	}
	for _, tc := range tests {
		if got := podNames(pickPods(pods, tc.max)); !slices.Equal(got, tc.want) {
			t.Errorf("max %d: %v, want %v", tc.max, got, tc.want)
		}
	}
}

func podNames(ps []podprobe.Pod) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

// TestRoutesNamesThePodsBehindARule: incident 004 seen by nodelocaldns.routes names the pods behind
// the interface the rule catches, IPv6 hints use `ip -6`.
func TestRoutesNamesThePodsBehindARule(t *testing.T) {
	fp := &fakePods{pods: []podprobe.Pod{apiPod, webPod}}
	env, _ := podNode(t, fp, func(_ *config.Config, _ *node.Snapshot, n *dualNet) {
		n.rules = []netstate.Rule{{Family: 6, Priority: 10, Table: 102, IIF: apiPod.HostIf}, {Family: 6, Priority: 20, Table: netstate.TableLocal}, localRuleAt(0)}
	})
	r := runCheck(env, "nodelocaldns.routes")
	checkResult(t, r, Problem, []string{"traffic arriving on vlan8c0e1d2f3a4 (pod api-0) to fd00:25::10"}, []string{"web-0", "169.254.25.10 before"},
		[]string{"`ip -6 rule add to fd00:25::10 lookup local priority 9`", "incident 004"})
}

// TestHealthyDualStackUpInterface is the false alarm: the nodelocaldns bridge is up, so it
// carries the kernel's fe80:: address besides 169.254.25.10/32 and fd00:25::10/128. Every live check
// is ok and none names the fe80:: address; the reboot baseline leaves it out.
func TestHealthyDualStackUpInterface(t *testing.T) {
	fp := &fakePods{pods: []podprobe.Pod{apiPod, webPod}}
	env, _ := podNode(t, fp, func(_ *config.Config, _ *node.Snapshot, _ *dualNet) {})
	env.Host.Firewall = func(context.Context) []Backend {
		var rs []RawRule
		for _, a := range []netip.Addr{cache, cache6} {
			fam := 4
			if a.Is6() {
				fam = 6
			}
			for _, n := range notrackNeeds {
				rs = append(rs, RawRule{Family: fam, Chain: n.Chain, Dst: hostPrefix(a), Proto: n.Proto, DPort: 53, Notrack: true})
			}
		}
		return []Backend{{Name: "nf_tables", Rules: rs}}
	}
	if got := env.Plan.Facts.CacheAddrs; !slices.Equal(got, []netip.Addr{cache, cache6}) {
		t.Fatalf("cache addresses %v", got)
	}
	for _, id := range []string{"nodelocaldns.interface", "nodelocaldns.routes", "nodelocaldns.iptables", "nodelocaldns.dns", "nodelocaldns.pods"} {
		r := runCheck(env, id)
		if r.Status != OK || strings.Contains(r.Message+r.Hint, "fe80") {
			t.Errorf("%s: %s: %s (%s)", id, r.Status, r.Message, r.Hint)
		}
	}
	checkResult(t, runCheck(env, "nodelocaldns.interface"), OK,
		[]string{"carries 169.254.25.10/32, fd00:25::10/128 (and the kernel's own IPv6 link-local address, not a cache address)"}, nil, nil)
	// The kernel's fe80:: and its local route follow the bridge's MAC, new at every boot: the reboot
	// baseline must not wait for them.
	b := env.currentBaseline(context.Background())
	if !slices.Equal(b.Addresses, []string{"169.254.25.10/32", "fd00:25::10/128"}) ||
		!slices.Equal(b.Routes, []string{"local 169.254.25.10/32 dev nodelocaldns table local", "local fd00:25::10/128 dev nodelocaldns table local"}) {
		t.Errorf("baseline addresses %v routes %v", b.Addresses, b.Routes)
	}
	// A baseline an older version wrote with the fe80:: in it: the address is not waited for.
	old, err := ParseBaseline([]byte(`{"version":1,"bootID":"b","interface":"nodelocaldns","addresses":["169.254.25.10/32","fe80::1/64","fd00:25::10/128"],` +
		`"routes":["local 169.254.25.10/32 dev nodelocaldns table local","local fe80::1/128 dev nodelocaldns table local"]}`))
	if err != nil || !slices.Equal(old.Addresses, []string{"169.254.25.10/32", "fd00:25::10/128"}) || !slices.Equal(old.Routes, []string{"local 169.254.25.10/32 dev nodelocaldns table local"}) {
		t.Errorf("old baseline: %v %v %v", old.Addresses, old.Routes, err)
	}
}

// TestIPv6Faults: each fault of the IPv6 cache address flags its own id and names fd00:25::10.
func TestIPv6Faults(t *testing.T) {
	t.Run("no IPv6 local route", func(t *testing.T) {
		env, rec := podNode(t, &fakePods{}, func(_ *config.Config, _ *node.Snapshot, n *dualNet) {
			n.routes = slices.DeleteFunc(n.routes, func(r netstate.Route) bool { return r.Dst.Addr() == cache6 })
		})
		checkResult(t, runCheck(env, "nodelocaldns.routes"), Problem, []string{"no local-table route for fd00:25::10"}, []string{"169.254.25.10"},
			[]string{"`ip -6 route replace local fd00:25::10 dev nodelocaldns table local scope host`"})
		checkResult(t, runCheck(env, "nodelocaldns.dns"), OK, []string{"not probed (not on the interface or no local route): fd00:25::10"}, nil, nil)
		if slices.Contains(rec.asked, cache6) {
			t.Errorf("asked fd00:25::10 without a local route for it: %v", rec.asked)
		}
	})
	t.Run("no IPv6 address", func(t *testing.T) {
		env, _ := podNode(t, &fakePods{}, func(c *config.Config, _ *node.Snapshot, n *dualNet) {
			c.NodeLocalDNS.Addresses = []netip.Addr{cache6}
			l := n.links["nodelocaldns"]
			l.Addrs = []netip.Prefix{hostPrefix(cache), kernelLL}
		})
		checkResult(t, runCheck(env, "nodelocaldns.interface"), Problem, []string{"lacks cache address fd00:25::10"}, []string{"fe80"},
			[]string{"`ip addr add fd00:25::10/128 dev nodelocaldns`"})
	})
	t.Run("no ip6 NOTRACK rules", func(t *testing.T) {
		env, _ := podNode(t, &fakePods{}, nil)
		env.Host.Firewall = func(context.Context) []Backend {
			var rs []RawRule
			for _, n := range notrackNeeds {
				rs = append(rs, RawRule{Family: 4, Chain: n.Chain, Dst: hostPrefix(cache), Proto: n.Proto, DPort: 53, Notrack: true})
			}
			return []Backend{{Name: "nf_tables", Rules: rs}}
		}
		checkResult(t, runCheck(env, "nodelocaldns.iptables"), Problem, []string{"missing for fd00:25::10 (PREROUTING udp, PREROUTING tcp, OUTPUT udp, OUTPUT tcp)"}, []string{"169.254.25.10 ("}, nil)
	})
}

// TestCacheModes: outside interface mode the interface, routes and iptables checks are skipped with
// the mode as reason, and the probes (host and pods) go to the cluster DNS addresses.
func TestCacheModes(t *testing.T) {
	noInterface := func(mode string) func(*config.Config, *node.Snapshot, *dualNet) {
		return func(c *config.Config, s *node.Snapshot, n *dualNet) {
			c.NodeLocalDNS.Mode = mode
			delete(n.links, "nodelocaldns")
			n.routes = nil
			s.Kubelet.ClusterDNS = []netip.Addr{clusterIP}
		}
	}
	for _, tc := range []struct {
		mode, says string
	}{{config.CacheLRP, "cache mode lrp (nodeLocalDNS.mode: lrp)"}, {config.CacheNone, "cache mode none"}, {config.CacheAuto, "cache mode lrp or none (auto: no nodelocaldns interface"}} {
		t.Run(tc.mode, func(t *testing.T) {
			fp := &fakePods{pods: []podprobe.Pod{webPod}}
			env, rec := podNode(t, fp, noInterface(tc.mode))
			for _, id := range []string{"nodelocaldns.interface", "nodelocaldns.routes", "nodelocaldns.iptables"} {
				checkResult(t, runCheck(env, id), Skipped, []string{tc.says}, nil, nil)
			}
			checkResult(t, runCheck(env, "nodelocaldns.dns"), OK, []string{"the cluster DNS 10.233.0.10", "answers over udp and tcp"}, nil, nil)
			checkResult(t, runCheck(env, "nodelocaldns.pods"), OK, []string{"the cluster DNS answers web-0 on 10.233.0.10"}, nil, nil)
			checkResult(t, runCheck(env, "dns.loop"), OK, []string{"no cache process on this node", "through 10.233.0.10 got NXDOMAIN"}, nil, nil)
			if !slices.Equal(rec.asked, []netip.Addr{clusterIP}) || !slices.Equal(fp.targets, []netip.Addr{clusterIP}) {
				t.Errorf("host asked %v, pods asked %v; want only the cluster DNS 10.233.0.10", rec.asked, fp.targets)
			}
		})
	}
	t.Run("lrp with the redirect gone", func(t *testing.T) {
		env, rec := podNode(t, &fakePods{pods: []podprobe.Pod{webPod}}, noInterface(config.CacheLRP))
		rec.refuse = true
		checkResult(t, runCheck(env, "nodelocaldns.dns"), Problem, []string{"nothing listens behind the cluster DNS 10.233.0.10"}, nil, []string{"LocalRedirectPolicy"})
		checkResult(t, runCheck(env, "nodelocaldns.pods"), Unknown, []string{"the cluster DNS does not answer the host either"}, nil, nil)
	})
	t.Run("lrp without any cluster DNS address", func(t *testing.T) {
		env, _ := podNode(t, &fakePods{}, func(c *config.Config, s *node.Snapshot, n *dualNet) {
			noInterface(config.CacheLRP)(c, s, n)
			s.Kubelet.ClusterDNS = nil
		})
		checkResult(t, runCheck(env, "nodelocaldns.dns"), Unknown, []string{"no cluster DNS address is known"}, nil, []string{"clusterDNS"})
	})
	t.Run("interface mode configured on a node without the interface", func(t *testing.T) {
		env, _ := podNode(t, &fakePods{}, noInterface(config.CacheInterface))
		checkResult(t, runCheck(env, "nodelocaldns.interface"), Problem, []string{"interface nodelocaldns is missing"}, nil, nil)
	})
}
