package systemd

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"path"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/nodedns/nodedns/internal/nodefs"
)

// Node directories of the per-link runtime state files.
const (
	// ResolvedLinkDir holds systemd-resolved's per-link settings made over
	// D-Bus (SetLinkDNS, SetLinkDomains, ...), one file per ifindex, written
	// by link_save_user in resolved-link.c and read back once at startup.
	ResolvedLinkDir = "/run/systemd/resolve/netif"
	// NetworkdLinkDir holds systemd-networkd's per-link state, one file per
	// ifindex (link_save in networkd-state-file.c); resolved reads it through
	// sd-network for the links networkd manages.
	NetworkdLinkDir = "/run/systemd/netif/links"
)

// Watches declares what LoadResolvedConfig and LoadLinkStates read.
func Watches() []nodefs.Watch {
	ws := []nodefs.Watch{
		{Dir: path.Dir(ResolvedConfPath), Match: nodefs.Names(path.Base(ResolvedConfPath)), Complete: nodefs.NewlineTerminated},
		{Dir: NetworkdLinkDir, Match: nodefs.Numeric},
		{Dir: ResolvedLinkDir, Match: nodefs.Numeric},
	}
	for _, d := range ResolvedDropinDirs {
		ws = append(ws, nodefs.Watch{Dir: d, Match: nodefs.Suffix(".conf"), Complete: nodefs.NewlineTerminated})
	}
	return ws
}

// Domain is a per-link DNS domain.
type Domain struct {
	Name        string // without the "~" marker, as written otherwise
	RoutingOnly bool   // "~name": used to route queries, never as a search suffix
}

// LinkState is what systemd-resolved uses for one link, as far as the runtime
// files tell.
type LinkState struct {
	IfIndex int
	IfName  string // from root/sys/class/net/NAME/ifindex; "" if unknown
	DNS     []netip.Addr
	Domains []Domain
	// NetworkdManaged: networkd's links file has an ADMIN_STATE other than
	// pending, initialized or unmanaged (link_is_managed in resolved-link.c,
	// 252: configuring, configured, failed and linger all count). resolved
	// then takes DNS and domains from networkd only, ignores its own
	// per-link file, and refuses SetLink* with LinkBusy.
	NetworkdManaged bool
	NetworkFile     string // networkd's NETWORK_FILE
	AdminState      string // networkd's ADMIN_STATE, "" without a links file
	OperState       string // networkd's OPER_STATE
	// DHCPLease is networkd's DHCP_LEASE (the lease file), set while the link
	// holds a DHCPv4 lease: its DNS and DOMAINS then include what DHCP handed
	// out when UseDNS=/UseDomains= are on.
	DHCPLease string
	// Source is the node path of the file DNS and Domains were taken from:
	// networkd's links file for a managed link, else resolved's netif file,
	// else networkd's links file (an unmanaged link with no settings).
	Source string
	// Files lists every node path read for this link.
	Files []string
}

// LoadLinkStates reads both directories under root and merges by ifindex
// (resolved's user settings override networkd's for DNS and Domains, as
// resolved does: for a link networkd does not manage, resolved uses the
// settings made over D-Bus; for a managed one networkd is the only source, see
// link_load_user in resolved-link.c 252). Bad files are reported, not fatal.
// Links come out sorted by ifindex.
func LoadLinkStates(r nodefs.Reader) ([]LinkState, []Warning) {
	var warns []Warning
	networkd := readLinkDir(r, NetworkdLinkDir, &warns)
	resolved := readLinkDir(r, ResolvedLinkDir, &warns)
	names, errs := nodefs.IfNames(r)
	for _, err := range errs {
		warns = append(warns, Warning{Path: nodefs.SysClassNet, Msg: err.Error()})
	}

	idx := map[int]bool{}
	for i := range networkd {
		idx[i] = true
	}
	for i := range resolved {
		idx[i] = true
	}
	order := make([]int, 0, len(idx))
	for i := range idx {
		order = append(order, i)
	}
	sort.Ints(order)

	states := make([]LinkState, 0, len(order))
	for _, i := range order {
		ls := LinkState{IfIndex: i, IfName: names[i]}
		nd, hasND := networkd[i]
		user, hasUser := resolved[i]
		if hasND {
			ls.Files = append(ls.Files, nd.path)
			ls.AdminState = nd.vars["ADMIN_STATE"]
			ls.OperState = nd.vars["OPER_STATE"]
			ls.NetworkFile = nd.vars["NETWORK_FILE"]
			ls.DHCPLease = nd.vars["DHCP_LEASE"]
			switch ls.AdminState {
			case "", "pending", "initialized", "unmanaged":
			default:
				ls.NetworkdManaged = true
			}
		}
		if hasUser {
			ls.Files = append(ls.Files, user.path)
		}
		switch {
		case ls.NetworkdManaged:
			ls.Source = nd.path
			ls.DNS, ls.Domains = networkdSettings(i, ls.IfName, nd, &warns)
			if hasUser {
				warns = append(warns, Warning{Path: user.path, Msg: fmt.Sprintf("ignored: systemd-networkd manages this link (ADMIN_STATE=%s), so systemd-resolved takes its DNS settings from %s", ls.AdminState, nd.path)})
			}
		case hasUser:
			ls.Source = user.path
			ls.DNS, ls.Domains = userSettings(i, ls.IfName, user, &warns)
		default:
			ls.Source = nd.path
		}
		states = append(states, ls)
	}
	return states, warns
}

