package probes

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/nodedns/nodedns/internal/networkmanager"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/policy"
)

// What the checks say on a node whose /etc/resolv.conf NetworkManager writes (docs/contract.md "What
// nodedns manages", NetworkManager). nodedns never edits that file: a loop address in it has a
// persistent source in NM's configuration (a conf.d file and line, or a global DNS set over D-Bus),
// or in what DHCP hands NM, and the fix is zz-nodedns.conf plus a reload.

// nmPlanned says what the plan does for NetworkManager: a change of zz-nodedns.conf, a reload, or
// why it is blocked.
func nmPlanned(p policy.Plan) (change, reload bool, blocked string) {
	for _, c := range p.Changes {
		if c.Path == networkmanager.NodeDNSConfPath {
			change = true
		}
	}
	reload = p.HasAction(policy.ReloadNetworkManager{}.Kind()) || len(p.PendingFor("", policy.ReloadNetworkManager{}.Target())) > 0
	for _, b := range p.Blocked {
		if b.Target == networkmanager.NodeDNSConfPath {
			blocked = b.Reason
		}
	}
	return change, reload, blocked
}

// nmHint is how to complete NetworkManager's fix, given the plan.
func nmHint(env *Env) string {
	change, reload, blocked := nmPlanned(env.Plan)
	switch {
	case blocked != "":
		return networkmanager.NodeDNSConfPath + " is blocked: " + blocked
	case change:
		return hintApply + " (it writes " + networkmanager.NodeDNSConfPath + " and reloads NetworkManager; NetworkManager rewrites /etc/resolv.conf, so nodedns never edits that file)"
	case reload && env.Live:
		return hintApply + " (" + networkmanager.NodeDNSConfPath + " is in place; NetworkManager still has to reload it)"
	case reload:
		return networkmanager.NodeDNSConfPath + " is in place, pending a NetworkManager reload: run `nmcli general reload` (or `nodedns apply` on the live node)"
	}
	return "NetworkManager writes /etc/resolv.conf: change its configuration, not the file"
}

// nmLoopSource names where NetworkManager takes the loop addresses bad from: the global DNS of its
// configuration (conf.d file:line, or set over D-Bus), or DHCP on a device.
func nmLoopSource(env *Env, bad []netip.Addr) string {
	nm := &env.Snapshot.NetworkManager
	var srcs []string
	lists := func(g *networkmanager.GlobalDNS) bool {
		return slices.ContainsFunc(policy.NMStarServers(g), func(a netip.Addr) bool { return slices.Contains(bad, a) })
	}
	if nm.Others != nil {
		if g := nm.Others.GlobalDNS(); g.Overrides() {
			switch {
			case nm.Config != nil && !lists(nm.Config.GlobalDNS()) && lists(g):
				srcs = append(srcs, node.NMGlobalDNSSource(g)+", which "+networkmanager.NodeDNSConfPath+" overrides once NetworkManager reloads")
			case lists(g):
				srcs = append(srcs, node.NMGlobalDNSSource(g))
			}
		} else {
			for _, d := range nm.DHCPDevices() {
				if slices.ContainsFunc(append(slices.Clone(d.DHCP4.Servers), d.DHCP6.Servers...), func(a netip.Addr) bool { return slices.Contains(bad, a.Unmap()) }) {
					srcs = append(srcs, fmt.Sprintf("DHCP on %s (%s)", nmDevice(d), d.Source))
				}
			}
		}
	}
	if nm.Live != nil && nm.Live.GlobalDNS != nil && len(srcs) == 0 {
		if slices.ContainsFunc(policy.NMStarServers(nm.Live.GlobalDNS), func(a netip.Addr) bool { return slices.Contains(bad, a) }) {
			srcs = append(srcs, "the global DNS it still runs with (its configuration files no longer list it: it needs a reload)")
		}
	}
	if len(srcs) == 0 && nm.Config != nil && nm.Config.GlobalDNS().Overrides() {
		srcs = append(srcs, "an older configuration (its files no longer list it: it needs a reload)")
	}
	if len(srcs) == 0 {
		return "NetworkManager writes it"
	}
	return "NetworkManager writes it, from " + strings.Join(srcs, " and ")
}

func nmDevice(d node.NMDevice) string {
	if d.IfName != "" {
		return d.IfName
	}
	return fmt.Sprintf("ifindex %d", d.IfIndex)
}

