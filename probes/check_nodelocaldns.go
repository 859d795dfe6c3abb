package probes

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/nodedns/nodedns/internal/hostnet/netstate"
	"github.com/nodedns/nodedns/internal/policy"
)

type nodelocalInterface struct{}

func (nodelocalInterface) ID() string { return "nodelocaldns.interface" }

func (nodelocalInterface) Run(_ context.Context, env *Env) Result {
	if env.Host == nil {
		return liveSkipped()
	}
	if m := env.cacheMode(); !m.Interface() {
		return modeSkipped(m, "no "+env.Config.NodeLocalDNS.Interface+" interface is expected")
	}
	name := env.Config.NodeLocalDNS.Interface
	nv := env.Host.netState(name)
	if nv.linkErr != nil && nv.link == nil {
		return Result{Status: Unknown, Message: fmt.Sprintf("interface %s cannot be read: %v", name, nv.linkErr)}
	}
	if nv.link == nil {
		return Result{Status: Problem, Message: fmt.Sprintf("interface %s is missing (cache addresses %s)", name, addrList(env.Plan.Facts.CacheAddrs)),
			Hint: "node-local-dns (node-cache) creates it at start: check the node-local-dns pod on this node (kubectl -n kube-system get pods -o wide | grep nodelocaldns); set nodeLocalDNS.interface if it has another name"}
	}
	l := nv.link
	var missing []netip.Addr
	for _, st := range env.cacheAddrs() {
		if !st.OnLink {
			missing = append(missing, st.Addr)
		}
	}
	// The kernel's own fe80:: address (any up interface has one) is not the cache's: it is left out
	// of what the interface is said to carry, so no message sends anyone after it.
	given := slices.DeleteFunc(slices.Clone(l.Addrs), func(p netip.Prefix) bool { return policy.KernelMade(p.Addr()) })
	state := fmt.Sprintf("%s (%s, admin %s, oper %s)", l.Name, l.Type, upDown(l.AdminUp), strings.ToLower(l.OperState))
	desc := state + " carries " + prefixList(given)
	switch {
	case len(given) == 0 && len(l.Addrs) > 0:
		desc = state + " has no address but the kernel's own IPv6 link-local one"
	case len(given) == 0:
		desc = state + " has no address"
	case len(given) < len(l.Addrs):
		desc += " (and the kernel's own IPv6 link-local address, not a cache address)"
	}
	if nv.linkErr != nil {
		return Result{Status: Unknown, Message: desc + "; " + nv.linkErr.Error()}
	}
	if len(missing) > 0 {
		return Result{Status: Problem, Message: fmt.Sprintf("%s lacks cache address %s", desc, addrList(missing)),
			Hint: fmt.Sprintf("node-local-dns adds its -localip addresses at start: restart its pod on this node, or `ip addr add %s dev %s` until it does", hostPrefix(missing[0]), l.Name)}
	}
	// Admin state is reported, not judged here: whether the addresses still receive traffic is what
	// nodelocaldns.routes (a local route) and nodelocaldns.dns (the cache answers) tell.
	return Result{Status: OK, Message: desc}
}

// modeSkipped is the answer of a check that belongs to interface mode only (docs/contract.md "Cache mode").
func modeSkipped(m policy.CacheMode, what string) Result {
	return Result{Status: Skipped, Message: m.String() + ": " + what}
}

// hostPrefix is a as the /32 or /128 node-cache puts on its interface.
func hostPrefix(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }

// ipCmd is `ip` for a's family: `ip -6` for IPv6 (`ip rule` takes IPv4 unless told).
func ipCmd(a netip.Addr) string {
	if a.Is6() {
		return "ip -6"
	}
	return "ip"
}

func upDown(up bool) string {
	if up {
		return "up"
	}
	return "down"
}

func prefixList(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}

type nodelocalRoutes struct{}

func (nodelocalRoutes) ID() string { return "nodelocaldns.routes" }

func hasLocalRoute(rs []netstate.Route, a netip.Addr) bool {
	for _, r := range rs {
		if r.Dst.Contains(a) {
			return true
		}
	}
	return false
}

