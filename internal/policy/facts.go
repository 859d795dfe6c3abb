// Package policy decides what a node's DNS setup should be. It is pure: from a node.Snapshot and the
// config it derives Facts (the cache, loop and upstream addresses, the DHCP search domains) and a Plan
// (the file changes, the pending actions, what is blocked and why). Nothing here reads or writes the
// node, so every rule of docs/contract.md is a table test away.
package policy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/resolvconf"
	"github.com/nodedns/nodedns/systemd"
)

// Well-known NodeLocal DNSCache listen addresses: kubespray's default and the Kubernetes docs' one.
var (
	KubesprayCache = config.KubesprayCache
	DocsCache      = config.DocsCache
)

// Facts is what the snapshot and the config say about the node, before any decision.
type Facts struct {
	// CacheAddrs are the node-local cache's listen addresses on this node.
	CacheAddrs []netip.Addr
	// ClusterDNS are the CoreDNS service addresses.
	ClusterDNS []netip.Addr
	// ClusterDomain is the cluster's DNS domain (canonical).
	ClusterDomain string
	// DHCPDomains are the search domains some DHCP lease handed out (canonical), with where each was seen.
	DHCPDomains map[string][]string
	// Upstreams are the real resolvers the node should use (at most 3), from UpstreamSource.
	Upstreams      []netip.Addr
	UpstreamSource string
	// DHCPLinks are interface names (and "#IFINDEX" for unnamed ones) that DHCP configures.
	DHCPLinks map[string]bool
	// RouteClusterDomainToCache is config host.routeClusterDomainToCache: the cluster search domains
	// may stay on the host's search list (docs/contract.md "Cluster search domains on the host").
	RouteClusterDomainToCache bool
	// HostileDHCP are the domain values some DHCP source handed out that are no domain name
	// (resolvconf.ValidDomain): shell code, quotes, spaces. They are kept out of DHCPDomains (and so
	// out of every message that lists those) and named by check as hostile offers; IsDHCPDomain
	// still matches them, so nodedns drops them from every search list it edits.
	HostileDHCP []HostileOffer
	// DHCPOffers are the dhclient interfaces whose dhclient.conf changes the servers DHCP offers,
	// with what DHCP really offered there (offered.go).
	DHCPOffers []DHCPOffer
}

// Derive computes the Facts.
func Derive(s *node.Snapshot, cfg config.Config) Facts {
	f := Facts{DHCPDomains: map[string][]string{}, DHCPLinks: map[string]bool{}, RouteClusterDomainToCache: cfg.Host.RouteClusterDomainToCache}

	f.ClusterDomain = resolvconf.CanonicalDomain(cfg.ClusterDomain)
	if f.ClusterDomain == "" {
		f.ClusterDomain = resolvconf.CanonicalDomain(s.Kubelet.ClusterDomain)
	}
	if f.ClusterDomain == "" {
		f.ClusterDomain = "cluster.local"
	}

	// Cache addresses: config, then the interface's (live, added by the live layer into the snapshot),
	// then kubelet's clusterDNS when link-local or in fd00::/8 (kubespray points kubelet at the
	// cache). Never an address the kernel made by itself (an up interface's fe80::).
	f.CacheAddrs = appendNew(f.CacheAddrs, cfg.NodeLocalDNS.Addresses...)
	f.CacheAddrs = appendNew(f.CacheAddrs, s.CacheInterfaceAddrs...)
	f.CacheAddrs = slices.DeleteFunc(f.CacheAddrs, KernelMade)
	for _, a := range s.Kubelet.ClusterDNS {
		if KubeletNamesCache(a) {
			f.CacheAddrs = appendNew(f.CacheAddrs, a)
		} else {
			// A routable clusterDNS in kubelet's config is the CoreDNS service (no node-local cache, or
			// before kubespray switched kubelet over): as much a loop address as config clusterDNS.
			f.ClusterDNS = appendNew(f.ClusterDNS, a)
		}
	}
	if len(f.CacheAddrs) == 0 {
		f.CacheAddrs = []netip.Addr{KubesprayCache}
	}
	f.ClusterDNS = appendNew(f.ClusterDNS, cfg.ClusterDNS...)

	// DHCP links: every lease's interface, and netplan's DHCP interfaces.
	for _, l := range s.Leases {
		if l.Interface != "" {
			f.DHCPLinks[l.Interface] = true
		} else if l.IfIndex > 0 {
			f.DHCPLinks[fmt.Sprintf("#%d", l.IfIndex)] = true
		}
	}
	if s.Netplan != nil {
		for _, i := range s.Netplan.DHCPInterfaces() {
			f.DHCPLinks[i.ID] = true
			if i.SetName != "" {
				f.DHCPLinks[i.SetName] = true
			}
		}
	}

	f.addNetworkManager(s) // its devices' DHCP links and domains (networkmanager.go)

	// DHCP search domains: every lease file, expired or not (a server that handed a domain out once
	// will again), plus resolved's per-link search domains on DHCP links.
	for _, l := range s.Leases {
		for _, v := range append([]string{l.DomainName}, l.SearchDomains...) {
			f.addDHCPDomain(v, l.Path)
		}
	}
	f.recordedDHCPDomains(s) // while a networkd lease is gone for a moment (dhcpdomains.go)
	for _, ls := range s.Links {
		if !f.IsDHCPLink(ls.IfName, ls.IfIndex) {
			continue
		}
		for _, d := range ls.Domains {
			if !d.RoutingOnly {
				f.addDHCPDomain(d.Name, ls.Source)
			}
		}
	}

	// No lease value reaches the dhclient hook (it reads the DHCP domains from dhclient-script at each
	// run), so dhclient trimming its lease history changes nothing nodedns writes for it.
	f.DHCPOffers = f.dhclientOffers(s)

	f.Upstreams, f.UpstreamSource = f.upstreams(s, cfg)
	return f
}

