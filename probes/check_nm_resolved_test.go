package probes

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/networkmanager"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/systemd"
)

// nmOverResolved is a snapshot of NetworkManager over resolved (DnsManager Mode systemd-resolved,
// /etc/resolv.conf resolved's stub) with NM's conf.d files and the DHCP offer NM pushed to link 2:
// 10.66.0.53 and search example.org.
func nmOverResolved(t *testing.T, files map[string]string, linkDNS ...netip.Addr) *node.Snapshot {
	t.Helper()
	root := t.TempDir()
	for p, data := range files {
		if err := writeNodeFile(root, p, data); err != nil {
			t.Fatal(err)
		}
	}
	fsys := networkmanager.ReaderFS(nodefs.NewReader(root))
	s := &node.Snapshot{Now: time.Now()}
	s.ResolvConf = resolvedStubResolv(t)
	s.Resolved, s.ResolvedOthers = &systemd.ResolvedConfig{}, &systemd.ResolvedConfig{}
	s.Links = []systemd.LinkState{{IfIndex: 2, IfName: "enp1s0", DNS: linkDNS, Domains: []systemd.Domain{{Name: "example.org"}}}}
	nm := &s.NetworkManager
	var err error
	if nm.Config, err = networkmanager.LoadConfig(fsys); err != nil {
		t.Fatal(err)
	}
	if nm.Others, err = networkmanager.LoadConfig(networkmanager.Overlay(fsys, map[string][]byte{networkmanager.NodeDNSConfPath: nil})); err != nil {
		t.Fatal(err)
	}
	nm.Devices = []node.NMDevice{{IfIndex: 2, IfName: "enp1s0", Source: "/run/NetworkManager/devices/2",
		DHCP4: networkmanager.DHCPDNS{Servers: addrs("10.66.0.53"), Search: []string{"example.org"}}}}
	nm.Live = &node.NMLive{Version: "1.42.4", DNSMode: "systemd-resolved", RcManager: "unmanaged"}
	return s
}

// TestResolvedChecksNMOverResolved: kubespray's dns.conf on NetworkManager over resolved is a
// resolved.dns problem naming the file and line even though resolved itself holds no loop address
// (NM hands it nothing while the "*" domain is set); with nodedns's override in place it is ok. A
// DHCP domain NM pushes is a resolved.domains problem whose hint names NetworkManager.
func TestResolvedChecksNMOverResolved(t *testing.T) {
	dnsConf := "[global-dns-domain-*]\nservers=169.254.25.10,10.66.0.53\n"
	files := map[string]string{"/etc/NetworkManager/conf.d/dns.conf": dnsConf}
	s := nmOverResolved(t, files)
	checkResult(t, resolvedDNS{}.Run(context.Background(), envFor(s, config.Default())), Problem,
		[]string{"NetworkManager's global DNS lists 169.254.25.10", "/etc/NetworkManager/conf.d/dns.conf:2", "no server"}, nil, nil)

	fixed := map[string]string{"/etc/NetworkManager/conf.d/dns.conf": dnsConf, networkmanager.NodeDNSConfPath: string(networkmanager.RenderResolvedOverride())}
	s = nmOverResolved(t, fixed, addrs("10.66.0.53")...)
	checkResult(t, resolvedDNS{}.Run(context.Background(), envFor(s, config.Default())), OK, nil, nil, nil)

	checkResult(t, resolvedDomains{}.Run(context.Background(), envFor(s, config.Default())), Problem,
		[]string{"link enp1s0 searches DHCP domain example.org"}, nil, []string{"NetworkManager pushes the link's DNS to systemd-resolved", "ipv4.ignore-auto-dns"})

	// Not NM's mode: the check is resolved's own as before.
	s = nmOverResolved(t, files)
	s.NetworkManager.Live.DNSMode = "default"
	checkResult(t, resolvedDNS{}.Run(context.Background(), envFor(s, config.Default())), OK, nil, nil, nil)
}
