package leases

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/nodedns/nodedns/systemd"
)

// ParseNetworkd parses systemd-networkd's lease file format: KEY=VALUE lines as written by
// sd-dhcp-lease.c dhcp_lease_save in systemd 252 (ADDRESS, NETMASK, ROUTER, SERVER_ADDRESS, DNS,
// NTP, DOMAINNAME, DOMAIN_SEARCH_LIST, HOSTNAME, MTU, LIFETIME, T1, T2, CLIENTID, ...), read as
// dhcp_lease_load reads them: with parse_env_file (systemd.ParseStateFile, the env-file grammar of
// systemd's lexer), so a line networkd ignores (no '=', a key it does not ask for) is ignored, a
// later assignment replaces an earlier one, quotes and backslashes are undone, a value may go on
// over an escaped newline, and reading stops at a NUL. NetworkManager's internal DHCP client writes
// the same format (NetworkManager before 1.22 saved leases with systemd's own code; the nettools
// client since then writes only ADDRESS), so it parses those files too.
//
// path is the node path, used in errors and in Lease.Path; when its base name is a number (networkd
// names lease files by interface index) it becomes IfIndex. An assignment that is not UTF-8 (which
// makes parse_env_file refuse the whole file) or a bad address, netmask or MTU is an error naming
// path:line.
func ParseNetworkd(data []byte, path string) (Lease, error) {
	l := Lease{Path: path, Client: Networkd}
	if n, err := strconv.Atoi(filepath.Base(path)); err == nil && n > 0 {
		l.IfIndex = n
	}
	vars, lines, badLine := systemd.ParseStateFile(data)
	if badLine > 0 {
		return Lease{}, fmt.Errorf("%s:%d: binary data (not UTF-8)", path, badLine)
	}
	// Keys not listed here (SERVER_ADDRESS, NTP, HOSTNAME, LIFETIME, T1, T2, CLIENTID, ROUTES,
	// OPTION_224, ...) carry nothing nodedns uses. The ones it uses are checked in the order of
	// their lines, so the first bad line is the one named.
	keys := []string{"ADDRESS", "NETMASK", "ROUTER", "DNS", "DOMAINNAME", "DOMAIN_SEARCH_LIST", "MTU"}
	keys = slices.DeleteFunc(keys, func(k string) bool { _, ok := vars[k]; return !ok })
	slices.SortStableFunc(keys, func(a, b string) int { return lines[a] - lines[b] })
	var (
		addr netip.Addr
		bits = -1
	)
	for _, key := range keys {
		val := vars[key]
		bad := func(format string, args ...any) (Lease, error) {
			return Lease{}, fmt.Errorf("%s:%d: %s", path, lines[key], fmt.Sprintf(format, args...))
		}
		switch key {
		case "ADDRESS":
			a, ok := parseIPv4(val)
			if !ok {
				return bad("ADDRESS: invalid IPv4 address %q", clip(val))
			}
			addr = a
		case "NETMASK":
			m, ok := parseIPv4(val)
			if !ok {
				return bad("NETMASK: invalid IPv4 netmask %q", clip(val))
			}
			n, ok := maskBits(m)
			if !ok {
				return bad("NETMASK: non-contiguous netmask %s", m)
			}
			bits = n
		case "ROUTER":
			as, err := addrList(strings.Fields(val), parseIPv4)
			if err != nil {
				return bad("ROUTER: %v", err)
			}
			l.Routers = as
		case "DNS":
			as, err := addrList(strings.Fields(val), parseIPv4)
			if err != nil {
				return bad("DNS: %v", err)
			}
			l.DNS = as
		case "DOMAINNAME":
			l.DomainName = val
		case "DOMAIN_SEARCH_LIST":
			// dhcp_lease_save writes the list with fputstrv, separated by
			// single spaces; dhcp_lease_load splits it on spaces again.
			l.SearchDomains = strings.Fields(val)
		case "MTU":
			n, err := parseMTU(val)
			if err != nil {
				return bad("MTU: %v", err)
			}
			l.MTU = n
		}
	}
	l.Address = leaseAddress(addr, bits)
	return l, nil
}

// addrList parses each word with parse, naming the first bad one.
func addrList(words []string, parse func(string) (netip.Addr, bool)) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, w := range words {
		a, ok := parse(w)
		if !ok {
			return nil, fmt.Errorf("invalid address %q", clip(w))
		}
		out = append(out, a)
	}
	return out, nil
}

// parseMTU parses option 26. RFC 2132 section 5.1 makes 68 the minimum; the
// option is 16 bits wide.
func parseMTU(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if !isDigits(s) || err != nil || n < 68 || n > 65535 {
		return 0, fmt.Errorf("invalid MTU %q (want 68 to 65535)", clip(s))
	}
	return n, nil
}

// clip shortens s for an error message, so a garbage line cannot flood a log.
func clip(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	// Cut on a rune boundary so %q stays readable.
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
