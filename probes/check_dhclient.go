package probes

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/policy"
)

// kubesprayDhclient says where kubespray's dhclient.conf line comes from, for the hint of a check
// that names it (docs/contract.md, the dhclient.conf row of "What nodedns manages").
const kubesprayDhclient = "kubespray writes it (resolvconf_mode: host_resolvconf; it lists the cache and, unless disable_host_nameservers: true, the host's servers; upstream_dns_servers never reaches it)"

// dhclientLoopSources names the dhclient.conf supersede/prepend lines that list a loop address: the
// persistent source that brings the loop back into /etc/resolv.conf at every DHCP renewal.
func dhclientLoopSources(env *Env) []string {
	var out []string
	for _, o := range env.Plan.Facts.DHCPOffers {
		if o.Rule == nil || len(o.RuleLoops) == 0 {
			continue
		}
		var loops []string
		for _, a := range o.RuleLoops {
			loops = append(loops, a.String())
		}
		s := fmt.Sprintf("%s:%d (`%s domain-name-servers`, %s on %s)", o.Rule.Path, o.Rule.Line, o.Rule.Policy, strings.Join(loops, " "), o.Interface)
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// dhclientHookCurrent reports whether nodedns's enter hook is installed as the plan would write it.
func dhclientHookCurrent(env *Env) bool {
	s := env.Snapshot
	return s.DhclientHook.Exists && bytes.Equal(s.DhclientHook.Data, policy.DhclientHook(env.Plan.Facts))
}

// dhclientLoopNote completes resolvconf.loop about dhclient.conf: the persistent source of a loop
// in /etc/resolv.conf, or, while the file is clean, whether the next renewal brings it back. It
// returns the text to add to the message, and problem true when the next renewal would write a loop
// address back (no nodedns hook filters it).
func dhclientLoopNote(env *Env, loopNow bool) (note string, problem bool) {
	srcs := dhclientLoopSources(env)
	if len(srcs) == 0 {
		return "", false
	}
	line := strings.Join(srcs, ", ")
	switch {
	case loopNow:
		return "; persistent source: " + line + ": " + kubesprayDhclient, false
	case !dhclientHookCurrent(env):
		return fmt.Sprintf("; but %s, and no nodedns hook (%s) filters it: the next DHCP renewal writes the loop back (%s)", line, node.DhclientHook, kubesprayDhclient), true
	}
	return "; " + line + " stays (kubespray's): nodedns's dhclient hook keeps it out of every renewal", false
}

// offeredNote says where the DHCP source found servers a dhclient.conf supersede hides.
func offeredNote(f policy.Facts) string {
	var out []string
	for _, o := range f.DHCPOffers {
		if o.Used && o.Rule != nil {
			out = append(out, fmt.Sprintf("offered on %s behind %s:%d, read from %s", o.Interface, o.Rule.Path, o.Rule.Line, o.From))
		}
	}
	if len(out) == 0 {
		return ""
	}
	return ": " + strings.Join(out, "; ")
}
