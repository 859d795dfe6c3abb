package leases

import (
	"bytes"
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ParseNetworkd parses systemd-networkd's lease file format: KEY=VALUE lines
// as written by sd-dhcp-lease.c dhcp_lease_save in systemd 252 (ADDRESS,
// NETMASK, ROUTER, SERVER_ADDRESS, DNS, NTP, DOMAINNAME, DOMAIN_SEARCH_LIST,
// HOSTNAME, MTU, LIFETIME, T1, T2, CLIENTID, ...). NetworkManager's internal
// DHCP client writes the same format (NetworkManager before 1.22 saved leases
// with systemd's own code; the nettools client since then writes only
// ADDRESS), so it parses those files too.
//
// path is the node path, used in errors and in Lease.Path; when its base name
// is a number (networkd names lease files by interface index) it becomes
// IfIndex. A line that is not KEY=VALUE, a bad address or MTU, or binary data
// is an error naming path:line.
func ParseNetworkd(data []byte, path string) (Lease, error) {
	l := Lease{Path: path, Client: Networkd}
	if n, err := strconv.Atoi(filepath.Base(path)); err == nil && n > 0 {
		l.IfIndex = n
	}
	var (
		addr netip.Addr
		bits = -1
	)
	lineNo := 0
	for rest := data; len(rest) > 0; {
		lineNo++
		var line []byte
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			line, rest = rest, nil
		}
		bad := func(format string, args ...any) (Lease, error) {
			return Lease{}, fmt.Errorf("%s:%d: %s", path, lineNo, fmt.Sprintf(format, args...))
		}
		if bytes.IndexByte(line, 0) >= 0 {
			return bad("binary data (NUL byte)")
		}
		if !utf8.Valid(line) {
			return bad("binary data (not UTF-8)")
		}
		s := strings.TrimSpace(string(line))
		// systemd's env-file parser (env-file.c) treats lines starting with
		// '#' or ';' as comments; dhcp_lease_save starts the file with
		// "# This is private data. Do not parse.".
		if s == "" || s[0] == '#' || s[0] == ';' {
			continue
		}
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			return bad("not a KEY=VALUE line: %q", clip(s))
		}
		key := strings.TrimSpace(s[:eq])
		if !validEnvKey(key) {
			return bad("invalid key %q", clip(key))
		}
		val, err := envValue(strings.TrimSpace(s[eq+1:]))
		if err != nil {
			return bad("%s: %v", key, err)
		}
		// Keys not listed here (SERVER_ADDRESS, NTP, HOSTNAME, LIFETIME, T1,
		// T2, CLIENTID, ROUTES, OPTION_224, ...) carry nothing nodedns uses.
		// A repeated key overrides the earlier one, as in parse_env_file.
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
	if addr.IsValid() {
		if bits < 0 {
			// No NETMASK: claim only the address itself rather than invent a
			// subnet (systemd fills a classful mask on receipt, so a file
			// networkd wrote always has one).
			bits = 32
		}
		l.Address = netip.PrefixFrom(addr, bits)
	}
	return l, nil
}

// validEnvKey reports whether k is a shell-style variable name, the only kind
// of key dhcp_lease_save writes.
func validEnvKey(k string) bool {
	if k == "" {
		return false
	}
	for i, c := range k {
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// envValue undoes the quoting of systemd's env-file format (env-file.c
// parse_env_file_internal): a value in single quotes is literal, in double
// quotes a backslash escapes the next character, and unquoted a backslash
// escapes the next character too. dhcp_lease_save writes values unquoted,
// but an administrator's hand-edited file may quote them. Values spanning
// lines are not supported: networkd never writes them.
func envValue(s string) (string, error) {
	var b strings.Builder
	quote := byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				b.WriteByte(c)
			}
		case c == '\\':
			if i+1 >= len(s) {
				return "", fmt.Errorf("trailing backslash")
			}
			i++
			b.WriteByte(s[i])
		case quote == '"':
			if c == '"' {
				quote = 0
			} else {
				b.WriteByte(c)
			}
		case c == '"' || c == '\'':
			quote = c
		default:
			b.WriteByte(c)
		}
	}
	if quote != 0 {
		return "", fmt.Errorf("unterminated %c quote", quote)
	}
	return b.String(), nil
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
