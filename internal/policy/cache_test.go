package policy

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/kubelet"
	"github.com/nodedns/nodedns/internal/node"
)

func ips(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, a := range s {
		out[i] = netip.MustParseAddr(a)
	}
	return out
}

// TestCacheAddrs: docs/contract.md "Cache addresses", both families. An up nodelocaldns interface
// carries the kernel's fe80:: address (the false alarm of an AKS-style node), which is never a cache
// address; kubelet's clusterDNS names the cache when it is IPv4 link-local or in fd00::/8, and the
// cluster DNS service otherwise.
func TestCacheAddrs(t *testing.T) {
	tests := []struct {
		name              string
		cfg               []netip.Addr
		iface, kubelet    []netip.Addr
		wantCache, wantCD []netip.Addr
	}{
		{name: "nothing names one: kubespray's default", wantCache: ips("169.254.25.10")},
		{name: "dual-stack interface, up: its fe80:: is left out",
			iface:     ips("169.254.25.10", "fd00:25::10", "fe80::b4c2:11ff:fe3a:9d01"),
			wantCache: ips("169.254.25.10", "fd00:25::10")},
		{name: "only the kernel's fe80:: on the interface: the default",
			iface:     ips("fe80::1"),
			wantCache: ips("169.254.25.10")},
		{name: "kubelet's clusterDNS: link-local and fd00::/8 are the cache, the rest the cluster DNS",
			kubelet:   ips("169.254.25.10", "fd00:25::10", "10.233.0.3", "fd10:96::a", "fc00::53"),
			wantCache: ips("169.254.25.10", "fd00:25::10", "fd10:96::a"),
			wantCD:    ips("10.233.0.3", "fc00::53")},
		{name: "an IPv6-only node: kubelet's ULA cache, fe80:: on the interface",
			iface:     ips("fd00:25::10", "fe80::1"),
			kubelet:   ips("fd00:25::10"),
			wantCache: ips("fd00:25::10")},
		{name: "an IPv4-mapped address is its IPv4 address",
			kubelet:   ips("::ffff:169.254.20.10"),
			wantCache: ips("169.254.20.10")},
		{name: "config, interface and kubelet together, each once",
			cfg:       ips("fd00:25::10"),
			iface:     ips("169.254.25.10", "fd00:25::10", "fe80::1"),
			kubelet:   ips("169.254.25.10", "10.233.0.3"),
			wantCache: ips("fd00:25::10", "169.254.25.10"),
			wantCD:    ips("10.233.0.3")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.NodeLocalDNS.Addresses = tc.cfg
			s := &node.Snapshot{Now: now, CacheInterfaceAddrs: tc.iface, Kubelet: kubelet.Config{ClusterDNS: tc.kubelet}}
			f := Derive(s, cfg)
			if d := cmp.Diff(tc.wantCache, f.CacheAddrs, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); d != "" {
				t.Errorf("cache addresses (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantCD, f.ClusterDNS, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); d != "" {
				t.Errorf("cluster DNS (-want +got):\n%s", d)
			}
			// Every cache address and cluster DNS address is a loop address, IPv6 as IPv4; a
			// kernel-made fe80:: is not (a link-local IPv6 upstream is the LAN's business).
			for _, a := range append(append([]netip.Addr{}, f.CacheAddrs...), f.ClusterDNS...) {
				if !f.IsLoop(a, false) {
					t.Errorf("%s is not a loop address", a)
				}
			}
			for _, a := range tc.iface {
				if KernelMade(a) && f.IsLoop(a, false) {
					t.Errorf("the kernel's %s is a loop address", a)
				}
			}
		})
	}
}