// HostileOffer is a domain value a DHCP source handed out that is no domain name.
type HostileOffer struct {
	// Value is the value as read; quote it before printing.
	Value string
	// Source is where it was seen: a lease file, a link's state.
	Source string
	// Words are its space-separated words, canonical, as IsDHCPDomain matches them.
	Words []string
}

// addDHCPDomain adds what a DHCP source handed out as a domain: one name, or (option 15 as
// dhclient records it) several separated by spaces, which Debian's dhclient-script searches all.
// A value with any word that is no domain name is a hostile offer, kept whole.
func (f *Facts) addDHCPDomain(v, source string) {
	words := strings.FieldsFunc(v, func(r rune) bool { return r == ' ' }) // a tab or a newline is hostile
	if slices.ContainsFunc(words, func(w string) bool { return !resolvconf.ValidDomain(w) }) {
		for i, w := range words {
			words[i] = resolvconf.CanonicalDomain(w)
		}
		v = strings.TrimSpace(v)
		if !slices.ContainsFunc(f.HostileDHCP, func(h HostileOffer) bool { return h.Value == v && h.Source == source }) {
			f.HostileDHCP = append(f.HostileDHCP, HostileOffer{Value: v, Source: source, Words: words})
		}
		return
	}
	for _, w := range words {
		f.addDomain(w, source)
	}
}

func (f *Facts) addDomain(d, source string) {
	d = resolvconf.CanonicalDomain(d)
	if d == "" || f.IsClusterDomain(d) {
		// A DHCP server handing out the cluster domain is odd, but stripping it would break the
		// cluster's own search list; the cluster rules handle it.
		return
	}
	if !slices.Contains(f.DHCPDomains[d], source) {
		f.DHCPDomains[d] = append(f.DHCPDomains[d], source)
	}
}

// IsDHCPLink reports whether DHCP configures the link.
func (f Facts) IsDHCPLink(name string, index int) bool {
	return (name != "" && f.DHCPLinks[name]) || (index > 0 && f.DHCPLinks[fmt.Sprintf("#%d", index)])
}