// ruleString renders a rule as `ip rule` prints it.
func ruleString(r netstate.Rule) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d: ", r.Priority)
	if r.Invert {
		b.WriteString("not ")
	}
	b.WriteString("from ")
	if r.Src.IsValid() {
		b.WriteString(r.Src.String())
	} else {
		b.WriteString("all")
	}
	if r.Dst.IsValid() {
		b.WriteString(" to " + r.Dst.String())
	}
	if r.Mask != 0 {
		fmt.Fprintf(&b, " fwmark %#x/%#x", r.Mark, r.Mask)
	}
	if r.IIF != "" {
		b.WriteString(" iif " + r.IIF)
	}
	if r.OIF != "" {
		b.WriteString(" oif " + r.OIF)
	}
	switch {
	case r.Goto > 0:
		fmt.Fprintf(&b, " goto %d", r.Goto)
	case r.Table == netstate.TableLocal:
		b.WriteString(" lookup local")
	case r.Table == netstate.TableMain:
		b.WriteString(" lookup main")
	case r.Table == 0:
		b.WriteString(" (no lookup: blackhole, unreachable or prohibit)")
	default:
		fmt.Fprintf(&b, " lookup %d", r.Table)
	}
	return b.String()
}

// localRule returns the index of the first plain `lookup local` rule of a family, or -1. The kernel
// walks rules in the order it dumps them (by priority), so everything before it is consulted first.
func localRule(rules []netstate.Rule, family int) int {
	for i, r := range rules {
		if r.Family == family && r.Table == netstate.TableLocal && r.Goto == 0 && !r.Src.IsValid() && !r.Dst.IsValid() && r.Mask == 0 && r.IIF == "" && r.OIF == "" && !r.Invert {
			return i
		}
	}
	return -1
}

// Bypass is a rule ahead of the local table that catches traffic to a cache address (docs/incidents.md, incident 004: `from
// all iif vlan.eth.2 lookup 102` at priority 10, so pods behind that VLAN never reach the local route).
type Bypass struct {
	Addr netip.Addr
	Rule netstate.Rule
}

// RuleBypasses finds, for each address, the rules consulted before `lookup local` that can catch
// packets to it. Rules with a fwmark selector are left out: they catch only packets something marked
// on purpose (Cilium's proxy and WireGuard rules sit there on every Cilium node). A family without a
// plain local rule has every address bypassed (noLocal).
func RuleBypasses(rules []netstate.Rule, addrs []netip.Addr) (out []Bypass, noLocal []netip.Addr) {
	for _, a := range addrs {
		fam := 4
		if a.Is6() {
			fam = 6
		}
		li := localRule(rules, fam)
		if li < 0 {
			noLocal = append(noLocal, a)
			continue
		}
		for _, r := range rules[:li] {
			if r.Family != fam || r.Mask != 0 || r.Table == netstate.TableLocal && r.Goto == 0 {
				continue
			}
			if r.Dst.IsValid() && !r.Dst.Contains(a) && !r.Invert {
				continue
			}
			out = append(out, Bypass{Addr: a, Rule: r})
		}
	}
	return out, noLocal
}

