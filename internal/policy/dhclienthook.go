package policy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/nodedns/nodedns/resolvconf"
)

// DhclientHook renders the dhclient enter hook /etc/dhcp/dhclient-enter-hooks.d/nodedns.
// dhclient-script (Debian's and Ubuntu's, isc-dhcp-client 4.4) sources every file there before it
// writes resolv.conf, so the hook can change the new_* variables and redefine make_resolv_conf.
//
// It makes a renewal reach the fixed point apply reaches (docs/contract.md "Cluster search domains on
// the host": a renewal never changes what apply wrote):
//   - the DHCP domain options are blanked (they would reach the host's and every pod's search list);
//   - loop addresses leave the offered servers; with only loop addresses left (kubespray's
//     supersede with the cache alone) the upstreams nodedns knows take their place, and with none
//     known resolv.conf is left as it is (a file with no nameserver sends glibc to 127.0.0.1);
//   - make_resolv_conf edits resolv.conf in place instead of writing it from scratch: the nameserver
//     lines are replaced by the filtered servers (at the first one's place), the DHCP and cluster
//     search domains leave search and domain lines, and every other line stays as it is (options,
//     comments, nodedns's header, the host's own search domains). Debian's make_resolv_conf would
//     drop them all, and kubelet's file, built from the host's options and search domains, would
//     then have to change back.
//
// The file it edits is $nodedns_resolv_conf when set (tests), else /etc/resolv.conf followed to its
// target, as Debian's dhclient-script does.
func DhclientHook(f Facts) []byte {
	var loops []string
	seen := map[netip.Addr]bool{}
	for _, a := range append(append(append([]netip.Addr{}, f.CacheAddrs...), KubesprayCache, DocsCache), f.ClusterDNS...) {
		if !seen[a] {
			seen[a] = true
			loops = append(loops, a.String())
		}
	}
	var ups []string
	for _, a := range f.Upstreams {
		ups = append(ups, a.String())
	}
	// Domains matched as written and with the trailing dot dhclient adds; the cluster's as a
	// suffix too (<ns>.svc.<domain>).
	drop := f.SortedDHCPDomains()
	cluster := ""
	if !f.RouteClusterDomainToCache && f.ClusterDomain != "" {
		cluster = f.ClusterDomain
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n", HookHeader)
	b.WriteString(`# Sourced (not executed) by dhclient-script; it must not exit.
nodedns_loop=" ` + strings.Join(loops, " ") + ` "
nodedns_upstreams="` + strings.Join(ups, " ") + `"
# Search domains that never reach the host's search list: DHCP's, and the cluster's (the cache is
# not among the host's resolvers, so a short name would leak to the LAN resolver under them).
nodedns_drop=" ` + strings.Join(drop, " ") + ` "
nodedns_cluster="` + cluster + `"

# DHCP search domains (option 119) and domain name (option 15) would reach the node's and every pod's
# search list; the host keeps its static search domains only.
new_domain_search=
new_domain_name=
new_dhcp6_domain_search=

nodedns_filter() {
	_nodedns_out=
	for _nodedns_s in $1; do
		case "$nodedns_loop" in
		*" $_nodedns_s "*) ;;
		*) _nodedns_out="${_nodedns_out:+$_nodedns_out }$_nodedns_s" ;;
		esac
	done
	printf '%s' "$_nodedns_out"
}

# nodedns_keep_domain DOMAIN: false for a DHCP or cluster search domain.
nodedns_keep_domain() {
	_nodedns_d=${1%.}
	case "$nodedns_drop" in
	*" $_nodedns_d "*) return 1 ;;
	esac
	if [ -n "$nodedns_cluster" ]; then
		case "$_nodedns_d" in
		"$nodedns_cluster" | *."$nodedns_cluster") return 1 ;;
		esac
	fi
	return 0
}

nodedns_servers=
if [ -n "$new_domain_name_servers" ]; then
	new_domain_name_servers=$(nodedns_filter "$new_domain_name_servers")
	if [ -z "$new_domain_name_servers" ]; then
		new_domain_name_servers=$nodedns_upstreams
	fi
	nodedns_servers=$new_domain_name_servers
	[ -n "$nodedns_servers" ] || nodedns_servers=none
fi
if [ -n "$new_dhcp6_name_servers" ]; then
	new_dhcp6_name_servers=$(nodedns_filter "$new_dhcp6_name_servers")
	if [ -z "$nodedns_servers" ]; then
		nodedns_servers=$new_dhcp6_name_servers
		[ -n "$nodedns_servers" ] || nodedns_servers=none
	fi
fi

make_resolv_conf() {
	# Nothing offered, or only loop addresses and no upstream known: keep the last good file.
	case "$nodedns_servers" in
	"" | none) return 0 ;;
	esac
	_nodedns_rc=${nodedns_resolv_conf:-/etc/resolv.conf}
	_nodedns_rc=$(readlink -f "$_nodedns_rc" 2>/dev/null) || _nodedns_rc=${nodedns_resolv_conf:-/etc/resolv.conf}
	_nodedns_ns=
	for _nodedns_s in $nodedns_servers; do
		case "$_nodedns_s" in
		[Ff][Ee]80:*) _nodedns_s="$_nodedns_s%$interface" ;; # link-local: dhclient-script adds the zone too
		esac
		_nodedns_ns="${_nodedns_ns}nameserver $_nodedns_s
"
	done
	_nodedns_new=
	_nodedns_put=
	_nodedns_f=$-
	set -f
	if [ -f "$_nodedns_rc" ]; then
		while IFS= read -r _nodedns_line || [ -n "$_nodedns_line" ]; do
			set -- $_nodedns_line
			case "$1" in
			nameserver)
				if [ -z "$_nodedns_put" ]; then
					_nodedns_new="$_nodedns_new$_nodedns_ns"
					_nodedns_put=1
				fi
				continue
				;;
			search | domain)
				_nodedns_kw=$1
				shift
				_nodedns_kept=
				_nodedns_all=1
				for _nodedns_d in "$@"; do
					if nodedns_keep_domain "$_nodedns_d"; then
						_nodedns_kept="${_nodedns_kept:+$_nodedns_kept }$_nodedns_d"
					else
						_nodedns_all=
					fi
				done
				[ -n "$_nodedns_kept" ] || continue
				[ -n "$_nodedns_all" ] || _nodedns_line="$_nodedns_kw $_nodedns_kept"
				;;
			esac
			_nodedns_new="$_nodedns_new$_nodedns_line
"
		done <"$_nodedns_rc"
	fi
	case "$_nodedns_f" in
	*f*) ;;
	*) set +f ;;
	esac
	[ -n "$_nodedns_put" ] || _nodedns_new="$_nodedns_new$_nodedns_ns"
	# In place, as dhclient-script does (a bind-mounted file cannot be renamed over).
	printf '%s' "$_nodedns_new" >"$_nodedns_rc"
}
`)
	return []byte(b.String())
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
