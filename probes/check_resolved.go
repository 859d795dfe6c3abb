package probes

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/nodedns/nodedns/internal/networkmanager"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/policy"
	"github.com/nodedns/nodedns/systemd"
)

type resolvedDNS struct{}

func (resolvedDNS) ID() string { return "resolved.dns" }

func (resolvedDNS) Run(_ context.Context, env *Env) Result {
	s := env.Snapshot
	if !s.ResolvedInUse() {
		return Result{Status: Skipped, Message: "systemd-resolved is not in use (/etc/resolv.conf is not its file and it left no runtime files)"}
	}
	if s.Resolved == nil {
		return Result{Status: Unknown, Message: "resolved.conf could not be read"}
	}
	var problems []string
	var global []netip.Addr
	for _, sv := range s.Resolved.DNS {
		global = append(global, sv.Addr)
	}
	if bad := loopAddrs(env, global, false); len(bad) > 0 {
		var src []string
		for _, d := range s.Resolved.DNSSources {
			src = append(src, fmt.Sprintf("%s:%d", d.Path, d.Line))
		}
		problems = append(problems, fmt.Sprintf("global DNS= lists %s (set in %s)", strings.Join(bad, ", "), strings.Join(src, ", ")))
	}
	if live := s.ResolvedLive; live != nil {
		// What resolved runs with, over D-Bus: differs from the files until resolved is restarted.
		var running []netip.Addr
		for _, sv := range live.DNS {
			running = append(running, sv.Addr)
		}
		if bad := loopAddrs(env, running, false); len(bad) > 0 && len(problems) == 0 {
			// Only when the files are clean: otherwise the line above already names the source.
			problems = append(problems, fmt.Sprintf("runs with global DNS %s (live over D-Bus; restart it to load its configuration)", strings.Join(bad, ", ")))
		}
	}
	for _, l := range s.Links {
		if bad := loopAddrs(env, l.DNS, false); len(bad) > 0 {
			problems = append(problems, fmt.Sprintf("link %s lists %s", linkName(l.IfName, l.IfIndex), strings.Join(bad, ", ")))
		}
	}
	if dl := delegateLoops(env); len(dl) > 0 {
		problems = append(problems, dl...)
	} else if live := s.ResolvedLive; live != nil {
		// The files are clean but resolved still runs with a delegate that lists a loop address: it
		// reads dns-delegate.d only at start.
		for _, d := range live.Delegates {
			var addrs []netip.Addr
			for _, sv := range d.DNS {
				addrs = append(addrs, sv.Addr)
			}
			if bad := loopAddrs(env, addrs, false); len(bad) > 0 {
				problems = append(problems, fmt.Sprintf("runs with DNS delegate %q listing %s (live over D-Bus; restart it to load its delegates)", d.ID, strings.Join(bad, ", ")))
			}
		}
	}
	if ps := env.Plan.PendingFor(policy.PendingDNS, systemd.ResolvedUnit); len(problems) == 0 && len(ps) > 0 {
		// Files only (--root, or no bus): its configuration is clean, its own resolv.conf is not.
		problems = append(problems, "runs with the configuration it started with: "+ps[0].Why)
	}
	if nmp := nmOverResolvedLoops(env); nmp != "" {
		// NetworkManager is the source of resolved's DNS: its global DNS is the thing to fix
		// (docs/contract.md "NetworkManager").
		msg := nmp
		if len(problems) > 0 {
			msg = "systemd-resolved " + strings.Join(problems, "; ") + "; " + nmp
		}
		return Result{Status: Problem, Message: msg, Hint: planHint(env, policy.PendingDNS, "drop the global DNS \"*\" domain from NetworkManager's conf.d", append(resolvedTargets(s), networkmanager.NodeDNSConfPath)...)}
	}
	if len(problems) > 0 {
		return Result{Status: Problem, Message: "systemd-resolved " + strings.Join(problems, "; "), Hint: planHint(env, policy.PendingDNS, "remove the loop address from resolved's configuration", resolvedTargets(s)...)}
	}
	var g []string
	for _, a := range global {
		g = append(g, a.String())
	}
	msg := "systemd-resolved's configured servers are loop-free"
	if len(g) > 0 {
		msg += " (global: " + strings.Join(g, " ") + ")"
	}
	if s.DNSDelegates != nil && len(s.DNSDelegates.Delegates) > 0 {
		var ds []string
		for _, d := range s.DNSDelegates.Delegates {
			var sv []string
			for _, x := range d.DNS {
				sv = append(sv, x.String())
			}
			if len(sv) == 0 {
				sv = []string{"no server"}
			}
			ds = append(ds, d.ID+": "+strings.Join(sv, " "))
		}
		msg += " (DNS delegates: " + strings.Join(ds, "; ") + ")"
	}
	if !env.Live {
		msg += "; read from files"
	} else if s.ResolvedLive != nil {
		msg += "; confirmed over D-Bus"
	}
	return Result{Status: OK, Message: msg}
}

