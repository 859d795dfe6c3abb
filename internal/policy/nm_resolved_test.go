package policy

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/networkmanager"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/systemd"
)

// nmResolvedSnapshot is Ubuntu's NetworkManager-over-resolved node: /etc/resolv.conf is resolved's
// stub, NM (DnsManager Mode mode) pushed enp1s0's DHCP server 10.66.0.53 and search domain
// example.org to resolved's link 2 (as measured on NM 1.42.4 with resolved 252).
func nmResolvedSnapshot(t *testing.T, mode string) *node.Snapshot {
	t.Helper()
	s := &node.Snapshot{Now: now}
	s.ResolvConf = resolvFile(t, node.EtcResolvConf, "nameserver 127.0.0.53\noptions edns0 trust-ad\nsearch example.org\n")
	s.ResolvConf.Symlink, s.ResolvConf.Target = true, "/run/systemd/resolve/stub-resolv.conf"
	s.Resolved, s.ResolvedOthers = &systemd.ResolvedConfig{}, &systemd.ResolvedConfig{}
	s.Links = []systemd.LinkState{{IfIndex: 2, IfName: "enp1s0", DNS: []netip.Addr{upstream53, KubesprayCache},
		Domains: []systemd.Domain{{Name: "example.org"}}}}
	nm := &s.NetworkManager
	var err error
	if nm.Config, err = networkmanager.LoadConfig(networkmanager.MapFS{}); err != nil {
		t.Fatal(err)
	}
	nm.Others = nm.Config
	nm.Devices = []node.NMDevice{{IfIndex: 2, IfName: "enp1s0", Source: "/run/NetworkManager/devices/2",
		DHCP4: networkmanager.DHCPDNS{Servers: []netip.Addr{upstream53, KubesprayCache}, Search: []string{"example.org"}}}}
	nm.Live = &node.NMLive{Version: "1.42.4", DNSMode: mode, RcManager: "unmanaged"}
	return s
}

// TestPlanNMOverResolvedLeavesLinks: on a link NetworkManager pushes to resolved, nodedns sets
// nothing in resolved (NM would write it back at its next push: an NM restart did, measured) and
// says why in a note; on a link nobody pushes to, SetLinkDNS and SetLinkDomains stay the fix.
func TestPlanNMOverResolvedLeavesLinks(t *testing.T) {
	p := Compute(nmResolvedSnapshot(t, "systemd-resolved"), config.Default())
	for _, a := range p.Actions {
		if a.Kind() == (SetLinkDNS{}).Kind() || a.Kind() == (SetLinkDomains{}).Kind() {
			t.Errorf("planned %s %s on a link NetworkManager pushes to resolved", a.Kind(), a.Target())
		}
	}
	note := ""
	for _, n := range p.Notes {
		if strings.Contains(n, "link enp1s0 gets its DNS from NetworkManager") {
			note = n
		}
	}
	for _, want := range []string{"169.254.25.10", "example.org", "/run/NetworkManager/devices/2", "ipv4.ignore-auto-dns"} {
		if !strings.Contains(note, want) {
			t.Errorf("note about enp1s0 lacks %q: %q (notes %q)", want, note, p.Notes)
		}
	}

	// NetworkManager writing resolv.conf itself (dns=default) pushes nothing to resolved: the link's
	// values are resolved's own, and nodedns sets them as before.
	p = Compute(nmResolvedSnapshot(t, "default"), config.Default())
	var kinds []string
	for _, a := range p.Actions {
		kinds = append(kinds, a.Kind())
	}
	if !strings.Contains(strings.Join(kinds, " "), "set-link-dns") || !strings.Contains(strings.Join(kinds, " "), "set-link-domains") {
		t.Errorf("dns=default: actions %v, want set-link-dns and set-link-domains", kinds)
	}
}

// TestNMPushesToResolvedFromFiles: under --root (no bus) NetworkManager's [main] dns= tells, and an
// unset dns= counts when /etc/resolv.conf is resolved's stub.
func TestNMPushesToResolvedFromFiles(t *testing.T) {
	for _, tc := range []struct {
		main string
		stub bool
		want bool
	}{
		{"[main]\ndns=systemd-resolved\n", false, true},
		{"", true, true},
		{"", false, false},
		{"[main]\ndns=default\n", true, false},
	} {
		s := nmResolvedSnapshot(t, "")
		s.NetworkManager.Live = nil
		c, err := networkmanager.LoadConfig(networkmanager.MapFS{networkmanager.MainConfPath: tc.main})
		if err != nil {
			t.Fatal(err)
		}
		s.NetworkManager.Config = c
		if !tc.stub {
			s.ResolvConf = resolvFile(t, node.EtcResolvConf, "nameserver 10.66.0.53\n")
		}
		if got := NMPushesToResolved(s); got != tc.want {
			t.Errorf("dns=%q stub=%v: NMPushesToResolved = %v, want %v", tc.main, tc.stub, got, tc.want)
		}
	}
}
