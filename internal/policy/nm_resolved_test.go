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
	if nm.Config, err = networkmanager.LoadConfig(nmFS(t, nil)); err != nil {
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
		c, err := networkmanager.LoadConfig(nmFS(t, map[string]string{networkmanager.MainConfPath: tc.main}))
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

// TestPlanNMOverResolvedOverride: kubespray's dns.conf on NetworkManager over resolved. NM 1.42
// hands resolved no server while the "*" domain is set (measured), so zz-nodedns.conf drops the
// domain and NM is reloaded; without a loop in the global DNS nothing is written, and an override
// nobody needs any more is removed.
func TestPlanNMOverResolvedOverride(t *testing.T) {
	withFiles := func(files map[string]string) *node.Snapshot {
		s := nmResolvedSnapshot(t, "systemd-resolved")
		s.Links[0].DNS = []netip.Addr{upstream53}
		nm := &s.NetworkManager
		fsys := nmFS(t, files)
		var err error
		if nm.Config, err = networkmanager.LoadConfig(fsys); err != nil {
			t.Fatal(err)
		}
		if nm.Others, err = networkmanager.LoadConfig(networkmanager.Overlay(fsys, map[string][]byte{networkmanager.NodeDNSConfPath: nil})); err != nil {
			t.Fatal(err)
		}
		if data, ok := files[networkmanager.NodeDNSConfPath]; ok {
			nm.Override = node.Managed{Path: networkmanager.NodeDNSConfPath, Exists: true, Data: []byte(data)}
		}
		return s
	}
	ours := string(networkmanager.RenderResolvedOverride())
	dnsConf := map[string]string{"/etc/NetworkManager/conf.d/dns.conf": kubesprayDNSConf}

	p := Compute(withFiles(dnsConf), config.Default())
	c := findChange(t, p, networkmanager.NodeDNSConfPath)
	if c == nil || c.Op != OpWrite || string(c.After) != ours {
		t.Fatalf("kubespray dns.conf: change %+v, want the resolved override", c)
	}
	for _, want := range []string{"169.254.25.10", "/etc/NetworkManager/conf.d/dns.conf:3", "no server"} {
		if !strings.Contains(c.Reason, want) {
			t.Errorf("reason %q lacks %q", c.Reason, want)
		}
	}
	if !p.HasAction(ReloadNetworkManager{}.Kind()) {
		t.Errorf("no reload planned: %v", p.Actions)
	}
	// The override makes NM's configuration have no "*" domain: what the reload must read back.
	cfg, err := networkmanager.LoadConfig(networkmanager.Overlay(nmFS(t, dnsConf), map[string][]byte{networkmanager.NodeDNSConfPath: []byte(ours)}))
	if err != nil {
		t.Fatal(err)
	}
	if g := cfg.GlobalDNS(); g.Overrides() {
		t.Errorf("with the override NM still has a \"*\" domain: %+v", g)
	}
	o, err := networkmanager.ParseOverride(networkmanager.NodeDNSConfPath, []byte(ours))
	if err != nil {
		t.Fatal(err)
	}
	if err := networkmanager.CheckOverride(cfg, o); err != nil {
		t.Errorf("CheckOverride refuses the resolved override: %v", err)
	}
	if err := networkmanager.CheckOverride(withFiles(dnsConf).NetworkManager.Config, o); err == nil {
		t.Errorf("CheckOverride accepts a configuration that still has kubespray's \"*\" domain")
	}

	// Applied: nothing more to do.
	applied := map[string]string{"/etc/NetworkManager/conf.d/dns.conf": kubesprayDNSConf, networkmanager.NodeDNSConfPath: ours}
	if p := Compute(withFiles(applied), config.Default()); p.planned(networkmanager.NodeDNSConfPath) {
		t.Errorf("applied: plan still touches %s: %+v %v", networkmanager.NodeDNSConfPath, p.Changes, p.Actions)
	}
	// No loop in NM's own global DNS: nothing written; a leftover override is removed.
	if p := Compute(withFiles(map[string]string{}), config.Default()); p.planned(networkmanager.NodeDNSConfPath) {
		t.Errorf("no global DNS: plan touches %s", networkmanager.NodeDNSConfPath)
	}
	p = Compute(withFiles(map[string]string{networkmanager.NodeDNSConfPath: ours}), config.Default())
	if c := findChange(t, p, networkmanager.NodeDNSConfPath); c == nil || c.Op != OpRemove {
		t.Errorf("leftover override: change %+v, want its removal", c)
	}
}

func findChange(t *testing.T, p Plan, path string) *Change {
	t.Helper()
	for i := range p.Changes {
		if p.Changes[i].Path == path {
			return &p.Changes[i]
		}
	}
	return nil
}
