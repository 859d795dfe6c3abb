package policy

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/node"
)

// ulaCache is where the Kubernetes docs tell IPv6 clusters to put the node-local cache's address:
// fd00::/8, the locally assigned half of the unique local range (docs/contract.md "Cache addresses").
var ulaCache = netip.MustParsePrefix("fd00::/8")

// KernelMade reports an address the kernel gives an interface by itself: IPv6 link-local
// (fe80::/10), which every interface gets once it is up (a bridge within a second, after DAD).
// node-cache listens only on the addresses it was given, so such an address is never a cache address
// (docs/contract.md "Cache addresses"), whichever source names it.
func KernelMade(a netip.Addr) bool {
	a = a.WithZone("").Unmap()
	return a.Is6() && a.IsLinkLocalUnicast()
}

// KubeletNamesCache reports whether an entry of kubelet's clusterDNS is the node-local cache rather
// than the cluster DNS service: an IPv4 link-local address (kubespray's 169.254.25.10) or one in
// fd00::/8 (docs/contract.md "Cache addresses").
func KubeletNamesCache(a netip.Addr) bool {
	a = a.WithZone("").Unmap()
	return a.Is4() && a.IsLinkLocalUnicast() || ulaCache.Contains(a)
}

// CacheMode is how the node-local cache runs on this node (docs/contract.md "Cache mode"): Mode is
// config.CacheInterface, config.CacheLRP or config.CacheNone, never auto; Why says how it was
// chosen, for messages ("nodeLocalDNS.mode: lrp", "auto: interface nodelocaldns exists").
type CacheMode struct {
	Mode string
	Why  string
	// Auto is set when nodeLocalDNS.mode is auto: a node without the interface is then lrp or none
	// alike (the checks are the same), and messages say so.
	Auto bool
}

// Interface reports whether the cache runs as node-cache does on kubespray nodes: host network, its
// interface, local routes and NOTRACK rules, which the interface, routes and iptables checks judge.
func (m CacheMode) Interface() bool { return m.Mode == config.CacheInterface }

func (m CacheMode) String() string {
	mode := m.Mode
	if m.Auto && !m.Interface() {
		mode = config.CacheLRP + " or " + config.CacheNone
	}
	return "cache mode " + mode + " (" + m.Why + ")"
}

// ResolveCacheMode picks the cache mode: the configured one, or for auto, interface when the cache
// interface exists (iface: the live node says so), config names cache addresses or kubelet's
// clusterDNS names the cache; else lrp, which checks the same way as none.
func ResolveCacheMode(cfg config.Config, s *node.Snapshot, iface bool) CacheMode {
	mode := cfg.NodeLocalDNS.Mode
	if mode != "" && mode != config.CacheAuto {
		return CacheMode{Mode: mode, Why: "nodeLocalDNS.mode: " + mode}
	}
	name := cfg.NodeLocalDNS.Interface
	switch {
	case iface:
		return CacheMode{Mode: config.CacheInterface, Why: "auto: interface " + name + " exists", Auto: true}
	case len(cfg.NodeLocalDNS.Addresses) > 0:
		return CacheMode{Mode: config.CacheInterface, Why: "auto: nodeLocalDNS.addresses names " + addrText(cfg.NodeLocalDNS.Addresses), Auto: true}
	}
	var kubelet, cache []netip.Addr
	if s != nil {
		kubelet = s.Kubelet.ClusterDNS
	}
	for _, a := range kubelet {
		if KubeletNamesCache(a) {
			cache = append(cache, a)
		}
	}
	if len(cache) > 0 {
		return CacheMode{Mode: config.CacheInterface, Why: "auto: kubelet's clusterDNS " + addrText(cache) + " is a cache address", Auto: true}
	}
	why := fmt.Sprintf("auto: no %s interface, no nodeLocalDNS.addresses", name)
	if len(kubelet) > 0 {
		why += ", kubelet's clusterDNS " + addrText(kubelet) + " is the cluster DNS service"
	} else {
		why += ", no cache address in kubelet's clusterDNS"
	}
	return CacheMode{Mode: config.CacheLRP, Why: why, Auto: true}
}

func addrText(as []netip.Addr) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, ", ")
}
