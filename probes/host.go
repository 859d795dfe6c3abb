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
	"time"

	"github.com/miekg/dns"
	"github.com/nodedns/nodedns/internal/hostnet/netstate"
	"github.com/nodedns/nodedns/internal/policy"
	"github.com/nodedns/nodedns/probes/podprobe"
)

// Host is the running node as the live checks reach it: netlink, nf_tables and iptables-legacy, DNS
// queries, /proc, the boot id and the state file. Each field is a seam in pure terms (this package's
// types, netstate's and podprobe's records), so that the checks import none of the code that reads
// the node: internal/live fills them with the real thing, and unit tests replace the ones that
// cannot run unprivileged. Under --root Env.Host is
// nil and every live check is skipped.
//
// What the checks observe is read once per report and shared: nodelocaldns.dns, dns.loop and
// boot.persistence judge the same interface, routes and rules that nodelocaldns.interface and
// nodelocaldns.routes reported.
type Host struct {
	Net      NetReader
	Firewall func(ctx context.Context) []Backend
	DNS      Exchanger
	// DNSPort is the port probes send to (53; tests run their servers elsewhere).
	DNSPort uint16
	// FindCache finds the cache's process: the one holding a socket the kernel lists as bound to
	// one of addrs on port 53 (interface mode); FindDNSServers every node-cache or coredns process on
	// the node with a port-53 socket in its own network namespace, by PID, with what says whose it
	// is (the checks believe only some: serverTrust; in lrp and none modes the cache is among them).
	// Each is read from /proc, its Corefile and resolv.conf files through the process's own root;
	// nil when none runs.
	FindCache      func(addrs []netip.Addr) *CacheProcess
	FindDNSServers func() []*CacheProcess
	// ProcStat returns /proc/PID/stat of a process (ParseProcStatStart reads it).
	ProcStat func(pid int) ([]byte, error)
	// BootID returns the kernel's boot id (/proc/sys/kernel/random/boot_id).
	BootID func() (string, error)
	// Uptime returns how long ago the kernel booted (/proc/uptime).
	Uptime func() (time.Duration, error)
	// State loads and saves the reboot baseline (/var/lib/nodedns/state.json).
	State StateStore
	// Random returns a fresh random DNS label for probe names.
	Random func() string
	// Pods finds the node's pod network namespaces, sorted by name (podnet.Find in the host's
	// namespaces); ProbePods sends one probe round from some of them and from the host
	// (podnet.Probe). nodelocaldns.pods uses both, nodelocaldns.routes names the pods behind an
	// interface a rule catches.
	Pods      func(ctx context.Context, log *slog.Logger) ([]podprobe.Pod, error)
	ProbePods func(ctx context.Context, pods []podprobe.Pod, q podprobe.Query) podprobe.Report
	// HostPIDNS reports whether nodedns runs in the host's (initial) PID namespace, where every pod's
	// processes are visible in /proc; a container without hostPID sees none.
	HostPIDNS func() bool

	netOnce sync.Once
	net     netView
	fwOnce  sync.Once
	fw      []Backend
	dnsOnce sync.Once
	dns     cacheProbe
	nxQs    []answer // the search-domain probes, made by nxQueries
	nxOnce  sync.Once
	nx      []answer
	podOnce sync.Once
	pods    []podprobe.Pod
	podsErr error
	cpOnce  sync.Once
	cp      *CacheProcess
	srvOnce sync.Once
	srv     []*CacheProcess
}

// ProbeRounds is how many DNS rounds a live report waits for one after the other, each bounded by
// probes.timeout whatever the number of addresses and pods: nodelocaldns.dns (the host's probes, shared
// with dns.loop), nodelocaldns.pods, dns.loop's random name and dns.search-nxdomain. A caller with a
// deadline (node-problem-detector's rule timeout) needs that many timeouts and a little more.
const ProbeRounds = 4

// podNamespaces finds the pod network namespaces once per report.
func (env *Env) podNamespaces(ctx context.Context) ([]podprobe.Pod, error) {
	l := env.Host
	l.podOnce.Do(func() {
		if l.Pods == nil {
			return
		}
		l.pods, l.podsErr = l.Pods(ctx, env.log())
	})
	return l.pods, l.podsErr
}