// nmResolvConfLoop is resolvconf.loop's answer when NetworkManager writes /etc/resolv.conf.
func nmResolvConfLoop(env *Env, bad []string, addrs []netip.Addr) Result {
	var loops []netip.Addr
	for _, a := range addrs {
		if env.Plan.Facts.IsLoop(a, false) {
			loops = append(loops, a.Unmap())
		}
	}
	return Result{Status: Problem, Message: fmt.Sprintf("/etc/resolv.conf lists %s: %s", strings.Join(bad, ", "), nmLoopSource(env, loops)), Hint: nmHint(env)}
}

// nmDHCPSearch is dhcp.search's part for NetworkManager: NM passes the DHCP search domains of a
// device on to /etc/resolv.conf at every lease unless its configuration has a global "*" domain
// (which zz-nodedns.conf sets) or the connection ignores automatic DNS; from 1.56 a global DNS
// without a "*" domain puts its own searches in their place (policy.NMSearchesReplaceDHCP).
func nmDHCPSearch(env *Env) (problems, hints []string) {
	s := env.Snapshot
	if !s.NMOwnsResolvConf() {
		return nil, nil
	}
	nm := &s.NetworkManager
	if nm.Config == nil {
		return []string{fmt.Sprintf("NetworkManager refuses its configuration (%v): nodedns cannot tell what it passes on", nm.ConfigErr)}, []string{nmHint(env)}
	}
	g := nm.Config.GlobalDNS()
	if g.Overrides() {
		return nil, nil
	}
	if policy.NMSearchesReplaceDHCP(nm, g) {
		// NM 1.56+ writes the global searches in place of DHCP's domains.
		var doms []string
		for _, dom := range g.Searches {
			if env.Plan.Facts.IsDHCPDomain(dom) && !slices.Contains(doms, domainText(dom)) {
				doms = append(doms, domainText(dom))
			}
		}
		if len(doms) > 0 {
			from := g.SearchesFrom.String()
			if g.Internal || from == "" {
				from = node.NMGlobalDNSSource(g)
			}
			return []string{fmt.Sprintf("NetworkManager's global DNS searches %s (%s), which NetworkManager %s writes in place of DHCP's domains", strings.Join(doms, ", "), from, nm.Live.Version)}, []string{nmHint(env)}
		}
		return nil, nil
	}
	for _, d := range nm.DHCPDevices() {
		var doms []string
		for _, dom := range append(d.DHCP4.Domains(), d.DHCP6.Domains()...) {
			if env.Plan.Facts.IsDHCPDomain(dom) && !slices.Contains(doms, dom) {
				doms = append(doms, dom)
			}
		}
		if len(doms) > 0 {
			for i, dom := range doms {
				doms[i] = domainText(dom)
			}
			problems = append(problems, fmt.Sprintf("NetworkManager passes %s from DHCP on %s (%s) on to /etc/resolv.conf (no global DNS override)", strings.Join(doms, ", "), nmDevice(d), d.Source))
		}
	}
	if len(problems) > 0 {
		hints = append(hints, nmHint(env))
	}
	return problems, hints
}

// nmBootPersistence is boot.persistence's part for NetworkManager: a loop-free global DNS that
// lives only in /run/NetworkManager/conf.d while a persistent file lists a loop address comes back
// after a reboot. zz-nodedns.conf lives in /etc: persistent.
func nmBootPersistence(env *Env) (problems, hints []string, note string) {
	s := env.Snapshot
	nm := &s.NetworkManager
	if !s.NMOwnsResolvConf() || nm.Config == nil || nm.Persistent == nil {
		return nil, nil, ""
	}
	loops := func(as []netip.Addr) []string { return loopAddrs(env, as, false) }
	now, boot := nm.Config.GlobalDNS(), nm.Persistent.GlobalDNS()
	if len(loops(policy.NMStarServers(now))) == 0 {
		if bad := loops(policy.NMStarServers(boot)); len(bad) > 0 {
			return []string{fmt.Sprintf("NetworkManager's loop-free global DNS lives only in %s: after a reboot it lists %s again (%s)", networkmanager.RunConfDir, strings.Join(bad, ", "), node.NMGlobalDNSSource(boot))},
				[]string{"put the fix into " + networkmanager.EtcConfDir + " (read after " + networkmanager.RunConfDir + ", and persistent)"}, ""
		}
	}
	if boot != nil {
		if d, ok := boot.Domain("*"); ok && d.ServersFrom.Path == networkmanager.NodeDNSConfPath {
			note = "NetworkManager's override " + networkmanager.NodeDNSConfPath + " is persistent"
		}
	}
	return nil, nil, note
}
