// Package standby keeps pods resolving while the node-local cache is down (docs/contract.md
// "Standby"): with no cache listener on a cache address, nodedns binds UDP and TCP on it beside where
// the cache would be (SO_REUSEPORT, as CoreDNS binds) and forwards the way node-cache's Corefile
// does, and it closes its sockets as soon as another listener appears on the address.
package standby

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/nodedns/nodedns/internal/policy"
)

// Inputs are what the targets are chosen from.
type Inputs struct {
	// CacheAddrs are the node-local cache's addresses: where the standby listens, and never a target.
	CacheAddrs []netip.Addr
	// ClusterDomain is the cluster's DNS domain (canonical, no trailing dot).
	ClusterDomain string
	// ClusterDNS is config clusterDNS, the cluster DNS service IPs.
	ClusterDNS []netip.Addr
	// CorefileClusterDNS are the addresses the cache's Corefile, as last seen, forwards the cluster
	// domain to: used when config names no clusterDNS.
	CorefileClusterDNS []netip.Addr
	// Upstreams are the node's loop-free upstreams (policy.Facts.Upstreams).
	Upstreams []netip.Addr
}

// Targets are where the standby forwards.
type Targets struct {
	// Zones are the zones sent to Cluster: the cluster domain and the reverse zones, as node-cache's
	// Corefile has them.
	Zones []string
	// Cluster are the cluster DNS service addresses, ClusterFrom where they came from.
	Cluster     []netip.Addr
	ClusterFrom string
	// Upstream are the resolvers for every other name.
	Upstream []netip.Addr
	// Refused are addresses a source named but the standby will not forward to: loops.
	Refused []Refusal
}

// Refusal is one address the standby will not forward to, and why.
type Refusal struct {
	Addr netip.Addr
	From string
	Why  string
}

func (r Refusal) String() string { return fmt.Sprintf("%s (%s): %s", r.Addr, r.From, r.Why) }

// Usable reports whether the standby can answer anything: it has somewhere to forward.
func (t Targets) Usable() bool { return len(t.Cluster) > 0 || len(t.Upstream) > 0 }

// Describe says where the standby forwards, for the check and the log.
func (t Targets) Describe() string {
	var parts []string
	if len(t.Cluster) > 0 {
		parts = append(parts, fmt.Sprintf("%s to %s (%s)", strings.Join(t.Zones, ", "), addrs(t.Cluster), t.ClusterFrom))
	} else {
		parts = append(parts, strings.Join(t.Zones, ", ")+": no cluster DNS address known (SERVFAIL)")
	}
	if len(t.Upstream) > 0 {
		parts = append(parts, "everything else to "+addrs(t.Upstream))
	} else {
		parts = append(parts, "everything else: no loop-free upstream (SERVFAIL)")
	}
	s := strings.Join(parts, "; ")
	for _, r := range t.Refused {
		s += "; refused " + r.String()
	}
	return s
}

// Choose picks the targets. Nothing it returns is a loop address (docs/contract.md "Standby": never a
// loop): no cache address, no well-known cache default, no loopback stub (127.0.0.53 and friends
// forward through the host's resolver, which may point back at the cache), no address the kernel
// makes by itself, nothing unspecified.
func Choose(in Inputs) Targets {
	domain := strings.TrimSuffix(strings.ToLower(in.ClusterDomain), ".")
	if domain == "" {
		domain = "cluster.local"
	}
	t := Targets{Zones: []string{domain, "in-addr.arpa", "ip6.arpa"}}
	add := func(list []netip.Addr, from string, a netip.Addr) []netip.Addr {
		a = a.WithZone("").Unmap()
		if why := LoopReason(a, in.CacheAddrs); why != "" {
			t.Refused = append(t.Refused, Refusal{Addr: a, From: from, Why: why})
			return list
		}
		if !slices.Contains(list, a) {
			list = append(list, a)
		}
		return list
	}
	for _, a := range in.ClusterDNS {
		t.Cluster = add(t.Cluster, "config clusterDNS", a)
	}
	t.ClusterFrom = "config clusterDNS"
	if len(in.ClusterDNS) == 0 {
		for _, a := range in.CorefileClusterDNS {
			t.Cluster = add(t.Cluster, "the cache's Corefile", a)
		}
		t.ClusterFrom = "the cache's Corefile"
	}
	for _, a := range in.Upstreams {
		// A cluster DNS address is not an upstream of the node (docs/contract.md "Upstreams").
		if slices.Contains(t.Cluster, a.WithZone("").Unmap()) {
			t.Refused = append(t.Refused, Refusal{Addr: a, From: "upstreams", Why: "the cluster DNS service"})
			continue
		}
		t.Upstream = add(t.Upstream, "upstreams", a)
	}
	return t
}

// LoopReason says why forwarding to a would be a loop, or "" when it is not.
func LoopReason(a netip.Addr, cacheAddrs []netip.Addr) string {
	a = a.WithZone("").Unmap()
	switch {
	case !a.IsValid() || a.IsUnspecified():
		return "not an address"
	case slices.ContainsFunc(cacheAddrs, func(c netip.Addr) bool { return c.WithZone("").Unmap() == a }),
		a == policy.KubesprayCache, a == policy.DocsCache:
		return "the node-local cache itself"
	case a.IsLoopback():
		return "a loopback stub (it forwards through the host, back to the cache)"
	case policy.KernelMade(a), a.IsMulticast():
		return "not a resolver address"
	}
	return ""
}

// ClusterDNSFromCorefile returns the addresses a Corefile's forward lines send the cluster domain to
// (a server block for the domain, or a forward FROM naming it), in order.
func ClusterDNSFromCorefile(forwards []Forward, clusterDomain string) []netip.Addr {
	domain := strings.TrimSuffix(strings.ToLower(clusterDomain), ".")
	if domain == "" {
		domain = "cluster.local"
	}
	var out []netip.Addr
	for _, f := range forwards {
		if f.From != domain && !(f.From == "." && slices.Contains(f.Zones, domain)) {
			continue
		}
		for _, to := range f.To {
			if i := strings.Index(to, "://"); i >= 0 {
				to = to[i+3:]
			}
			var a netip.Addr
			if ap, err := netip.ParseAddrPort(to); err == nil {
				a = ap.Addr()
			} else if p, err := netip.ParseAddr(strings.Trim(to, "[]")); err == nil {
				a = p
			} else {
				continue
			}
			if a = a.Unmap(); !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	return out
}

// Forward is one forward line of a Corefile (probes.Forward's fields, so this package does not
// import the checks).
type Forward struct {
	Zones []string
	From  string
	To    []string
}

func addrs(as []netip.Addr) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, ", ")
}