// TestIPv6CacheIsALoopAddressInWhatNodednsWrites: an IPv6 cache address gets every rule an IPv4 one
// gets (docs/contract.md "Cache addresses"): kubelet's file and the dhclient hook keep it out.
func TestIPv6CacheIsALoopAddressInWhatNodednsWrites(t *testing.T) {
	cfg := config.Default()
	s := &node.Snapshot{Now: now, CacheInterfaceAddrs: ips("169.254.25.10", "fd00:25::10", "fe80::1")}
	s.ResolvConf = resolvFile(t, "/etc/resolv.conf", "nameserver fd00:25::10\nnameserver 169.254.25.10\nnameserver 2001:db8::53\n")
	p := Compute(s, cfg)
	if !slicesEqualAddrs(p.Facts.Upstreams, ips("2001:db8::53")) {
		t.Fatalf("upstreams %v, want only 2001:db8::53", p.Facts.Upstreams)
	}
	var kubelet string
	for _, c := range p.Changes {
		if c.Path == cfg.Kubelet.ResolvConf {
			kubelet = string(c.After)
		}
	}
	if kubelet == "" || strings.Contains(kubelet, "fd00:25::10") || !strings.Contains(kubelet, "nameserver 2001:db8::53") {
		t.Errorf("kubelet's resolv.conf:\n%s", kubelet)
	}
	hook := string(DhclientHook(p.Facts))
	if !strings.Contains(hook, " fd00:25::10 ") || strings.Contains(hook, "fe80") {
		t.Errorf("the dhclient hook's loop list must hold fd00:25::10 and no fe80:::\n%s", hook)
	}
}

func slicesEqualAddrs(a, b []netip.Addr) bool {
	return cmp.Equal(a, b, cmp.Comparer(func(x, y netip.Addr) bool { return x == y }))
}

func TestResolveCacheMode(t *testing.T) {
	tests := []struct {
		name    string
		mode    string
		addrs   []netip.Addr
		kubelet []netip.Addr
		iface   bool
		want    string
		why     string // in String()
	}{
		{name: "configured interface without one", mode: config.CacheInterface, want: config.CacheInterface, why: "cache mode interface (nodeLocalDNS.mode: interface)"},
		{name: "configured lrp with the interface present", mode: config.CacheLRP, iface: true, want: config.CacheLRP, why: "cache mode lrp (nodeLocalDNS.mode: lrp)"},
		{name: "configured none", mode: config.CacheNone, kubelet: ips("169.254.25.10"), want: config.CacheNone, why: "nodeLocalDNS.mode: none"},
		{name: "auto: the interface exists", mode: config.CacheAuto, iface: true, want: config.CacheInterface, why: "auto: interface nodelocaldns exists"},
		{name: "auto: config names an address", mode: config.CacheAuto, addrs: ips("fd00:25::10"), want: config.CacheInterface, why: "nodeLocalDNS.addresses names fd00:25::10"},
		{name: "auto: kubelet points at the cache (IPv6)", mode: config.CacheAuto, kubelet: ips("fd00:25::10"), want: config.CacheInterface, why: "kubelet's clusterDNS fd00:25::10 is a cache address"},
		{name: "auto: Cilium LocalRedirectPolicy", mode: config.CacheAuto, kubelet: ips("10.233.0.10"), want: config.CacheLRP,
			why: "cache mode lrp or none (auto: no nodelocaldns interface, no nodeLocalDNS.addresses, kubelet's clusterDNS 10.233.0.10 is the cluster DNS service)"},
		{name: "auto: nothing at all", mode: "", want: config.CacheLRP, why: "no cache address in kubelet's clusterDNS"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.NodeLocalDNS.Mode = tc.mode
			cfg.NodeLocalDNS.Addresses = tc.addrs
			m := ResolveCacheMode(cfg, &node.Snapshot{Kubelet: kubelet.Config{ClusterDNS: tc.kubelet}}, tc.iface)
			if m.Mode != tc.want || m.Interface() != (tc.want == config.CacheInterface) {
				t.Errorf("mode %q, want %q", m.Mode, tc.want)
			}
			if !strings.Contains(m.String(), tc.why) {
				t.Errorf("%q does not say %q", m.String(), tc.why)
			}
		})
	}
}
