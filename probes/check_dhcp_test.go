package probes

import (
	"context"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/leases"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/policy"
	"github.com/nodedns/nodedns/netplan"
)

// TestDHCPSearch runs dhcp.search over built snapshots: a DHCP domain is a problem until every DHCP
// client on the node drops it (dhclient's hook, netplan's overrides, networkd's drop-in), and an
// unreadable lease or netplan file turns "ok" into unknown.
func TestDHCPSearch(t *testing.T) {
	const leasePath = "/var/lib/dhcp/dhclient.eth0.leases"
	corp := leases.Lease{Path: leasePath, Client: leases.Dhclient, Interface: "eth0", DomainName: "corp.example", DNS: addrs("10.0.0.2")}
	eth0 := func(mod func(i *netplan.Interface)) *netplan.Config {
		i := &netplan.Interface{ID: "eth0", Type: "ethernets", Renderer: "networkd", DHCP4: true, Files: []string{"/etc/netplan/50-cloud-init.yaml"}}
		if mod != nil {
			mod(i)
		}
		return &netplan.Config{Files: i.Files, Interfaces: []*netplan.Interface{i}}
	}
	dropDomains := map[string]any{"use-domains": "false"}
	network := node.NetworkdNetwork{Path: "/etc/systemd/network/50-eth0.network", MatchNames: []string{"eth0"}, DHCP4: true}
	tests := []struct {
		name string
		snap func(s *node.Snapshot)
		want Status
		msg  []string
		hint []string
	}{
		{
			name: "no DHCP domain",
			snap: func(s *node.Snapshot) { s.Leases = []leases.Lease{{Path: leasePath, Interface: "eth0"}} },
			want: OK, msg: []string{"no DHCP lease hands out a search domain"},
		},
		{
			name: "no DHCP domain, but a lease file could not be read",
			snap: func(s *node.Snapshot) {
				s.Problems = []node.Problem{{Source: node.SourceLease, Path: "/var/lib/dhcp/dhclient.eth1.leases", Line: 3, Msg: "bad lease"}}
			},
			want: Unknown,
			msg:  []string{"no readable DHCP lease hands out a search domain, but some sources could not be read: /var/lib/dhcp/dhclient.eth1.leases:3: bad lease"},
			hint: []string{"fix or remove the unreadable files"},
		},
		{
			// A netplan problem is known by its source, whatever its message says.
			name: "no DHCP domain, but netplan could not be read",
			snap: func(s *node.Snapshot) {
				s.Problems = []node.Problem{{Source: node.SourceNetplan, Msg: "/etc/netplan/50-cloud-init.yaml:6: found a tab character"}}
			},
			want: Unknown, msg: []string{"some sources could not be read: /etc/netplan/50-cloud-init.yaml:6: found a tab character"},
		},
		{
			name: "an unreadable file that holds no DHCP domains does not count",
			snap: func(s *node.Snapshot) {
				s.Problems = []node.Problem{{Path: "/etc/systemd/resolved.conf", Line: 4, Msg: "unknown key"}}
			},
			want: OK, msg: []string{"no DHCP lease hands out a search domain"},
		},
		{
			name: "dhclient without nodedns's hook",
			snap: func(s *node.Snapshot) {
				s.Leases = []leases.Lease{corp}
				s.DhclientConf = true
			},
			want: Problem,
			msg:  []string{"DHCP hands out corp.example and will again on renewal: dhclient's enter hook " + node.DhclientHook + " is missing"},
			hint: []string{"`nodedns apply` installs the dhclient hook"},
		},
		{
			name: "dhclient with an old hook",
			snap: func(s *node.Snapshot) {
				s.Leases = []leases.Lease{corp}
				s.DhclientConf = true
				s.DhclientHook = node.Managed{Path: node.DhclientHook, Exists: true, Data: []byte("#!/bin/sh\n")}
			},
			want: Problem, msg: []string{"dhclient's enter hook " + node.DhclientHook + " is out of date"},
		},
		{
			name: "dhclient with the current hook",
			snap: func(s *node.Snapshot) {
				s.Leases = []leases.Lease{corp}
				s.DhclientConf = true
				s.DhclientHook = node.Managed{Path: node.DhclientHook, Exists: true, Data: policy.DhclientHook(policy.Derive(s, config.Default()))}
			},
			want: OK, msg: []string{"DHCP hands out corp.example; every DHCP client drops it"},
		},
		{
			// A rogue server's domain name as dhclient writes it to its lease: named, quoted and
			// escaped, never taken for a search domain, a problem even with the current hook.
			name: "a hostile domain name in the lease",
			snap: func(s *node.Snapshot) {
				s.Leases = []leases.Lease{corp, {Path: "/var/lib/dhcp/dhclient.eth1.leases", Interface: "eth1", DomainName: "x.example$(echo>pwned)\n`id`",
					SearchDomains: []string{"ok.example.", "a'b."}}}
				s.DhclientConf = true
				s.DhclientHook = node.Managed{Path: node.DhclientHook, Exists: true, Data: policy.DhclientHook(policy.Derive(s, config.Default()))}
			},
			want: Problem,
			msg: []string{"hostile DHCP offer: /var/lib/dhcp/dhclient.eth1.leases holds the domain \"x.example$(echo>pwned)\\n`id`\", /var/lib/dhcp/dhclient.eth1.leases holds the domain \"a'b.\" (no domain name",
				"; DHCP hands out corp.example, ok.example; every DHCP client drops it"},
			hint: []string{"find the DHCP server that sent it"},
		},
		{
			name: "a hostile domain name and nothing else",
			snap: func(s *node.Snapshot) {
				s.Leases = []leases.Lease{{Path: leasePath, Interface: "eth0", SearchDomains: []string{"x\ny"}}}
			},
			want: Problem, msg: []string{"hostile DHCP offer: " + leasePath + " holds the domain \"x\\ny\"", "; no DHCP lease hands out a search domain"},
		},
		{
			name: "a lease without dhclient.conf needs no hook",
			snap: func(s *node.Snapshot) { s.Leases = []leases.Lease{corp} },
			want: OK, msg: []string{"DHCP hands out corp.example; every DHCP client drops it"},
		},
		{
			name: "netplan takes DHCPv4 and DHCPv6 domains",
			snap: func(s *node.Snapshot) {
				s.Leases = []leases.Lease{corp}
				s.Netplan = eth0(func(i *netplan.Interface) { i.DHCP6 = true })
			},
			want: Problem,
			msg:  []string{"netplan interface eth0 takes DHCP domains (no dhcp4-overrides/dhcp6-overrides use-domains: false)"},
			hint: []string{"`nodedns apply` writes the override to /etc/netplan/90-nodedns.yaml (netplan.mode: override), then `netplan apply`"},
		},
		{
			name: "netplan overrides DHCPv4 but takes DHCPv6 domains",
			snap: func(s *node.Snapshot) {
				s.Leases = []leases.Lease{corp}
				s.Netplan = eth0(func(i *netplan.Interface) { i.DHCP6, i.DHCP4Overrides = true, dropDomains })
			},
			want: Problem, msg: []string{"netplan interface eth0 takes DHCP domains (no dhcp6-overrides use-domains: false)"},
		},
		{
			name: "netplan routes the domains only",
			snap: func(s *node.Snapshot) {
				s.Leases = []leases.Lease{corp}
				s.Netplan = eth0(func(i *netplan.Interface) { i.DHCP4Overrides = map[string]any{"use-domains": "route"} })
			},
			want: OK, msg: []string{"every DHCP client drops it"},
		},
		{
			name: "NetworkManager renders the netplan interface",
			snap: func(s *node.Snapshot) {
				s.Leases = []leases.Lease{corp}
				s.Netplan = eth0(func(i *netplan.Interface) { i.Renderer = "NetworkManager" })
			},
			want: Problem,
			msg:  []string{"NetworkManager renders eth0 (netplan /etc/netplan/50-cloud-init.yaml)"},
			hint: []string{`nmcli connection modify <connection of eth0> ipv4.ignore-auto-dns yes ipv6.ignore-auto-dns yes ipv4.dns "10.0.0.2"`},
		},
		{
			name: "networkd without nodedns's drop-in",
			snap: func(s *node.Snapshot) {
				s.Leases = []leases.Lease{corp}
				s.Networkd = []node.NetworkdNetwork{network}
			},
			want: Problem,
			msg:  []string{"systemd-networkd's /etc/systemd/network/50-eth0.network takes DHCP domains (no UseDomains=no drop-in)"},
			hint: []string{"`nodedns apply` writes /etc/systemd/network/50-eth0.network.d/nodedns.conf, then `networkctl reload`"},
		},
		{
			name: "networkd with nodedns's drop-in",
			snap: func(s *node.Snapshot) {
				s.Leases = []leases.Lease{corp}
				n := network
				n.DropIn = node.Managed{Path: node.NetworkdDropIn(n.Path), Exists: true, Data: policy.NetworkdDropIn(n)}
				s.Networkd = []node.NetworkdNetwork{n}
			},
			want: OK, msg: []string{"every DHCP client drops it"},
		},
		{
			name: "every problem is listed, each hint once",
			snap: func(s *node.Snapshot) {
				s.Leases = []leases.Lease{corp, {Path: "/var/lib/dhcp/dhclient.eth1.leases", Interface: "eth1", DomainName: "lab.example"}}
				s.DhclientConf = true
				s.Networkd = []node.NetworkdNetwork{network, {Path: "/etc/systemd/network/60-eth1.network", MatchNames: []string{"eth1"}, DHCP4: true}}
			},
			want: Problem,
			msg:  []string{"DHCP hands out corp.example, lab.example", "is missing; systemd-networkd's /etc/systemd/network/50-eth0.network", "; systemd-networkd's /etc/systemd/network/60-eth1.network"},
			hint: []string{"installs the dhclient hook; `nodedns apply` writes /etc/systemd/network/50-eth0.network.d/nodedns.conf, then `networkctl reload`; `nodedns apply` writes /etc/systemd/network/60-eth1.network.d/nodedns.conf"},
		},
		{
			name: "the known clients drop the domain, but a lease file could not be read",
			snap: func(s *node.Snapshot) {
				s.Leases = []leases.Lease{corp}
				s.Problems = []node.Problem{{Source: node.SourceLease, Path: "/run/systemd/netif/leases/3", Msg: "cannot read"}}
			},
			want: Unknown,
			msg:  []string{"DHCP hands out corp.example; the known clients drop it, but some sources could not be read: /run/systemd/netif/leases/3: cannot read"},
			hint: []string{"fix or remove the unreadable files"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &node.Snapshot{Now: time.Now()}
			tc.snap(s)
			checkResult(t, dhcpSearch{}.Run(context.Background(), envFor(s, config.Default())), tc.want, tc.msg, nil, tc.hint)
		})
	}
}
