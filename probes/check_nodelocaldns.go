package probes

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"github.com/nodedns/nodedns/hostnet"
)

type nodelocalRoutes struct{}

func (nodelocalRoutes) ID() string { return "nodelocaldns.routes" }

func hasLocalRoute(rs []hostnet.Route, a netip.Addr) bool {
	for _, r := range rs {
		if r.Dst.Contains(a) {
			return true
		}
	}
	return false
}

// ruleString renders a rule as `ip rule` prints it.
func ruleString(r hostnet.Rule) string {
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
	case r.Table == hostnet.TableLocal:
		b.WriteString(" lookup local")
	case r.Table == hostnet.TableMain:
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
func localRule(rules []hostnet.Rule, family int) int {
	for i, r := range rules {
		if r.Family == family && r.Table == hostnet.TableLocal && r.Goto == 0 && !r.Src.IsValid() && !r.Dst.IsValid() && r.Mask == 0 && r.IIF == "" && r.OIF == "" && !r.Invert {
			return i
		}
	}
	return -1
}

// Bypass is a rule ahead of the local table that catches traffic to a cache address (seed 004: `from
// all iif vlan.eth.2 lookup 102` at priority 10, so pods behind that VLAN never reach the local route).
type Bypass struct {
	Addr netip.Addr
	Rule hostnet.Rule
}

// RuleBypasses finds, for each address, the rules consulted before `lookup local` that can catch
// packets to it. Rules with a fwmark selector are left out: they catch only packets something marked
// on purpose (Cilium's proxy and WireGuard rules sit there on every Cilium node). A family without a
// plain local rule has every address bypassed (noLocal).
func RuleBypasses(rules []hostnet.Rule, addrs []netip.Addr) (out []Bypass, noLocal []netip.Addr) {
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
			if r.Family != fam || r.Mask != 0 || r.Table == hostnet.TableLocal && r.Goto == 0 {
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

func (nodelocalRoutes) Run(_ context.Context, env *Env) Result {
	if env.Host == nil {
		return liveSkipped()
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
		hints = append(hints, fmt.Sprintf("`ip route replace local %s dev %s table local scope host` (node-cache's address normally brings it), or restart the node-local-dns pod", noRoute[0], env.Config.NodeLocalDNS.Interface))
	}
	bypass, noLocal := RuleBypasses(nv.rules, append(append([]netip.Addr{}, onLink...), noRoute...))
	if len(noLocal) > 0 {
		problems = append(problems, fmt.Sprintf("no `lookup local` rule for %s: nothing is delivered locally", addrList(noLocal)))
		hints = append(hints, "`ip rule add priority 0 lookup local` (or the CNI's moved local rule)")
	}
	if len(bypass) > 0 {
		var rs []string
		var iifs []string
		for _, b := range bypass {
			who := "all traffic"
			if b.Rule.IIF != "" {
				who = "traffic arriving on " + b.Rule.IIF
				iifs = append(iifs, b.Rule.IIF)
			} else if b.Rule.Src.IsValid() {
				who = "traffic from " + b.Rule.Src.String()
			}
			rs = append(rs, fmt.Sprintf("`%s` catches %s to %s before the local table", ruleString(b.Rule), who, b.Addr))
		}
		problems = append(problems, strings.Join(rs, "; "))
		h := fmt.Sprintf("add `ip rule add to %s lookup local priority %d` ahead of it", bypass[0].Addr, max(bypass[0].Rule.Priority-1, 0))
		if len(iifs) > 0 {
			h += " (pods behind " + strings.Join(uniq(iifs), ", ") + " cannot reach the cache: seed 004, EKS security groups for pods)"
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
