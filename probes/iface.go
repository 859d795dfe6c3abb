package probes

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
)

type nodelocalInterface struct{}

func (nodelocalInterface) ID() string { return "nodelocaldns.interface" }

func (nodelocalInterface) Run(_ context.Context, env *Env) Result {
	if env.Host == nil {
		return liveSkipped()
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
	var missing []string
	for _, st := range env.cacheAddrs() {
		if !st.OnLink {
			missing = append(missing, st.Addr.String())
		}
	}
	desc := fmt.Sprintf("%s (%s, admin %s, oper %s) carries %s", l.Name, l.Type, upDown(l.AdminUp), strings.ToLower(l.OperState), prefixList(l.Addrs))
	if len(l.Addrs) == 0 {
		desc = fmt.Sprintf("%s (%s, admin %s, oper %s) has no address", l.Name, l.Type, upDown(l.AdminUp), strings.ToLower(l.OperState))
	}
	if nv.linkErr != nil {
		return Result{Status: Unknown, Message: desc + "; " + nv.linkErr.Error()}
	}
	if len(missing) > 0 {
		return Result{Status: Problem, Message: fmt.Sprintf("%s lacks cache address %s", desc, strings.Join(missing, ", ")),
			Hint: fmt.Sprintf("node-local-dns adds its -localip addresses at start: restart its pod on this node, or `ip addr add %s/32 dev %s` until it does", missing[0], l.Name)}
	}
	// Admin state is reported, not judged here: whether the addresses still receive traffic is what
	// nodelocaldns.routes (a local route) and nodelocaldns.dns (the cache answers) tell.
	return Result{Status: OK, Message: desc}
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
