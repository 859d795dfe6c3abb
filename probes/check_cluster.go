package probes

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// clusterSearchOnHost names the cluster search domains on the host's search list while no host
// resolver answers for the cluster domain (docs/contract.md "Cluster search domains on the host"):
// every short name the host looks up then leaks to the LAN resolver as name.svc.<domain>. Only
// for an /etc/resolv.conf nodedns edits (a regular file or a symlink outside resolved's), and never
// with host.routeClusterDomainToCache.
func clusterSearchOnHost(env *Env, search []string) string {
	s := env.Snapshot
	f := env.Plan.Facts
	if f.RouteClusterDomainToCache || s.ResolvConfManagedByResolved() || s.ResolvConf.File == nil {
		return ""
	}
	// While the cache (or the cluster's DNS) still serves the host the names resolve, but the
	// cluster domains go with it: nodedns takes both out together (docs/contract.md "Cluster search
	// domains on the host"), and check must flag what plan removes ("Check and plan agree").
	viaCache := slices.ContainsFunc(s.ResolvConf.File.Nameservers(), func(a netip.Addr) bool { return f.IsLoop(a, false) })
	var bad []string
	for _, d := range search {
		if f.IsClusterDomain(d) {
			bad = append(bad, d)
		}
	}
	if len(bad) == 0 {
		return ""
	}
	if viaCache {
		return fmt.Sprintf("cluster search domain %s on the host search list: it goes with the cache (resolvconf.loop), since once the host no longer asks the cache no host resolver serves %s and short names would leak to the LAN resolver", strings.Join(bad, ", "), f.ClusterDomain)
	}
	return fmt.Sprintf("cluster search domain %s on the host search list, but no host resolver serves %s: short names the host looks up leak to the LAN resolver", strings.Join(bad, ", "), f.ClusterDomain)
}
