package probes

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/policy"
	"github.com/nodedns/nodedns/netplan"
)

type dhcpSearch struct{}

func (dhcpSearch) ID() string { return "dhcp.search" }

func (dhcpSearch) Run(ctx context.Context, env *Env) Result {
	r := dhcpSearchRun(ctx, env)
	if msg, hint := hostileOffers(env.Plan.Facts); msg != "" {
		if r.Hint != "" {
			hint += "; " + r.Hint
		}
		r = Result{Status: Problem, Message: msg + "; " + r.Message, Hint: hint}
	}
	return r
}

// hostileOffers names the DHCP domain values that are no domain name, each with the lease or link
// that holds it, quoted and escaped (docs/contract.md "The dhclient hook": nodedns's hook takes them
// as data and drops them, but a DHCP server that sends shell code is hostile, and other hooks on the
// node may not be as careful).
func hostileOffers(f policy.Facts) (msg, hint string) {
	if len(f.HostileDHCP) == 0 {
		return "", ""
	}
	var parts []string
	for _, h := range f.HostileDHCP {
		parts = append(parts, fmt.Sprintf("%s holds the domain %s", h.Source, strconv.Quote(h.Value)))
	}
	return "hostile DHCP offer: " + strings.Join(parts, ", ") + " (no domain name: nodedns never searches or runs it, but a dhclient hook that evaluates it runs it as root)",
		"find the DHCP server that sent it (dhcp-server-identifier in the lease) and take it off the network; audit the other dhclient hooks"
}

func dhcpSearchRun(_ context.Context, env *Env) Result {
	s := env.Snapshot
	f := env.Plan.Facts
	doms := f.SortedDHCPDomains()
	// A lease or netplan file nodedns could not read may hold DHCP domains it does not know about:
	// then "ok" would be a guess.
	var unread []string
	for _, p := range s.ProblemsFrom(node.SourceLease, node.SourceNetplan, node.SourceNetworkManager) {
		unread = append(unread, p.String())
	}
	// nodedns's own record of networkd's DHCP domains, not believed (another user could have
	// written it): the domains it would have bridged a lease gap with are unknown.
	for _, p := range s.ProblemsFrom(node.SourceManaged) {
		if p.Path == node.DHCPDomainsStatePath {
			unread = append(unread, p.String())
		}
	}
	if len(doms) == 0 {
		if len(unread) > 0 {
			return Result{Status: Unknown, Message: "no readable DHCP lease hands out a search domain, but some sources could not be read: " + strings.Join(unread, "; "), Hint: "fix or remove the unreadable files"}
		}
		return Result{Status: OK, Message: "no DHCP lease hands out a search domain"}
	}
	var problems, hints []string
	if s.DhclientConf && !bytes.Equal(s.DhclientHook.Data, policy.DhclientHook(f)) {
		state := "missing"
		if s.DhclientHook.Exists {
			state = "out of date"
		}
		problems = append(problems, "dhclient's enter hook "+node.DhclientHook+" is "+state)
		hints = append(hints, applyHint(env, policy.PendingSearch, "`nodedns apply` installs the dhclient hook", "install nodedns's dhclient hook", node.DhclientHook))
	}
	if s.Netplan != nil {
		for _, i := range s.Netplan.DHCPInterfaces() {
			if i.Renderer == "NetworkManager" {
				problems = append(problems, fmt.Sprintf("NetworkManager renders %s (netplan %s)", i.ID, strings.Join(i.Files, ", ")))
				hints = append(hints, fmt.Sprintf("nmcli connection modify <connection of %s> ipv4.ignore-auto-dns yes ipv6.ignore-auto-dns yes ipv4.dns %q", i.ID, upstreamList(f)))
				continue
			}
			var missing []string
			if i.DHCP4 && !overridesDomains(i.DHCP4Overrides) {
				missing = append(missing, "dhcp4-overrides")
			}
			if i.DHCP6 && !overridesDomains(i.DHCP6Overrides) {
				missing = append(missing, "dhcp6-overrides")
			}
			if len(missing) > 0 {
				problems = append(problems, fmt.Sprintf("netplan interface %s takes DHCP domains (no %s use-domains: false)", i.ID, strings.Join(missing, "/")))
				hints = append(hints, applyHint(env, policy.PendingSearch, "`nodedns apply` writes the override to /etc/netplan/90-nodedns.yaml (netplan.mode: override), then `netplan apply`", "set dhcp4-overrides/dhcp6-overrides use-domains: false in netplan (netplan.mode: override writes /etc/netplan/90-nodedns.yaml), then `netplan apply`", netplan.NodednsFile))
			}
		}
	}
	nmProblems, nmHints := nmDHCPSearch(env) // check_networkmanager.go
	problems, hints = append(problems, nmProblems...), append(hints, nmHints...)
	// Nodes with networkd but no netplan: nodedns's .network drop-in switches DHCP domains off.
	for _, n := range s.Networkd {
		if !bytes.Equal(n.DropIn.Data, policy.NetworkdDropIn(n)) {
			problems = append(problems, fmt.Sprintf("systemd-networkd's %s takes DHCP domains (no UseDomains=no drop-in)", n.Path))
			hints = append(hints, applyHint(env, policy.PendingSearch, "`nodedns apply` writes "+node.NetworkdDropIn(n.Path)+", then `networkctl reload`", "UseDomains=no in "+node.NetworkdDropIn(n.Path)+", then `networkctl reload`", node.NetworkdDropIn(n.Path)))
		}
	}
	if len(problems) > 0 {
		msg := fmt.Sprintf("DHCP hands out %s and will again on renewal: %s", strings.Join(doms, ", "), strings.Join(problems, "; "))
		if len(unread) > 0 {
			msg += "; and some sources could not be read: " + strings.Join(unread, "; ")
		}
		return Result{Status: Problem, Message: msg, Hint: strings.Join(uniq(hints), "; ")}
	}
	if len(unread) > 0 {
		return Result{Status: Unknown, Message: fmt.Sprintf("DHCP hands out %s; the known clients drop it, but some sources could not be read: %s", strings.Join(doms, ", "), strings.Join(unread, "; ")), Hint: "fix or remove the unreadable files"}
	}
	return Result{Status: OK, Message: fmt.Sprintf("DHCP hands out %s; every DHCP client drops it", strings.Join(doms, ", "))}
}

// overridesDomains: use-domains false, or route (routing-only domains are never searched).
func overridesDomains(o map[string]any) bool {
	return policy.DropsDomains(o)
}

func upstreamList(f policy.Facts) string {
	var out []string
	for _, a := range f.Upstreams {
		out = append(out, a.String())
	}
	return strings.Join(out, " ")
}