func (nodelocalRoutes) Run(ctx context.Context, env *Env) Result {
	if env.Host == nil {
		return liveSkipped()
	}
	if m := env.cacheMode(); !m.Interface() {
		return modeSkipped(m, "no local-table route for a cache address is expected")
	}
	nv := env.Host.netState(env.Config.NodeLocalDNS.Interface)
	if nv.err != nil {
		return Result{Status: Unknown, Message: "routes or rules cannot be read: " + nv.err.Error()}
	}
	var onLink, noRoute, offLink []netip.Addr
	for _, st := range env.cacheAddrs() {
		switch {
		case !st.OnLink:
			// Removing an address removes its local route too: that is nodelocaldns.interface's
			// problem, not a second one here.
			offLink = append(offLink, st.Addr)
		case !st.Local:
			noRoute = append(noRoute, st.Addr)
		default:
			onLink = append(onLink, st.Addr)
		}
	}
	var problems, hints []string
	if len(noRoute) > 0 {
		problems = append(problems, fmt.Sprintf("no local-table route for %s: packets to it are not delivered to the cache", addrList(noRoute)))
		hints = append(hints, fmt.Sprintf("`%s route replace local %s dev %s table local scope host` (node-cache's address normally brings it), or restart the node-local-dns pod", ipCmd(noRoute[0]), noRoute[0], env.Config.NodeLocalDNS.Interface))
	}
	bypass, noLocal := RuleBypasses(nv.rules, append(append([]netip.Addr{}, onLink...), noRoute...))
	if len(noLocal) > 0 {
		problems = append(problems, fmt.Sprintf("no `lookup local` rule for %s: nothing is delivered locally", addrList(noLocal)))
		hints = append(hints, fmt.Sprintf("`%s rule add priority 0 lookup local` (or the CNI's moved local rule)", ipCmd(noLocal[0])))
	}
	if len(bypass) > 0 {
		var rs []string
		var iifs []string
		for _, b := range bypass {
			who := "all traffic"
			if b.Rule.IIF != "" {
				who = "traffic arriving on " + b.Rule.IIF
				if pods := podsBehind(ctx, env, b.Rule.IIF); len(pods) > 0 {
					who += " (pod " + strings.Join(pods, ", ") + ")"
				}
				iifs = append(iifs, b.Rule.IIF)
			} else if b.Rule.Src.IsValid() {
				who = "traffic from " + b.Rule.Src.String()
			}
			rs = append(rs, fmt.Sprintf("`%s` catches %s to %s before the local table", ruleString(b.Rule), who, b.Addr))
		}
		problems = append(problems, strings.Join(rs, "; "))
		// One rule per address caught, each ahead of the first rule that catches it.
		var adds []string
		for _, b := range bypass {
			add := fmt.Sprintf("`%s rule add to %s lookup local priority %d`", ipCmd(b.Addr), b.Addr, max(b.Rule.Priority-1, 0))
			if !slices.ContainsFunc(adds, func(s string) bool { return strings.Contains(s, " to "+b.Addr.String()+" ") }) {
				adds = append(adds, add)
			}
		}
		h := "add " + strings.Join(adds, " and ") + " ahead of it"
		if len(iifs) > 0 {
			h += " (pods behind " + strings.Join(uniq(iifs), ", ") + " cannot reach the cache: EKS security groups for pods, docs/incidents.md incident 004)"
		}
		hints = append(hints, h)
	}
	if len(problems) > 0 {
		return Result{Status: Problem, Message: strings.Join(problems, "; "), Hint: strings.Join(hints, "; ")}
	}
	if len(onLink) == 0 {
		return Result{Status: Unknown, Message: fmt.Sprintf("no cache address is on %s: no route to judge (see nodelocaldns.interface)", env.Config.NodeLocalDNS.Interface)}
	}
	msg := fmt.Sprintf("local-table routes for %s; no rule ahead of `lookup local` catches them", addrList(onLink))
	if len(offLink) > 0 {
		msg += fmt.Sprintf("; %s not judged: not on the interface", addrList(offLink))
	}
	return Result{Status: OK, Message: msg}
}

// notrackNeed is one rule node-cache adds per cache address (k8s.io/dns cmd/node-cache:
// raw PREROUTING and OUTPUT, -d ADDR -p udp|tcp --dport 53 -j NOTRACK).
type notrackNeed struct {
	Chain string
	Proto uint8
}

var notrackNeeds = []notrackNeed{{"PREROUTING", unix.IPPROTO_UDP}, {"PREROUTING", unix.IPPROTO_TCP}, {"OUTPUT", unix.IPPROTO_UDP}, {"OUTPUT", unix.IPPROTO_TCP}}

func (n notrackNeed) String() string {
	p := "udp"
	if n.Proto == unix.IPPROTO_TCP {
		p = "tcp"
	}
	return n.Chain + " " + p
}