// cacheProcess finds the cache's process once per report (docs/contract.md "Cache mode"): the one
// holding the cache address's socket in interface mode; else, among the DNS servers the checks
// believe (serverTrust: a kube-system pod's, or a privileged one's on the host), node-cache before
// coredns, then the lowest PID. nil when none runs.
func (env *Env) cacheProcess(ctx context.Context) *CacheProcess {
	l := env.Host
	l.cpOnce.Do(func() {
		if env.cacheMode().Interface() {
			l.cp = l.FindCache(env.Plan.Facts.CacheAddrs)
			return
		}
		pods, _ := env.podNamespaces(ctx)
		for _, s := range env.dnsServers() {
			if _, why := serverTrust(s, pods); why != "" {
				continue
			}
			if l.cp == nil || cacheRank(s.Comm) < cacheRank(l.cp.Comm) {
				l.cp = s // dnsServers is by PID: the first of a rank is the lowest
			}
		}
	})
	return l.cp
}

// cacheRank orders the names of a node-local cache: node-cache (the cache itself) before coredns.
func cacheRank(comm string) int {
	if comm == "node-cache" {
		return 0
	}
	return 1
}

// dnsServers finds the node's DNS servers once per report, by PID.
func (env *Env) dnsServers() []*CacheProcess {
	l := env.Host
	l.srvOnce.Do(func() {
		if l.FindDNSServers != nil {
			l.srv = l.FindDNSServers()
		}
		slices.SortFunc(l.srv, func(a, b *CacheProcess) int { return a.PID - b.PID })
	})
	return l.srv
}

// cacheMode is how the cache runs on this node (docs/contract.md "Cache mode"); in auto mode the
// interface counts as present when it cannot be read, so its check reports why.
func (env *Env) cacheMode() policy.CacheMode {
	nv := env.Host.netState(env.Config.NodeLocalDNS.Interface)
	return policy.ResolveCacheMode(env.Config, env.Snapshot, nv.link != nil || nv.linkErr != nil)
}

// NetReader reads the kernel's view of the nodelocaldns interface, the local routing table and the
// policy rules, as netstate's records (hostnet.Reader over rtnetlink is the real one).
type NetReader interface {
	// Link returns the named interface with its addresses; nil and no error when it does not exist.
	Link(name string) (*netstate.Link, error)
	// LocalRoutes returns the routes of the local table for family 4 or 6.
	LocalRoutes(family int) ([]netstate.Route, error)
	// Rules returns the policy routing rules for family 4 or 6.
	Rules(family int) ([]netstate.Rule, error)
}

// netView is the nodelocaldns interface, the local-table routes and the policy rules, read once.
type netView struct {
	link    *netstate.Link
	linkErr error
	routes  []netstate.Route
	rules   []netstate.Rule
	err     error // routes or rules could not be read
}

func (l *Host) netState(ifname string) *netView {
	l.netOnce.Do(func() {
		l.net.link, l.net.linkErr = l.Net.Link(ifname)
		var errs []string
		for _, fam := range []int{4, 6} {
			rs, err := l.Net.LocalRoutes(fam)
			if err != nil {
				errs = append(errs, err.Error())
			}
			l.net.routes = append(l.net.routes, rs...)
			ru, err := l.Net.Rules(fam)
			if err != nil {
				errs = append(errs, err.Error())
			}
			l.net.rules = append(l.net.rules, ru...)
		}
		if len(errs) > 0 {
			l.net.err = fmt.Errorf("%s", strings.Join(errs, "; "))
		}
	})
	return &l.net
}

func (l *Host) firewall(ctx context.Context) []Backend {
	l.fwOnce.Do(func() { l.fw = l.Firewall(ctx) })
	return l.fw
}

// cacheAddrState says, for one cache address, whether packets to it can reach a local socket.
type cacheAddrState struct {
	Addr     netip.Addr
	OnLink   bool // the nodelocaldns interface carries it
	Local    bool // a local-table route delivers it locally
	Probable bool // both: a DNS probe to it means something
}

// cacheAddrs is every cache address with what the interface and routes say about it.
func (env *Env) cacheAddrs() []cacheAddrState {
	nv := env.Host.netState(env.Config.NodeLocalDNS.Interface)
	var out []cacheAddrState
	for _, a := range env.Plan.Facts.CacheAddrs {
		st := cacheAddrState{Addr: a}
		if nv.link != nil {
			st.OnLink = slices.ContainsFunc(nv.link.Addrs, func(p netip.Prefix) bool { return p.Addr() == a })
		}
		st.Local = hasLocalRoute(nv.routes, a)
		st.Probable = st.OnLink && st.Local
		out = append(out, st)
	}
	return out
}