// delegateLoops names each DNS delegate (systemd 258+) whose DNS= lists a loop address, with the
// file and line that set it (docs/contract.md "systemd-resolved 258 and later: DNS delegates").
func delegateLoops(env *Env) []string {
	s := env.Snapshot
	if s.DNSDelegates == nil {
		return nil
	}
	var out []string
	for _, d := range s.DNSDelegates.Delegates {
		var bad, where []string
		for i, sv := range d.DNS {
			l := loopAddrs(env, []netip.Addr{sv.Addr}, false)
			if len(l) == 0 {
				continue
			}
			bad = append(bad, l...)
			if w := d.DNSSources[i].String(); !slices.Contains(where, w) {
				where = append(where, w)
			}
		}
		if len(bad) > 0 {
			out = append(out, fmt.Sprintf("DNS delegate %q lists %s (DNS= at %s)", d.ID, strings.Join(bad, ", "), strings.Join(where, ", ")))
		}
	}
	return out
}

func linkName(name string, index int) string {
	if name != "" {
		return name
	}
	return fmt.Sprintf("ifindex %d", index)
}

type resolvedDomains struct{}

func (resolvedDomains) ID() string { return "resolved.domains" }

func (resolvedDomains) Run(_ context.Context, env *Env) Result {
	s := env.Snapshot
	if !s.ResolvedInUse() {
		return Result{Status: Skipped, Message: "systemd-resolved is not in use"}
	}
	var problems []string
	hint := planHint(env, policy.PendingSearch, "", resolvedTargets(s)...)
	for _, l := range s.Links {
		var bad []string
		for _, d := range l.Domains {
			if !d.RoutingOnly && env.Plan.Facts.IsDHCPDomain(d.Name) {
				bad = append(bad, domainText(d.Name))
			}
		}
		if len(bad) == 0 {
			continue
		}
		problems = append(problems, fmt.Sprintf("link %s searches DHCP domain %s", linkName(l.IfName, l.IfIndex), strings.Join(bad, ", ")))
		if l.NetworkdManaged && !env.Plan.Planned(resolvedTargets(s)...) && len(env.Plan.PendingFor(policy.PendingSearch, resolvedTargets(s)...)) == 0 {
			hint = "systemd-networkd manages the link: set dhcp4-overrides/dhcp6-overrides use-domains: false in netplan (netplan.mode: override), or UseDomains=no in a .network drop-in, then `networkctl reload`"
		}
		if _, ok := policy.NMResolvedDevice(s, l.IfIndex); ok {
			// NetworkManager rewrites the link at its next push: nodedns leaves it in resolved
			// (docs/contract.md "NetworkManager").
			hint = "NetworkManager pushes the link's DNS to systemd-resolved (dns=systemd-resolved) and puts the domain back at its next push: change the connection in NetworkManager (`nmcli connection modify CONNECTION ipv4.ignore-auto-dns yes ipv4.dns UPSTREAMS`; NetworkManager has no conf.d setting that drops only the DHCP domains it pushes to resolved, 1.58 included)"
		}
	}
	if len(problems) > 0 {
		return Result{Status: Problem, Message: strings.Join(problems, "; "), Hint: hint}
	}
	return Result{Status: OK, Message: "no DHCP search domain on any resolved link"}
}

// nmOverResolvedLoops says why NetworkManager, handing DNS to systemd-resolved, has a global DNS
// "*" domain listing a loop address, in its files or live over D-Bus ("" when it has none). NM 1.42
// hands resolved no server at all while that domain is set (networkmanager/FACTS.md).
func nmOverResolvedLoops(env *Env) string {
	s := env.Snapshot
	if !policy.NMPushesToResolved(s) {
		return ""
	}
	nm := &s.NetworkManager
	if nm.Config != nil {
		if g := nm.Config.GlobalDNS(); g.Overrides() {
			if bad := loopAddrs(env, policy.NMStarServers(g), false); len(bad) > 0 {
				return fmt.Sprintf("NetworkManager's global DNS lists %s, from %s: NetworkManager hands DNS to systemd-resolved (dns=systemd-resolved), and while that \"*\" domain is set it hands resolved no server of the links (NetworkManager 1.42 to 1.58)", strings.Join(bad, ", "), node.NMGlobalDNSSource(g))
			}
		}
	}
	if nm.Live != nil {
		if bad := loopAddrs(env, policy.NMStarServers(nm.Live.GlobalDNS), false); len(bad) > 0 {
			return fmt.Sprintf("NetworkManager runs with global DNS %s (live over D-Bus; it reads conf.d only on Reload or restart), handing DNS to systemd-resolved", strings.Join(bad, ", "))
		}
	}
	return ""
}