func covers(r RawRule, a netip.Addr, n notrackNeed, port uint16) bool {
	fam := 4
	if a.Is6() {
		fam = 6
	}
	return r.Notrack && !r.Other && r.Family == fam && r.Chain == n.Chain &&
		(!r.Dst.IsValid() || r.Dst.Contains(a)) && (r.Proto == 0 || r.Proto == n.Proto) && (r.DPort == 0 || r.DPort == port)
}

// NotrackMissing lists, per address, the NOTRACK rules no backend has; and which backends have any.
func NotrackMissing(bs []Backend, addrs []netip.Addr) (missing map[netip.Addr][]string, with []string) {
	missing = map[netip.Addr][]string{}
	for _, b := range bs {
		has := false
		for _, r := range b.Rules {
			for _, a := range addrs {
				for _, n := range notrackNeeds {
					has = has || covers(r, a, n, 53)
				}
			}
		}
		if has {
			with = append(with, b.Name)
		}
	}
	for _, a := range addrs {
		for _, n := range notrackNeeds {
			found := false
			for _, b := range bs {
				for _, r := range b.Rules {
					found = found || covers(r, a, n, 53)
				}
			}
			if !found {
				missing[a] = append(missing[a], n.String())
			}
		}
	}
	return missing, with
}

type nodelocalIptables struct{}

func (nodelocalIptables) ID() string { return "nodelocaldns.iptables" }

func (nodelocalIptables) Run(ctx context.Context, env *Env) Result {
	if env.Host == nil {
		return liveSkipped()
	}
	if m := env.cacheMode(); !m.Interface() {
		return modeSkipped(m, "no NOTRACK rule for a cache address is expected")
	}
	bs := env.Host.firewall(ctx)
	addrs := env.Plan.Facts.CacheAddrs
	missing, with := NotrackMissing(bs, addrs)
	var errs []string
	for _, b := range bs {
		if b.Err != nil {
			errs = append(errs, b.Name+": "+b.Err.Error())
		}
	}
	if len(missing) > 0 {
		var parts []string
		for _, a := range addrs {
			if m := missing[a]; len(m) > 0 {
				parts = append(parts, fmt.Sprintf("%s (%s)", a, strings.Join(m, ", ")))
			}
		}
		msg := "raw-table NOTRACK rules for udp/tcp 53 missing for " + strings.Join(parts, "; ")
		if len(errs) > 0 {
			// A backend we could not read may hold them.
			return Result{Status: Unknown, Message: msg + "; and " + strings.Join(errs, "; ")}
		}
		msg += " (read from " + backendNames(bs) + ")"
		if r, ok := notrackFirstSync(ctx, env, msg); ok {
			return r
		}
		return Result{Status: Problem, Message: msg,
			Hint: "node-local-dns adds them at start (unless -setupiptables=false): restart its pod on this node; without them every DNS query takes a conntrack entry and DNS drops when the table fills"}
	}
	msg := fmt.Sprintf("NOTRACK rules for %s in raw PREROUTING and OUTPUT (udp, tcp 53) in %s", addrList(addrs), strings.Join(with, " and "))
	if len(with) > 1 {
		msg += "; warning: rules in both nf_tables and iptables-legacy (two iptables flavours on one node: kube-proxy, the CNI and node-cache disagree on iptables-nft vs -legacy)"
	}
	if len(errs) > 0 {
		msg += "; " + strings.Join(errs, "; ")
	}
	return Result{Status: OK, Message: msg}
}

// NodeCacheFirstSync is when node-cache (k8s.io/dns cmd/node-cache, with the arguments kubespray and
// the upstream manifest give it) first adds its iptables rules: at its first sync tick, this long
// after it starts. NotrackSettle is that and the time the iptables calls may take: what a waiting
// `nodedns check --wait` is told to allow.
const (
	NodeCacheFirstSync = 60 * time.Second
	NotrackSettle      = 90 * time.Second
)