func liveSkipped() Result {
	return Result{Status: Skipped, Message: "live check: not run under --root"}
}

func addrList(as []netip.Addr) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, ", ")
}

// Exchanger sends one DNS query and returns the answer.
type Exchanger interface {
	Exchange(ctx context.Context, m *dns.Msg, network string, server netip.AddrPort) (*dns.Msg, error)
}

// answer is one probe's outcome.
type answer struct {
	server  netip.Addr
	network string
	name    string
	qtype   uint16
	msg     *dns.Msg
	err     error
}

func (a answer) String() string {
	q := fmt.Sprintf("%s %s over %s at %s", a.name, dns.TypeToString[a.qtype], a.network, a.server)
	if a.err != nil {
		return q + ": " + shortErr(a.err)
	}
	return q + ": " + dns.RcodeToString[a.msg.Rcode]
}

// refused reports a "nothing listens there" error (ICMP port unreachable on UDP, RST on TCP).
func (a answer) refused() bool { return errors.Is(a.err, syscall.ECONNREFUSED) }

func shortErr(err error) string {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case isTimeout(err):
		return "timed out"
	}
	return err.Error()
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &t) && t.Timeout()
}

// query runs the queries in parallel: probe queries are independent and each may take the whole
// timeout, so a sequence would multiply it.
func (l *Host) query(ctx context.Context, qs []answer) []answer {
	var wg sync.WaitGroup
	for i := range qs {
		wg.Add(1)
		go func(q *answer) {
			defer wg.Done()
			m := new(dns.Msg)
			m.SetQuestion(dns.Fqdn(q.name), q.qtype)
			m.RecursionDesired = true
			q.msg, q.err = l.DNS.Exchange(ctx, m, q.network, netip.AddrPortFrom(q.server, l.DNSPort))
		}(&qs[i])
	}
	wg.Wait()
	return qs
}

// cacheProbe is what the cache answered on its probeable addresses.
type cacheProbe struct {
	mode     policy.CacheMode
	probed   []netip.Addr
	skipped  []netip.Addr // not on the interface or without a local route: judged elsewhere
	answers  []answer
	answered bool // some query got a response from the cache
}

// answeredOn lists the probed addresses some query got a response on, in probe order.
func (p *cacheProbe) answeredOn() []netip.Addr {
	var out []netip.Addr
	for _, a := range p.answers {
		if a.err == nil && !slices.Contains(out, a.server) {
			out = append(out, a.server)
		}
	}
	return out
}

func clusterName(env *Env) string {
	return "kubernetes.default.svc." + env.Plan.Facts.ClusterDomain + "."
}

// probeCache queries the cluster name (and the configured external name) over UDP and TCP, once per
// report: in interface mode on every cache address that is on the interface and routed locally;
// otherwise on the cluster DNS addresses, which the CNI redirects to the cache (lrp) or which are the
// cluster DNS service itself (none).
func (env *Env) probeCache(ctx context.Context) *cacheProbe {
	l := env.Host
	l.dnsOnce.Do(func() {
		l.dns.mode = env.cacheMode()
		var targets []netip.Addr
		if l.dns.mode.Interface() {
			for _, st := range env.cacheAddrs() {
				if !st.Probable {
					l.dns.skipped = append(l.dns.skipped, st.Addr)
					continue
				}
				targets = append(targets, st.Addr)
			}
		} else {
			targets = env.Plan.Facts.ClusterDNS
		}
		var qs []answer
		for _, a := range targets {
			l.dns.probed = append(l.dns.probed, a)
			names := []string{clusterName(env)}
			if n := env.Config.Probes.ExternalName; n != "" {
				names = append(names, dns.Fqdn(n))
			}
			for _, n := range names {
				for _, network := range []string{"udp", "tcp"} {
					qs = append(qs, answer{server: a, network: network, name: n, qtype: dns.TypeA})
				}
			}
		}
		l.dns.answers = l.query(ctx, qs)
		for _, a := range l.dns.answers {
			l.dns.answered = l.dns.answered || a.err == nil
		}
	})
	return &l.dns
}

// Backend is one firewall backend's raw-table rules.
type Backend struct {
	Name  string // "nf_tables" or "iptables-legacy"
	Rules []RawRule
	Err   error
}
