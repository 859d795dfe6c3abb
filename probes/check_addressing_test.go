package probes

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/leases"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/netplan"
)

// TestAddressingStatic runs addressing.static over built snapshots: under netplan.mode pin the
// default-route interface must not be addressed by DHCP, and what addresses it is the node's
// configuration (netplan, else networkd), the lease only when neither names the interface.
func TestAddressingStatic(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	router := addrs("10.0.2.1")
	lease := func(ifname string) leases.Lease {
		return leases.Lease{Path: "/var/lib/dhcp/dhclient." + ifname + ".leases", Interface: ifname, Address: netip.MustParsePrefix("10.0.2.15/24"), Routers: router}
	}
	uplink := func(ifname string) *node.Uplink {
		return &node.Uplink{IfName: ifname, IfIndex: 2, Gateway: router[0], Addrs: []netip.Prefix{netip.MustParsePrefix("10.0.2.15/24")}}
	}
	iface := func(id string, dhcp4 bool) *netplan.Interface {
		return &netplan.Interface{ID: id, Type: "ethernets", Renderer: "networkd", DHCP4: dhcp4}
	}
	np := func(is ...*netplan.Interface) *netplan.Config { return &netplan.Config{Interfaces: is} }
	pinHint := []string{"run `nodedns netplan pin --dry-run`, then `nodedns netplan pin` (or `nodedns apply`)"}
	tests := []struct {
		name string
		mode string // config netplan.mode
		snap func(s *node.Snapshot)
		want Status
		msg  []string
		hint []string
	}{
		{
			name: "no netplan, no networkd: off", snap: func(s *node.Snapshot) { s.Uplink = uplink("eth0"); s.Leases = []leases.Lease{lease("eth0")} },
			want: OK, msg: []string{"netplan.mode is off: DHCP addressing is allowed"},
		},
		{
			name: "netplan DHCP interfaces default to override", snap: func(s *node.Snapshot) { s.Uplink = uplink("eth0"); s.Netplan = np(iface("eth0", true)) },
			want: OK, msg: []string{"netplan.mode is override: DHCP addressing is allowed"},
		},
		{
			name: "networkd DHCP networks default to override",
			snap: func(s *node.Snapshot) {
				s.Networkd = []node.NetworkdNetwork{{Path: "/etc/systemd/network/50-eth0.network", MatchNames: []string{"eth0"}, DHCP4: true}}
			},
			want: OK, msg: []string{"netplan.mode is override"},
		},
		{
			name: "pin: the uplink takes DHCP from netplan", mode: config.NetplanPin,
			snap: func(s *node.Snapshot) { s.Uplink = uplink("eth0"); s.Netplan = np(iface("eth0", true)) },
			want: Problem, msg: []string{"the default-route interface eth0 is addressed by DHCP and netplan.mode is pin"}, hint: pinHint,
		},
		{
			name: "pin: netplan matches the uplink by a glob", mode: config.NetplanPin,
			snap: func(s *node.Snapshot) {
				i := iface("id0", true)
				i.MatchName = "ens*"
				s.Uplink, s.Netplan = uplink("ens3"), np(i)
			},
			want: Problem, msg: []string{"the default-route interface ens3 is addressed by DHCP"},
		},
		{
			name: "pin: the uplink is static in netplan", mode: config.NetplanPin,
			snap: func(s *node.Snapshot) {
				i := iface("eth0", false)
				i.Addresses = []string{"10.0.2.15/24"}
				s.Uplink, s.Netplan = uplink("eth0"), np(i)
			},
			want: OK, msg: []string{"the default-route interface eth0 has static addressing"},
		},
		{
			// netplan decides for the interfaces it names: an old lease file does not count.
			name: "pin: netplan's static definition wins over a current lease", mode: config.NetplanPin,
			snap: func(s *node.Snapshot) {
				s.Uplink, s.Netplan, s.Leases = uplink("eth0"), np(iface("eth0", false)), []leases.Lease{lease("eth0")}
			},
			want: OK, msg: []string{"the default-route interface eth0 has static addressing"},
		},
		{
			name: "pin: networkd's DHCP network matches the uplink", mode: config.NetplanPin,
			snap: func(s *node.Snapshot) {
				s.Uplink = uplink("eth0")
				s.Netplan = np(iface("eth1", true))
				s.Networkd = []node.NetworkdNetwork{{Path: "/etc/systemd/network/10-en.network", MatchNames: []string{"eth*"}, DHCP4: true}}
			},
			want: Problem, msg: []string{"the default-route interface eth0 is addressed by DHCP"},
		},
		{
			name: "pin: only a lease names the uplink", mode: config.NetplanPin,
			snap: func(s *node.Snapshot) { s.Uplink, s.Leases = uplink("eth0"), []leases.Lease{lease("eth0")} },
			want: Problem, msg: []string{"the default-route interface eth0 is addressed by DHCP"},
		},
		{
			// Under --root there is no netlink: the uplinks are the interfaces whose current IPv4
			// lease carries a router.
			name: "pin under --root: the lease with a router is the uplink", mode: config.NetplanPin,
			snap: func(s *node.Snapshot) {
				noRouter := lease("eth1")
				noRouter.Routers = nil
				s.Leases = []leases.Lease{lease("eth0"), noRouter, lease("eth0")}
			},
			want: Problem, msg: []string{"the default-route interface eth0 is addressed by DHCP"},
		},
		{
			name: "pin under --root: an expired lease is no uplink", mode: config.NetplanPin,
			snap: func(s *node.Snapshot) {
				l := lease("eth0")
				l.Expire = now.Add(-time.Hour)
				s.Leases = []leases.Lease{l}
			},
			want: OK, msg: []string{"no default-route interface is addressed by DHCP"},
		},
		{
			name: "pin under --root: a DHCPv6 lease is no uplink", mode: config.NetplanPin,
			snap: func(s *node.Snapshot) {
				l := lease("eth0")
				l.V6 = true
				s.Leases = []leases.Lease{l}
			},
			want: OK, msg: []string{"no default-route interface is addressed by DHCP"},
		},
		{
			name: "pin: an uplink nothing configures and no lease names", mode: config.NetplanPin,
			snap: func(s *node.Snapshot) { s.Uplink = uplink("eth0"); s.Leases = []leases.Lease{lease("eth1")} },
			want: OK, msg: []string{"the default-route interface eth0 has static addressing"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &node.Snapshot{Now: now}
			tc.snap(s)
			cfg := config.Default()
			cfg.Netplan.Mode = tc.mode
			checkResult(t, addressingStatic{}.Run(context.Background(), envFor(s, cfg)), tc.want, tc.msg, nil, tc.hint)
		})
	}
}
