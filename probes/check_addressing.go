package probes

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/policy"
)

type addressingStatic struct{}

func (addressingStatic) ID() string { return "addressing.static" }

// EffectiveNetplanMode is config netplan.mode, defaulting to override when netplan has DHCP interfaces
// (docs/contract.md) and off otherwise.
//
// It is policy.NetplanMode: a pin nodedns already wrote keeps the mode at pin.
func EffectiveNetplanMode(cfg config.Config, s *node.Snapshot) string {
	return policy.NetplanMode(cfg, s)
}

func (addressingStatic) Run(_ context.Context, env *Env) Result {
	mode := EffectiveNetplanMode(env.Config, env.Snapshot)
	if mode != config.NetplanPin {
		return Result{Status: OK, Message: fmt.Sprintf("netplan.mode is %s: DHCP addressing is allowed", mode)}
	}
	// The default-route interface: netlink's on the live node; under --root those whose current
	// lease carries a router. Whether DHCP addresses it is what the node's configuration says
	// (netplan, else networkd), the lease only when neither knows the interface.
	s := env.Snapshot
	var names []string
	if s.Uplink != nil && s.Uplink.IfName != "" {
		names = []string{s.Uplink.IfName}
	} else {
		for _, l := range s.Leases {
			if len(l.Routers) > 0 && !l.V6 && l.Current(s.Now) && l.Interface != "" && !slices.Contains(names, l.Interface) {
				names = append(names, l.Interface)
			}
		}
	}
	var dhcp []string
	for _, n := range names {
		if addressedByDHCP(s, n) {
			dhcp = append(dhcp, n)
		}
	}
	if len(dhcp) > 0 {
		return Result{Status: Problem, Message: fmt.Sprintf("the default-route interface %s is addressed by DHCP and netplan.mode is pin", strings.Join(dhcp, ", ")),
			Hint: "run `nodedns netplan pin --dry-run`, then `nodedns netplan pin` (or `nodedns apply`)"}
	}
	if len(names) == 0 {
		return Result{Status: OK, Message: "no default-route interface is addressed by DHCP"}
	}
	return Result{Status: OK, Message: fmt.Sprintf("the default-route interface %s has static addressing", strings.Join(names, ", "))}
}

// addressedByDHCP says whether the node's configuration gives ifname a DHCPv4 address: the merged
// netplan definition that matches it by name, else a networkd DHCP network matching it, else
// (nothing configures it by name) whether it holds a current lease.
func addressedByDHCP(s *node.Snapshot, ifname string) bool {
	if s.Netplan != nil {
		found, dhcp := false, false
		for _, i := range s.Netplan.Interfaces {
			if i.Matches(ifname) {
				found = true
				dhcp = dhcp || i.DHCP4
			}
		}
		if found {
			return dhcp
		}
	}
	for _, n := range s.Networkd {
		for _, m := range n.MatchNames {
			if ok, _ := path.Match(m, ifname); ok && n.DHCP4 {
				return true
			}
		}
	}
	for _, l := range s.Leases {
		if l.Interface == ifname && !l.V6 && l.Current(s.Now) {
			return true
		}
	}
	return false
}
