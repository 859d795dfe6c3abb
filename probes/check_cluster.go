package probes

import (
	"fmt"
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
	for _, a := range s.ResolvConf.File.Nameservers() {
		if f.IsLoop(a, false) {
			return "" // the cache (or the cluster's DNS) still serves the host: resolvconf.loop's problem
		}
	}
	var bad []string
	for _, d := range search {
		if f.IsClusterDomain(d) {
			bad = append(bad, d)
		}
	}
	if len(bad) == 0 {
		return ""
	}
	return fmt.Sprintf("cluster search domain %s on the host search list, but no host resolver serves %s: short names the host looks up leak to the LAN resolver", strings.Join(bad, ", "), f.ClusterDomain)
}