type linkFile struct {
	path string // node path
	vars map[string]string
	line map[string]int // line of each key, for warnings
}

// stateKind bounds a per-link state file.
var stateKind = nodefs.Kind{Name: "link state file", Max: maxConfFileSize}

// readLinkDir reads every file named by a positive ifindex in dir.
func readLinkDir(r nodefs.Reader, dir string, warns *[]Warning) map[int]linkFile {
	out := map[int]linkFile{}
	entries, err := r.ReadDir(dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			*warns = append(*warns, Warning{Path: dir, Msg: fmt.Sprintf("skipped: %v", errors.Unwrap(err))})
		}
		return out
	}
	for _, e := range entries {
		// Both daemons name the files by decimal ifindex; anything else
		// (networkd's temporary files are hidden) is not theirs to read.
		n, err := strconv.Atoi(e.Name())
		if err != nil || n <= 0 || strconv.Itoa(n) != e.Name() {
			continue
		}
		p := path.Join(dir, e.Name())
		data, err := r.ReadFile(p, stateKind)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed while we listed: the link went away
			}
			msg := fmt.Sprintf("skipped: %v", errors.Unwrap(err))
			if errors.Is(err, nodefs.ErrTooLarge) {
				msg = fmt.Sprintf("skipped: larger than %d bytes", maxConfFileSize)
			}
			*warns = append(*warns, Warning{Path: p, Msg: msg})
			continue
		}
		vars, lines, bad := ParseStateFile(data)
		if bad > 0 {
			// resolved then drops the file's settings (link_load_user fails; for networkd's file,
			// link_is_managed fails and the link stays unmanaged), as if there were no file.
			*warns = append(*warns, Warning{Path: p, Line: bad, Msg: "skipped: not UTF-8 clean, so systemd's parse_env_file refuses the whole file"})
			continue
		}
		out[n] = linkFile{path: p, vars: vars, line: lines}
	}
	return out
}

// networkdSettings is what resolved 252 takes from a managed link's networkd
// file: link_update_dns_servers (DNS=) and link_update_search_domains
// (DOMAINS= as search domains, then ROUTE_DOMAINS= as routing-only ones).
// Unlike the user file, one bad entry makes resolved drop the whole list
// ("goto clear"), and so do we, with a Warning.
func networkdSettings(ifindex int, ifname string, f linkFile, warns *[]Warning) ([]netip.Addr, []Domain) {
	var servers []Server
	seen := serverSet{}
	for _, w := range networkdWords(f.vars["DNS"]) {
		s, err := parseServer(w)
		if err == nil && !ifaceIsLink(s.Iface, ifindex, ifname) {
			err = fmt.Errorf("interface %s is not this link", s.Iface)
		}
		if err != nil {
			*warns = append(*warns, Warning{Path: f.path, Line: f.line["DNS"], Msg: fmt.Sprintf("bad DNS entry %q (%v): systemd-resolved drops all DNS servers of this link", w, err)})
			servers = nil
			break
		}
		if seen.add(s) {
			servers = append(servers, s)
		}
	}

	var domains []Domain
	domainIdx := map[string]int{}
	ok := true
	for _, key := range []string{"DOMAINS", "ROUTE_DOMAINS"} {
		for _, w := range networkdWords(f.vars[key]) {
			if _, err := normalizeDomain(w); err != nil {
				*warns = append(*warns, Warning{Path: f.path, Line: f.line[key], Msg: fmt.Sprintf("bad domain %q (%v): systemd-resolved drops all domains of this link", w, err)})
				ok = false
				break
			}
			domains = addLinkDomain(domains, domainIdx, Domain{Name: w, RoutingOnly: key == "ROUTE_DOMAINS"})
		}
		if !ok {
			domains = nil
			break
		}
	}
	return serverAddrs(servers), domains
}

