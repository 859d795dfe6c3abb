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
	"github.com/nodedns/nodedns/systemd"
)

const kubesprayDropIn = "/etc/systemd/resolved.conf.d/kubespray.conf"

func servers(addrs ...string) []systemd.Server {
	var out []systemd.Server
	for _, a := range addrs {
		out = append(out, systemd.Server{Addr: netip.MustParseAddr(a), Raw: a})
	}
	return out
}

func addrs(as ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range as {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

// TestResolvedDNS runs resolved.dns over built snapshots: which of resolved's servers loop, where the
// check says they come from, and what it says when the files and the running resolved differ.
func TestResolvedDNS(t *testing.T) {
	tests := []struct {
		name string
		// snap fills a snapshot whose /etc/resolv.conf is resolved's stub.
		snap      func(s *node.Snapshot)
		cfg       func(c *config.Config)
		live      bool
		want      Status
		msg, not  []string
		hint      []string
		notInUse  bool // leave /etc/resolv.conf out: resolved is not in use
		runtimeOn bool // resolved in use through its runtime files only
	}{
		{
			name: "not in use", notInUse: true,
			snap: func(s *node.Snapshot) { s.Resolved = &systemd.ResolvedConfig{DNS: servers("169.254.25.10")} },
			want: Skipped, msg: []string{"systemd-resolved is not in use"},
		},
		{
			name: "in use through its runtime files, resolved.conf unreadable", notInUse: true, runtimeOn: true,
			snap: func(s *node.Snapshot) {},
			want: Unknown, msg: []string{"resolved.conf could not be read"},
		},
		{
			name: "kubespray's drop-in sets DNS= to the cache",
			snap: func(s *node.Snapshot) {
				s.Resolved = &systemd.ResolvedConfig{DNS: servers("169.254.25.10"), DNSSources: []systemd.Setting{{Path: kubesprayDropIn, Line: 2}}}
			},
			cfg:  func(c *config.Config) { c.Upstreams = []netip.Addr{netip.MustParseAddr("10.0.0.2")} },
			want: Problem,
			msg:  []string{"systemd-resolved global DNS= lists 169.254.25.10 (the node-local cache)", "(set in " + kubesprayDropIn + ":2)"},
			hint: []string{hintApply},
		},
		{
			// The plan cannot fix it (resolved would be left with no server): the hint says why,
			// never "run nodedns apply" (docs/contract.md "Check and plan agree").
			name: "kubespray's drop-in with no upstream known",
			snap: func(s *node.Snapshot) {
				s.Resolved = &systemd.ResolvedConfig{DNS: servers("169.254.25.10"), DNSSources: []systemd.Setting{{Path: kubesprayDropIn, Line: 2}}}
			},
			want: Problem,
			msg:  []string{"global DNS= lists 169.254.25.10"},
			hint: []string{"nodedns leaves /etc/systemd/resolved.conf.d/zz-nodedns.conf as it is", "set `upstreams`"},
		},
		{
			// --root after apply: the files are clean, resolved's own resolv.conf still lists the cache.
			name: "files clean, resolved's resolv.conf still lists the cache",
			snap: func(s *node.Snapshot) {
				s.Resolved = &systemd.ResolvedConfig{DNS: servers("10.0.0.2")}
				s.ResolvedResolv = readResolvForTest(t, "nameserver 169.254.25.10\nnameserver 10.0.0.2\n")
				s.ResolvedResolv.Path, s.ResolvedResolv.Target = node.ResolvedResolvConf, node.ResolvedResolvConf
			},
			want: Problem,
			msg:  []string{"runs with the configuration it started with", "still lists 169.254.25.10"},
			hint: []string{"pending", "systemctl restart systemd-resolved"},
		},
		{
			name: "the docs' cache address counts as the cache",
			snap: func(s *node.Snapshot) {
				s.Resolved = &systemd.ResolvedConfig{DNS: servers("10.0.0.2", "169.254.20.10"), DNSSources: []systemd.Setting{{Path: "/etc/systemd/resolved.conf", Line: 3}}}
			},
			want: Problem, msg: []string{"global DNS= lists 169.254.20.10 (the node-local cache)"}, not: []string{"10.0.0.2"},
		},
		{
			name: "a link lists the cluster DNS service",
			snap: func(s *node.Snapshot) {
				s.Resolved = &systemd.ResolvedConfig{}
				s.Links = []systemd.LinkState{{IfIndex: 2, IfName: "eth0", DNS: addrs("10.0.0.2", "10.233.0.3")}}
			},
			cfg:  func(c *config.Config) { c.ClusterDNS = addrs("10.233.0.3") },
			want: Problem, msg: []string{"systemd-resolved link eth0 lists 10.233.0.3 (the cluster DNS service)"},
		},
		{
			name: "a link without a name is named by its index",
			snap: func(s *node.Snapshot) {
				s.Resolved = &systemd.ResolvedConfig{}
				s.Links = []systemd.LinkState{{IfIndex: 5, DNS: addrs("169.254.25.10")}}
			},
			want: Problem, msg: []string{"link ifindex 5 lists 169.254.25.10"},
		},
		{
			name: "global and link loops are both named",
			snap: func(s *node.Snapshot) {
				s.Resolved = &systemd.ResolvedConfig{DNS: servers("169.254.25.10"), DNSSources: []systemd.Setting{{Path: kubesprayDropIn, Line: 2}}}
				s.Links = []systemd.LinkState{{IfIndex: 2, IfName: "eth0", DNS: addrs("169.254.25.10")}}
			},
			want: Problem, msg: []string{"global DNS= lists 169.254.25.10", "; link eth0 lists 169.254.25.10"},
		},
		{
			// The host's own libc may use resolved's stub; only cache and cluster addresses loop.
			name: "a loopback server is not a loop here",
			snap: func(s *node.Snapshot) { s.Resolved = &systemd.ResolvedConfig{DNS: servers("127.0.0.1")} },
			want: OK, msg: []string{"(global: 127.0.0.1)"},
		},
		{
			name: "clean files under --root",
			snap: func(s *node.Snapshot) { s.Resolved = &systemd.ResolvedConfig{DNS: servers("10.0.0.2", "10.0.0.3")} },
			want: OK, msg: []string{"systemd-resolved's configured servers are loop-free (global: 10.0.0.2 10.0.0.3); read from files"},
		},
		{
			name: "no global server",
			snap: func(s *node.Snapshot) { s.Resolved = &systemd.ResolvedConfig{} },
			want: OK, msg: []string{"systemd-resolved's configured servers are loop-free; read from files"}, not: []string{"global:"},
		},
		{
			name: "files clean, the running resolved still uses the cache", live: true,
			snap: func(s *node.Snapshot) {
				s.Resolved = &systemd.ResolvedConfig{DNS: servers("10.0.0.2")}
				s.ResolvedLive = &systemd.ResolvedState{DNS: []systemd.DNSServer{{Addr: netip.MustParseAddr("169.254.25.10")}}}
			},
			want: Problem, msg: []string{"systemd-resolved runs with global DNS 169.254.25.10 (the node-local cache) (live over D-Bus; restart it to load its configuration)"},
		},
		{
			// The files' line already names the source: the live view adds no second line.
			name: "files and the running resolved both loop", live: true,
			snap: func(s *node.Snapshot) {
				s.Resolved = &systemd.ResolvedConfig{DNS: servers("169.254.25.10"), DNSSources: []systemd.Setting{{Path: kubesprayDropIn, Line: 2}}}
				s.ResolvedLive = &systemd.ResolvedState{DNS: []systemd.DNSServer{{Addr: netip.MustParseAddr("169.254.25.10")}}}
			},
			want: Problem, msg: []string{"global DNS= lists 169.254.25.10"}, not: []string{"runs with"},
		},
		{
			name: "clean files confirmed over D-Bus", live: true,
			snap: func(s *node.Snapshot) {
				s.Resolved = &systemd.ResolvedConfig{DNS: servers("10.0.0.2")}
				s.ResolvedLive = &systemd.ResolvedState{DNS: []systemd.DNSServer{{Addr: netip.MustParseAddr("10.0.0.2")}}}
			},
			want: OK, msg: []string{"(global: 10.0.0.2); confirmed over D-Bus"}, not: []string{"read from files"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &node.Snapshot{Now: time.Now()}
			if !tc.notInUse {
				s.ResolvConf = resolvedStubResolv(t)
			}
			if tc.runtimeOn {
				s.ResolvedResolv = readResolvForTest(t, "nameserver 10.0.0.2\n")
				s.ResolvedResolv.Path, s.ResolvedResolv.Target = node.ResolvedResolvConf, node.ResolvedResolvConf
			}
			tc.snap(s)
			if s.ResolvedOthers == nil {
				s.ResolvedOthers = s.Resolved // as Observe reads it without a nodedns drop-in
			}
			cfg := config.Default()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			env := envFor(s, cfg)
			env.Live = tc.live
			checkResult(t, resolvedDNS{}.Run(context.Background(), env), tc.want, tc.msg, tc.not, tc.hint)
		})
	}
}

// TestResolvedDomains runs resolved.domains over built snapshots: a per-link search domain is a
// problem when some DHCP source handed it out, and the hint follows who manages the link.
func TestResolvedDomains(t *testing.T) {
	lease := func(ifname, domain string) leases.Lease {
		return leases.Lease{Path: "/var/lib/dhcp/dhclient." + ifname + ".leases", Client: leases.Dhclient, Interface: ifname, DomainName: domain}
	}
	eth0 := func(domains ...systemd.Domain) systemd.LinkState {
		return systemd.LinkState{IfIndex: 2, IfName: "eth0", Domains: domains, Source: "/run/systemd/resolve/netif/2"}
	}
	tests := []struct {
		name     string
		notInUse bool
		snap     func(s *node.Snapshot)
		want     Status
		msg      []string
		hint     []string
	}{
		{
			name: "not in use", notInUse: true,
			snap: func(s *node.Snapshot) {
				s.Leases = []leases.Lease{lease("eth0", "corp.example")}
				s.Links = []systemd.LinkState{eth0(systemd.Domain{Name: "corp.example"})}
			},
			want: Skipped, msg: []string{"systemd-resolved is not in use"},
		},
		{
			name: "a lease's domain searched on the link",
			snap: func(s *node.Snapshot) {
				s.Leases = []leases.Lease{lease("eth0", "corp.example")}
				s.Links = []systemd.LinkState{eth0(systemd.Domain{Name: "corp.example"})}
			},
			want: Problem, msg: []string{"link eth0 searches DHCP domain corp.example"}, hint: []string{hintApply},
		},
		{
			name: "networkd manages the link",
			snap: func(s *node.Snapshot) {
				s.Leases = []leases.Lease{lease("eth0", "corp.example")}
				l := eth0(systemd.Domain{Name: "corp.example"})
				l.NetworkdManaged = true
				s.Links = []systemd.LinkState{l}
			},
			want: Problem, msg: []string{"link eth0 searches DHCP domain corp.example"},
			hint: []string{"systemd-networkd manages the link", "use-domains: false", "UseDomains=no", "networkctl reload"},
		},
		{
			name: "a DHCP domain on another, unnamed link",
			snap: func(s *node.Snapshot) {
				s.Leases = []leases.Lease{lease("eth0", "corp.example")}
				s.Links = []systemd.LinkState{eth0(), {IfIndex: 4, Domains: []systemd.Domain{{Name: "Corp.Example."}}}}
			},
			want: Problem, msg: []string{"link ifindex 4 searches DHCP domain Corp.Example."},
		},
		{
			// A search domain on a link DHCP configures came from DHCP, lease file or not.
			name: "a search domain on a netplan DHCP link",
			snap: func(s *node.Snapshot) {
				s.Netplan = &netplan.Config{Interfaces: []*netplan.Interface{{ID: "eth0", Type: "ethernets", DHCP4: true}}}
				s.Links = []systemd.LinkState{eth0(systemd.Domain{Name: "lan"})}
			},
			want: Problem, msg: []string{"link eth0 searches DHCP domain lan"},
		},
		{
			name: "routing-only domains are never searched",
			snap: func(s *node.Snapshot) {
				s.Leases = []leases.Lease{lease("eth0", "corp.example")}
				s.Links = []systemd.LinkState{eth0(systemd.Domain{Name: "corp.example", RoutingOnly: true})}
			},
			want: OK, msg: []string{"no DHCP search domain on any resolved link"},
		},
		{
			name: "a static domain on a link DHCP does not configure",
			snap: func(s *node.Snapshot) {
				s.Leases = []leases.Lease{lease("eth0", "")}
				s.Links = []systemd.LinkState{eth0(), {IfIndex: 3, IfName: "wg0", Domains: []systemd.Domain{{Name: "vpn.example"}}}}
			},
			want: OK, msg: []string{"no DHCP search domain on any resolved link"},
		},
		{
			name: "the cluster domain on a DHCP link is not a DHCP domain",
			snap: func(s *node.Snapshot) {
				s.Leases = []leases.Lease{lease("eth0", "")}
				s.Links = []systemd.LinkState{eth0(systemd.Domain{Name: "cluster.local"})}
			},
			want: OK, msg: []string{"no DHCP search domain on any resolved link"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &node.Snapshot{Now: time.Now()}
			if !tc.notInUse {
				s.ResolvConf = resolvedStubResolv(t)
			}
			tc.snap(s)
			if s.ResolvedOthers == nil {
				s.ResolvedOthers = &systemd.ResolvedConfig{} // as Observe reads an empty resolved.conf
			}
			checkResult(t, resolvedDomains{}.Run(context.Background(), envFor(s, config.Default())), tc.want, tc.msg, nil, tc.hint)
		})
	}
}