// upstreams takes the first source that has any non-loop server (docs/contract.md "Upstreams": not a
// union, so a server from an old lease does not linger after a renewal).
func (f Facts) upstreams(s *node.Snapshot, cfg config.Config) ([]netip.Addr, string) {
	type source struct {
		name  string
		addrs []netip.Addr
	}
	var srcs []source
	srcs = append(srcs, source{"config upstreams", cfg.Upstreams})
	if s.ResolvedInUse() {
		// Global servers from everyone's config but nodedns's own drop-in, which lists upstreams it
		// derived itself and must not feed back into the choice. resolved's own resolv.conf only
		// without its live view (--root, no bus): resolved rewrites the file a moment after it takes
		// a renewal's new server (a few ms, seen with 252), so next to the live per-link servers it
		// would bring back the server the renewal just replaced.
		srcs = append(srcs, source{"systemd-resolved", ResolvedServers(s, s.ResolvedOthers, s.ResolvedLive == nil)})
	}
	if s.NetworkManager.InUse() {
		srcs = append(srcs, source{NMUpstreamSource, nmDHCPServers(s)})
	}
	srcs = append(srcs, source{"DHCP leases", f.dhcpLeaseServers(s)})
	if s.Netplan != nil {
		var ns []netip.Addr
		for _, i := range s.Netplan.Interfaces {
			ns = append(ns, i.Nameservers...)
		}
		srcs = append(srcs, source{"netplan nameservers", ns})
	}
	if s.ResolvConf.File != nil {
		srcs = append(srcs, source{"/etc/resolv.conf", s.ResolvConf.File.Nameservers()})
	}
	for _, src := range srcs {
		var out []netip.Addr
		for _, a := range src.addrs {
			if f.IsLoop(a, true) || !a.IsValid() || a.IsUnspecified() {
				continue
			}
			out = appendNew(out, a)
			if len(out) == resolvconf.MaxNameservers {
				break
			}
		}
		if len(out) > 0 {
			return out, src.name
		}
	}
	return nil, ""
}

// ResolvedServers gathers the servers systemd-resolved forwards to as the snapshot has them: the
// global DNS= of conf (s.Resolved, all resolved reads, or s.ResolvedOthers, without nodedns's own
// drop-in; nil: none), every link's servers (s.Links: resolved's live view where it was asked),
// and, with withFile, the servers of resolved's own resolv.conf (its uplink view), in that order,
// repeats kept.
func ResolvedServers(s *node.Snapshot, conf *systemd.ResolvedConfig, withFile bool) []netip.Addr {
	var out []netip.Addr
	if conf != nil {
		for _, sv := range conf.DNS {
			out = append(out, sv.Addr)
		}
	}
	for _, l := range s.Links {
		out = append(out, l.DNS...)
	}
	if withFile && s.ResolvedResolv.File != nil {
		out = append(out, s.ResolvedResolv.File.Nameservers()...)
	}
	return out
}

// IsLoop reports whether a is a loop address: a cache address, a well-known cache default, a cluster
// DNS address, or (withLoopback: for files read by something other than the host's own libc, such as
// kubelet's resolvConf) a loopback address. Other link-local addresses are real upstreams (AWS's
// 169.254.169.253).
func (f Facts) IsLoop(a netip.Addr, withLoopback bool) bool {
	a = a.WithZone("").Unmap()
	if withLoopback && a.IsLoopback() {
		return true
	}
	if a == KubesprayCache || a == DocsCache {
		return true
	}
	return slices.Contains(f.CacheAddrs, a) || slices.Contains(f.ClusterDNS, a)
}

// LoopKind names why a is a loop address, for messages.
func (f Facts) LoopKind(a netip.Addr) string {
	a = a.WithZone("").Unmap()
	switch {
	case slices.Contains(f.CacheAddrs, a) || a == KubesprayCache || a == DocsCache:
		return "the node-local cache"
	case slices.Contains(f.ClusterDNS, a):
		return "the cluster DNS service"
	case a.IsLoopback():
		return "a loopback stub (it forwards back through the host)"
	}
	return "a loop address"
}

// IsDHCPDomain reports whether d (any case, trailing dot or not) is a DHCP search domain.
func (f Facts) IsDHCPDomain(d string) bool {
	d = resolvconf.CanonicalDomain(d)
	if _, ok := f.DHCPDomains[d]; ok {
		return true
	}
	return slices.ContainsFunc(f.HostileDHCP, func(h HostileOffer) bool { return slices.Contains(h.Words, d) })
}

// IsClusterDomain reports whether d is the cluster domain or under it (svc.cluster.local,
// default.svc.cluster.local): kubelet adds those itself.
func (f Facts) IsClusterDomain(d string) bool {
	d = resolvconf.CanonicalDomain(d)
	return d == f.ClusterDomain || strings.HasSuffix(d, "."+f.ClusterDomain)
}

// SortedDHCPDomains lists the DHCP search domains in order.
func (f Facts) SortedDHCPDomains() []string {
	out := make([]string, 0, len(f.DHCPDomains))
	for d := range f.DHCPDomains {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

func appendNew(list []netip.Addr, addrs ...netip.Addr) []netip.Addr {
	for _, a := range addrs {
		a = a.Unmap()
		if !slices.Contains(list, a) {
			list = append(list, a)
		}
	}
	return list
}