// networkdWords splits a list of networkd's state file as sd-network does (network_link_get_strv,
// sd-network.c 252: strv_split with WHITESPACE, that is extract_first_word with
// EXTRACT_RETAIN_ESCAPE): at blanks only, backslashes and quotes kept as they are.
func networkdWords(v string) []string {
	words, _ := splitWords(v, exRetainEscape) // no quotes or escapes: nothing can fail
	return words
}

// userSettings is link_load_user (resolved-link.c 252): SERVERS= and DOMAINS=
// split like extract_first_word with no flags; a bad entry, or a server bound
// to another interface, is skipped on its own.
func userSettings(ifindex int, ifname string, f linkFile, warns *[]Warning) ([]netip.Addr, []Domain) {
	var servers []Server
	seen := serverSet{}
	words, err := splitWords(f.vars["SERVERS"], 0)
	if err != nil {
		*warns = append(*warns, Warning{Path: f.path, Line: f.line["SERVERS"], Msg: fmt.Sprintf("failed to split SERVERS=: %v", err)})
	}
	for _, w := range words {
		s, err := parseServer(w)
		if err == nil && !ifaceIsLink(s.Iface, ifindex, ifname) {
			err = fmt.Errorf("interface %s is not this link", s.Iface)
		}
		if err != nil {
			*warns = append(*warns, Warning{Path: f.path, Line: f.line["SERVERS"], Msg: fmt.Sprintf("failed to load DNS server %q, ignoring: %v", w, err)})
			continue
		}
		if seen.add(s) {
			servers = append(servers, s)
		}
	}

	var domains []Domain
	domainIdx := map[string]int{}
	words, err = splitWords(f.vars["DOMAINS"], 0)
	if err != nil {
		*warns = append(*warns, Warning{Path: f.path, Line: f.line["DOMAINS"], Msg: fmt.Sprintf("failed to split DOMAINS=: %v", err)})
	}
	for _, w := range words {
		d := Domain{Name: strings.TrimPrefix(w, "~"), RoutingOnly: strings.HasPrefix(w, "~")}
		if _, err := normalizeDomain(d.Name); err != nil {
			*warns = append(*warns, Warning{Path: f.path, Line: f.line["DOMAINS"], Msg: fmt.Sprintf("failed to load search domain %q, ignoring: %v", w, err)})
			continue
		}
		domains = addLinkDomain(domains, domainIdx, d)
	}
	return serverAddrs(servers), domains
}

// ifaceIsLink reports whether a server's "%IFACE" names this link, as
// resolved checks (ifindex != 0 && ifindex != l->ifindex is refused). A name
// can only be checked when sysfs under root knows the link's name.
func ifaceIsLink(iface string, ifindex int, ifname string) bool {
	if iface == "" {
		return true
	}
	if n, ok := parseIfindex(iface); ok {
		return n == ifindex
	}
	return ifname == "" || iface == ifname
}

// addLinkDomain is link_update_search_domain_one: a name already present
// keeps its place and takes the new routing-only flag.
// idx maps normalized names to their index in list.
func addLinkDomain(list []Domain, idx map[string]int, d Domain) []Domain {
	key, _ := normalizeDomain(d.Name)
	if i, ok := idx[key]; ok {
		list[i].RoutingOnly = d.RoutingOnly
		return list
	}
	idx[key] = len(list)
	return append(list, d)
}

func serverAddrs(servers []Server) []netip.Addr {
	if len(servers) == 0 {
		return nil
	}
	out := make([]netip.Addr, len(servers))
	for i, s := range servers {
		out[i] = s.Addr
	}
	return out
}

// ParseStateFile reads a state file as parse_env_file does (env-file.c, 252), in the grammar of
// environment files (envAssignments): every key by name, a later assignment replacing an earlier
// one; lines says where each was set. networkd's and resolved's link files are read with it here,
// networkd's lease files in package leases (dhcp_lease_load reads them with parse_env_file too). An assignment that is not UTF-8 clean makes the read fail, as
// it does for networkd's and resolved's own readers: badLine is its line, and the file says nothing.
func ParseStateFile(data []byte) (vars map[string]string, lines map[string]int, badLine int) {
	vars, lines = map[string]string{}, map[string]int{}
	badLine = envAssignments(data, func(key, value string, line int) {
		vars[key], lines[key] = value, line
	})
	if badLine > 0 {
		return nil, nil, badLine
	}
	return vars, lines, 0
}