// FirstSyncWait says whether missing NOTRACK rules are still to come from the cache process: a
// node-cache that started age ago, before its first sync tick (plus a margin for the iptables calls),
// has not added them yet. left is how long until the tick. A coredns process never adds them.
func FirstSyncWait(comm string, age time.Duration) (wait bool, left time.Duration) {
	if comm != "node-cache" || age < 0 || age >= NodeCacheFirstSync+10*time.Second {
		return false, 0
	}
	return true, max(NodeCacheFirstSync-age, 0)
}

// notrackFirstSync is nodelocaldns.iptables's answer in node-cache's first minute: the rules are not
// there yet because node-cache adds them at its first sync tick, and restarting its pod (the hint
// for rules gone later) would restart that wait. unknown, not problem, so `check --wait` keeps going
// (docs/contract.md "Check ids", nodelocaldns.iptables).
func notrackFirstSync(ctx context.Context, env *Env, msg string) (Result, bool) {
	cp := env.cacheProcess(ctx)
	if cp == nil || env.Host.Uptime == nil {
		return Result{}, false
	}
	stat, err := env.Host.ProcStat(cp.PID)
	if err != nil {
		return Result{}, false
	}
	start, err := ParseProcStatStart(stat)
	if err != nil {
		return Result{}, false
	}
	up, err := env.Host.Uptime()
	if err != nil {
		return Result{}, false
	}
	age := up - start
	wait, left := FirstSyncWait(cp.Comm, age)
	if !wait {
		return Result{}, false
	}
	return Result{Status: Unknown,
		Message: fmt.Sprintf("%s; %s (pid %d) started %s ago and adds them at its first sync tick, about %ds after start", msg, cp.Comm, cp.PID, age.Round(time.Second), int(NodeCacheFirstSync.Seconds())),
		Hint:    fmt.Sprintf("wait for node-cache's first sync (about %s more), or run `nodedns check --wait %ds`; restarting its pod now restarts the wait", left.Round(time.Second), int(NotrackSettle.Seconds()))}, true
}

func backendNames(bs []Backend) string {
	var n []string
	for _, b := range bs {
		n = append(n, b.Name)
	}
	return strings.Join(n, " and ")
}

type nodelocalDNS struct{}

func (nodelocalDNS) ID() string { return "nodelocaldns.dns" }

