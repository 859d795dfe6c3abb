package policy

import (
	"bytes"
	_ "embed"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"text/template"

	"github.com/nodedns/nodedns/resolvconf"
)

// DhclientHook renders the dhclient enter hook /etc/dhcp/dhclient-enter-hooks.d/nodedns from
// dhclienthook.sh. dhclient-script (Debian's and Ubuntu's, isc-dhcp-client 4.4) sources every file
// there before it writes resolv.conf, so the hook can change the new_* variables and redefine
// make_resolv_conf.
//
// It makes a renewal reach the fixed point apply reaches (docs/contract.md "Cluster search domains on
// the host": a renewal never changes what apply wrote):
//   - the DHCP domain options are blanked (they would reach the host's and every pod's search list);
//   - loop addresses leave the offered servers; with only loop addresses left (kubespray's
//     supersede with the cache alone) the upstreams nodedns knows take their place, and with none
//     known resolv.conf is left as it is (a file with no nameserver sends glibc to 127.0.0.1);
//   - make_resolv_conf edits resolv.conf in place instead of writing it from scratch: the nameserver
//     lines are replaced by the filtered servers (at the first one's place), the search domains of
//     this run's offer (and the previous lease's) and the cluster's leave search and domain lines,
//     and every other line stays as it is (options, comments, nodedns's header, the host's own
//     search domains). Debian's make_resolv_conf would drop them all, and kubelet's file, built
//     from the host's options and search domains, would then have to change back.
//
// The hook takes the DHCP search domains from dhclient-script's own variables at run time, as data
// (docs/contract.md "The dhclient hook"): it embeds no domain name read from a lease, so the lease
// history never changes its bytes, and a domain name that is shell code stays a string. What it
// embeds is checked here and single-quoted: the loop and upstream addresses (printed by netip,
// without a zone; the upstreams change it only when they change, docs/contract.md "Upstreams") and
// the cluster domain, left out when it is not a domain name.
//
// The file it edits is $nodedns_resolv_conf when set (tests), else /etc/resolv.conf followed to its
// target, as Debian's dhclient-script does.
func DhclientHook(f Facts) []byte {
	var loops []string
	seen := map[netip.Addr]bool{}
	for _, a := range append(append(append([]netip.Addr{}, f.CacheAddrs...), KubesprayCache, DocsCache), f.ClusterDNS...) {
		a = a.WithZone("")
		if !seen[a] {
			seen[a] = true
			loops = append(loops, a.String())
		}
	}
	var ups []string
	for _, a := range f.Upstreams {
		ups = append(ups, a.WithZone("").String())
	}
	cluster := ""
	if resolvconf.ValidDomain(f.ClusterDomain) {
		cluster = strings.TrimSuffix(f.ClusterDomain, ".")
	}
	keep := ""
	if f.RouteClusterDomainToCache {
		keep = "1"
	}
	var b bytes.Buffer
	err := hookTemplate.Execute(&b, struct{ Header, Loop, Upstreams, Cluster, KeepCluster string }{
		Header:      HookHeader,
		Loop:        shellQuote(" " + strings.Join(loops, " ") + " "),
		Upstreams:   shellQuote(strings.Join(ups, " ")),
		Cluster:     shellQuote(cluster),
		KeepCluster: shellQuote(keep),
	})
	if err != nil {
		// The template is fixed and its data plain strings: a failure is a bug in this file.
		panic("policy: the dhclient hook template: " + err.Error())
	}
	return b.Bytes()
}

//go:embed dhclienthook.sh
var hookSource string

var hookTemplate = template.Must(template.New("dhclienthook.sh").Option("missingkey=error").Parse(hookSource))

// shellQuote quotes s as one word for a POSIX shell: inside single quotes nothing is special, and
// a single quote itself ends the quotes, is escaped, and opens them again.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// dropClusterSearch takes the cluster search domains (<ns>.svc.<domain>, svc.<domain>, <domain>,
// kubespray's host_resolvconf `domain` and `search` lines) off a host resolv.conf: nodedns keeps the
// cache out of the host's resolvers, so nothing on the host answers for the cluster domain, and a
// short name the host looks up would leak to the LAN resolver as name.svc.cluster.local
// (docs/contract.md "Cluster search domains on the host"; the pattern of incident 001). With
// host.routeClusterDomainToCache they stay. It returns the reason, "" when nothing was removed.
func (p *Plan) dropClusterSearch(f *resolvconf.File) string {
	if p.Facts.RouteClusterDomainToCache {
		return ""
	}
	removed := f.FilterSearch(func(d string) bool { return !p.Facts.IsClusterDomain(d) })
	if len(removed) == 0 {
		return ""
	}
	var uniq []string
	for _, d := range removed {
		if !slices.Contains(uniq, d) {
			uniq = append(uniq, d)
		}
	}
	return fmt.Sprintf("search domain %s is the cluster's, and no host resolver serves %s (host lookups would leak to the LAN resolver)", strings.Join(uniq, " "), p.Facts.ClusterDomain)
}
