# {{.Header}}
# Sourced (not executed) by dhclient-script; it must not exit.
#
# What DHCP hands over is data here, never code: dhclient-script's variables are only expanded
# inside double quotes, or split into words with pathname expansion off, and compared as quoted
# case patterns; nothing is evaluated and no command but the shell's builtins sees them. The values
# below are nodedns's, single-quoted: addresses it parsed (loop addresses, upstreams) and the cluster
# domain, checked as a domain name. No domain name from a lease is among them: the lease history
# never changes this file.
nodedns_loop={{.Loop}}
nodedns_upstreams={{.Upstreams}}
nodedns_cluster={{.Cluster}}
nodedns_keep_cluster={{.KeepCluster}}

_nodedns_opts=$-
set -f

# Search domains that never reach the host's search list: the ones this run of dhclient-script
# carries (the offer, or dhclient.conf's supersede, and the previous lease's), word by word, without
# a trailing dot.
nodedns_drop=' '
for _nodedns_d in $new_domain_search $new_domain_name $new_dhcp6_domain_search $old_domain_search $old_domain_name $old_dhcp6_domain_search; do
	nodedns_drop="$nodedns_drop${_nodedns_d%.} "
done

# DHCP search domains (option 119) and domain name (option 15) would reach the node's and every pod's
# search list; the host keeps its static search domains only.
new_domain_search=
new_domain_name=
new_dhcp6_domain_search=

# nodedns_filter LIST sets _nodedns_out to the words of LIST that are addresses and not loop
# addresses. A word with any other character never reaches resolv.conf.
nodedns_filter() {
	_nodedns_out=
	for _nodedns_s in $1; do
		case $_nodedns_s in
		*[!0-9A-Fa-f:.]*) continue ;;
		esac
		case "$nodedns_loop" in
		*" $_nodedns_s "*) ;;
		*) _nodedns_out="${_nodedns_out:+$_nodedns_out }$_nodedns_s" ;;
		esac
	done
}

# nodedns_keep_domain DOMAIN: false for a DHCP search domain, and for the cluster's (the cache is not
# among the host's resolvers, so a short name would leak to the LAN resolver under them) unless
# host.routeClusterDomainToCache keeps them.
nodedns_keep_domain() {
	_nodedns_d=${1%.}
	if [ -n "$nodedns_cluster" ]; then
		case $_nodedns_d in
		"$nodedns_cluster" | *."$nodedns_cluster")
			[ -n "$nodedns_keep_cluster" ]
			return
			;;
		esac
	fi
	case $nodedns_drop in
	*" $_nodedns_d "*) return 1 ;;
	esac
	return 0
}

nodedns_servers=
if [ -n "$new_domain_name_servers" ]; then
	nodedns_filter "$new_domain_name_servers"
	new_domain_name_servers=$_nodedns_out
	if [ -z "$new_domain_name_servers" ]; then
		new_domain_name_servers=$nodedns_upstreams
	fi
	nodedns_servers=$new_domain_name_servers
	[ -n "$nodedns_servers" ] || nodedns_servers=none
fi
if [ -n "$new_dhcp6_name_servers" ]; then
	nodedns_filter "$new_dhcp6_name_servers"
	new_dhcp6_name_servers=$_nodedns_out
	if [ -z "$nodedns_servers" ]; then
		nodedns_servers=$new_dhcp6_name_servers
		[ -n "$nodedns_servers" ] || nodedns_servers=none
	fi
fi

case $_nodedns_opts in
*f*) ;;
*) set +f ;;
esac

make_resolv_conf() {
	# Nothing offered, or only loop addresses and no upstream known: keep the last good file.
	case $nodedns_servers in
	"" | none) return 0 ;;
	esac
	_nodedns_rc=${nodedns_resolv_conf:-/etc/resolv.conf}
	_nodedns_rc=$(readlink -f "$_nodedns_rc" 2>/dev/null) || _nodedns_rc=${nodedns_resolv_conf:-/etc/resolv.conf}
	_nodedns_f=$-
	set -f
	_nodedns_ns=
	for _nodedns_s in $nodedns_servers; do
		case $_nodedns_s in
		[Ff][Ee]80:*) _nodedns_s="$_nodedns_s%$interface" ;; # link-local: dhclient-script adds the zone too
		esac
		_nodedns_ns="${_nodedns_ns}nameserver $_nodedns_s
"
	done
	_nodedns_new=
	_nodedns_put=
	if [ -f "$_nodedns_rc" ]; then
		while IFS= read -r _nodedns_line || [ -n "$_nodedns_line" ]; do
			set -- $_nodedns_line
			case $1 in
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
	case $_nodedns_f in
	*f*) ;;
	*) set +f ;;
	esac
	[ -n "$_nodedns_put" ] || _nodedns_new="$_nodedns_new$_nodedns_ns"
	# In place, as dhclient-script does (a bind-mounted file cannot be renamed over).
	printf '%s' "$_nodedns_new" >"$_nodedns_rc"
}