func (nodelocalDNS) Run(ctx context.Context, env *Env) Result {
	if env.Host == nil {
		return liveSkipped()
	}
	if st, ok := env.standbyActive(); ok {
		// docs/contract.md "Standby": what answers is nodedns, not the cache; the node stays degraded.
		if len(st.Hung) > 0 {
			return Result{Status: Problem, Message: fmt.Sprintf("a hung cache: it holds its listeners on %s but answers nothing; nodedns's standby answers beside it since %s", addrList(st.Hung), st.Since.Local().Format(time.RFC3339)),
				Hint: "the cache's process is stopped, deadlocked or starved: check the node-local-dns pod on this node (kubectl -n kube-system logs ds/nodelocaldns), restart it if it stays so"}
		}
		return Result{Status: Problem, Message: fmt.Sprintf("no cache listens on %s: nodedns's standby answers in its place since %s", addrList(st.Covering), st.Since.Local().Format(time.RFC3339)),
			Hint: "the cache is not running: check the node-local-dns pod on this node (kubectl -n kube-system logs ds/nodelocaldns)"}
	}
	p := env.probeCache(ctx)
	ifname := env.Config.NodeLocalDNS.Interface
	if len(p.probed) == 0 {
		if !p.mode.Interface() {
			return Result{Status: Unknown, Message: p.mode.String() + ": no cluster DNS address is known to probe (kubelet's clusterDNS, config clusterDNS)",
				Hint: "set clusterDNS in nodedns's config to the cluster DNS service IP, or nodeLocalDNS.mode if the cache runs on the nodelocaldns interface"}
		}
		return Result{Status: Unknown, Message: fmt.Sprintf("no cache address (%s) is on %s with a local route: nothing to probe (see nodelocaldns.interface and nodelocaldns.routes)", addrList(p.skipped), ifname)}
	}
	var failed, refused, ok []string
	var servfail []string
	for _, a := range p.answers {
		switch {
		case a.err == nil && a.msg.Rcode == dns.RcodeServerFailure:
			servfail = append(servfail, a.String())
		case a.err == nil:
			ok = append(ok, a.String())
		case a.refused():
			refused = append(refused, a.String())
		default:
			failed = append(failed, a.String())
		}
	}
	timeout := env.Config.Probes.Timeout
	what := "the cache"
	if !p.mode.Interface() {
		what = "the cluster DNS " + addrList(p.probed) + " (" + p.mode.String() + ")"
	}
	switch {
	case len(refused) > 0 && len(failed) == 0 && len(ok)+len(servfail) == 0:
		if !p.mode.Interface() {
			return Result{Status: Problem, Message: fmt.Sprintf("nothing listens behind %s port 53: %s", what, strings.Join(refused, "; ")),
				Hint: "the redirect reaches no cache: check the node-local-dns pod on this node and the CNI's LocalRedirectPolicy (Cilium: cilium-dbg lrp list)"}
		}
		return Result{Status: Problem, Message: fmt.Sprintf("nothing listens on %s port 53: %s", addrList(p.probed), strings.Join(refused, "; ")),
			Hint: "the cache is not running: check the node-local-dns pod on this node (kubectl -n kube-system logs ds/nodelocaldns)"}
	case len(failed)+len(refused) > 0 && !p.mode.Interface():
		return Result{Status: Problem, Message: fmt.Sprintf("%s does not answer within %s: %s", what, timeout, strings.Join(append(failed, refused...), "; ")),
			Hint: "the CNI does not redirect the cluster DNS address to the cache, or the cache does not answer: check the node-local-dns pod on this node and its LocalRedirectPolicy (Cilium: cilium-dbg lrp list, cilium-dbg service list); with no node-local cache, check the CoreDNS service and kube-proxy"}
	case len(failed)+len(refused) > 0:
		// Incident 000 (docs/incidents.md): the interface, address and route are fine, yet packets to the link-local address
		// vanish (Cilium 1.16 with BPF host routing and bpf.masquerade).
		hung := ""
		if env.Config.NodeLocalDNS.Standby {
			// A hung cache (stopped, deadlocked) keeps its sockets; the standby stands in beside one
			// that answers its own probes nothing for a while (docs/contract.md "Standby").
			hung = "; the cache still holds its address (a hung cache? nodedns's standby stands in beside a cache that answers nothing: see nodelocaldns.standby)"
		}
		return Result{Status: Problem, Message: fmt.Sprintf("the cache does not answer within %s although %s carries %s: %s%s", timeout, ifname, addrList(p.probed), strings.Join(append(failed, refused...), "; "), hung),
			Hint: "packets to the link-local address are dropped or diverted before the cache: with Cilium, set bpf.hostLegacyRouting=true or use a LocalRedirectPolicy for node-local-dns; check the cache pod's logs and `nodedns check` on a healthy node"}
	}
	msg := "the cache answers on " + addrList(p.probed) + " over udp and tcp (" + strings.Join(ok, "; ")
	if !p.mode.Interface() {
		msg = what + " answers over udp and tcp (" + strings.Join(ok, "; ")
	}
	if len(servfail) > 0 {
		msg += "; SERVFAIL: " + strings.Join(servfail, "; ")
	}
	msg += ")"
	if len(p.skipped) > 0 {
		msg += "; not probed (not on the interface or no local route): " + addrList(p.skipped)
	}
	return Result{Status: OK, Message: msg}
}

// prefetch reads the raw tables before this check's turn (nft over netlink, iptables-legacy-save).
func (nodelocalIptables) prefetch(ctx context.Context, env *Env) func() {
	if !env.cacheMode().Interface() {
		return nil // the check expects no rule and reads none
	}
	return func() { env.Host.firewall(ctx) }
}

// prefetch starts the cache's probes (UDP and TCP on each address, in parallel) before this
// check's turn.
func (nodelocalDNS) prefetch(ctx context.Context, env *Env) func() {
	return func() { env.probeCache(ctx) }
}
