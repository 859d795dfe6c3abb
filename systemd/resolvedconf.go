// Package systemd reads what systemd-resolved and systemd-networkd are
// configured with and what they serve.
//
// resolvedconf.go and linkstate.go read FILES only: resolved.conf with its
// drop-ins, and the per-link state files under /run; a D-Bus client can sit
// beside them. Every rule follows systemd 252 as shipped by Debian 12
// (252.39); where a rule was checked against the real systemd-resolved 252
// binary in a private namespace, the comment says "measured".
package systemd

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"strings"
	"syscall"

	"github.com/nodedns/nodedns/internal/nodefs"
)

// Node paths systemd-resolved 252 reads its configuration from.
const (
	// ResolvedConfPath is the main configuration file. systemd-resolved 252
	// reads only this one (PKGSYSCONFDIR "/resolved.conf" in resolved-conf.c);
	// the fallback to /usr/lib/systemd/resolved.conf came with
	// config_parse_config_file in a later release. `systemd-analyze cat-config`
	// 252 shows the /usr/lib file, but the daemon itself never reads it.
	ResolvedConfPath = "/etc/systemd/resolved.conf"

	// maxConfFileSize bounds what we read of one file. systemd's own bound is
	// LONG_LINE_MAX (1 MiB) per line; we skip whole files over it instead so
	// that a runaway file cannot make nodedns allocate without limit.
	maxConfFileSize = 1 << 20
)

// ResolvedDropinDirs are the drop-in directories, highest priority first:
// CONF_PATHS_NULSTR("systemd/resolved.conf.d") of systemd 252. Debian builds
// 252 with split-usr, so /lib/systemd/resolved.conf.d is read too (its path is
// in Debian's systemd-resolved 252.39 binary).
var ResolvedDropinDirs = []string{
	"/etc/systemd/resolved.conf.d",
	"/run/systemd/resolved.conf.d",
	"/usr/local/lib/systemd/resolved.conf.d",
	"/usr/lib/systemd/resolved.conf.d",
	"/lib/systemd/resolved.conf.d",
}

// Server is one DNS server entry as systemd-resolved parses it
// (in_addr_port_ifindex_name_from_string_auto in systemd 252):
// ADDR, ADDR:PORT, [V6]:PORT, then optionally %IFNAME and #SNI, in that order.
type Server struct {
	Addr netip.Addr // never zoned; the interface is in Iface
	// Port is the port as written, 0 when none. systemd-resolved treats 53
	// and 853 like no port (the transport picks 53, or 853 for DNS-over-TLS).
	Port  uint16
	Iface string // interface name or index after '%', as written
	SNI   string // server name after '#' (systemd 247+), used for DNS-over-TLS
	Raw   string // the word as written
}

// String formats the server the way systemd writes it (dns_server_string_full).
func (s Server) String() string {
	var b strings.Builder
	if s.Port != 0 && s.Addr.Is6() {
		fmt.Fprintf(&b, "[%s]:%d", s.Addr, s.Port)
	} else if s.Port != 0 {
		fmt.Fprintf(&b, "%s:%d", s.Addr, s.Port)
	} else {
		b.WriteString(s.Addr.String())
	}
	if s.Iface != "" {
		b.WriteString("%" + s.Iface)
	}
	if s.SNI != "" {
		b.WriteString("#" + s.SNI)
	}
	return b.String()
}

// Setting names the file and line a value came from.
type Setting struct {
	Path string // node path
	Line int
}

// String returns "path:line".
func (s Setting) String() string { return fmt.Sprintf("%s:%d", s.Path, s.Line) }

// Warning is a line or value that was skipped, or a file that was not read.
// Line is 0 when the warning is about a whole file.
type Warning struct {
	Path string // node path
	Line int
	Msg  string
}

// String returns "path:line: msg", or "path: msg" for a whole file.
func (w Warning) String() string {
	if w.Line == 0 {
		return fmt.Sprintf("%s: %s", w.Path, w.Msg)
	}
	return fmt.Sprintf("%s:%d: %s", w.Path, w.Line, w.Msg)
}

// ResolvedConfig is the [Resolve] configuration systemd-resolved 252 ends up
// with after reading the main file and its drop-ins.
type ResolvedConfig struct {
	DNS, FallbackDNS []Server
	Domains          []string // as written, "~" kept for routing-only
	// DNSSources lists the file:line of every DNS= assignment that the final
	// DNS list is built from: the last `DNS=` reset (if any) and each later
	// line that added a server. So nodedns can say
	// "kubespray.conf:2 sets DNS=169.254.25.10".
	DNSSources []Setting
	// DNSStubListener is the last valid DNSStubListener= value as written
	// ("" means unset, which is "yes").
	DNSStubListener string
	// DNSStubListenerExtra lists the extra stub listeners as written.
	DNSStubListenerExtra []string
	Files                []string  // node paths read, in order
	Warnings             []Warning // unparsable lines/values, skipped
	// Halted is set when systemd-resolved 252 would stop reading its
	// configuration: a bad section header, a line that is not UTF-8, an
	// unreadable file (measured: a 0600 drop-in, since resolved reads as the
	// systemd-resolve user). config_parse_many_files returns on the first
	// such error, so later lines and later files are never applied: a
	// zz-nodedns.conf sorted after a broken drop-in has no effect.
	// The parser applies nothing once Halted is set.
	Halted *Warning
}

// confKind bounds one configuration file. systemd's own bound is LONG_LINE_MAX (1 MiB) per line; we
// skip whole files over it instead so that a runaway file cannot make nodedns allocate without limit.
var confKind = nodefs.Kind{Name: "systemd-resolved configuration file", Max: maxConfFileSize}

// LoadResolvedConfig reads the main file and drop-ins of the node r reads, in the order
// systemd-resolved 252 does. Missing files are fine. Files over 1 MiB are skipped with a Warning.
func LoadResolvedConfig(r nodefs.Reader) *ResolvedConfig {
	cfg := &ResolvedConfig{}
	// One parser for every file: its indexes over cfg's lists are built once, so 20,000 drop-ins
	// stay linear to read (rebuilding them for each file was quadratic).
	p := newConfParser(cfg)
	p.load(r, ResolvedConfPath)

	// conf_files_list_nulstr (conf-files.c): a file name found in an earlier directory hides the same
	// name in later ones (an empty file or a /dev/null symlink therefore masks it); the survivors are
	// sorted by file name alone, whatever their directory. Hidden files are skipped
	// (FOREACH_DIRENT / hidden_or_backup_file). That is nodefs.DropIns; resolved lists the directories
	// as the systemd-resolve user and ignores one it cannot list (conf_files_list logs and goes on;
	// measured with a 0700 directory), so those are left out first.
	var dirs []string
	for _, dir := range ResolvedDropinDirs {
		fi, err := r.Stat(dir)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
				cfg.warnFile(dir, fmt.Sprintf("skipped: %v", errors.Unwrap(err)))
			}
			continue
		}
		if !fi.IsDir() {
			continue
		}
		if fi.Mode().Perm()&0o005 != 0o005 {
			cfg.warnFile(dir, fmt.Sprintf("not readable by the systemd-resolve user (mode %04o): systemd-resolved 252 ignores this directory", fi.Mode().Perm()))
			continue
		}
		dirs = append(dirs, dir)
	}
	dropins, errs := nodefs.DropIns(r, dirs, ".conf")
	for _, err := range errs {
		cfg.warnFile("", fmt.Sprintf("skipped: %v", err))
	}
	for _, d := range dropins {
		if cfg.Halted != nil {
			at := cfg.Halted.Path
			if cfg.Halted.Line > 0 {
				at = fmt.Sprintf("%s:%d", at, cfg.Halted.Line)
			}
			cfg.warnFile(d.Path, "not read: systemd-resolved 252 stopped reading its configuration at "+at)
			continue
		}
		p.load(r, d.Path)
	}
	return cfg
}

// load reads one node file and applies it, as config_parse does.
func (p *confParser) load(r nodefs.Reader, nodePath string) {
	cfg := p.cfg
	data, err := readConf(r, nodePath)
	switch {
	case err == nil:
	case errors.Is(err, fs.ErrNotExist):
		// config_parse: ENOENT is not an error (a dangling symlink too).
		return
	case errors.Is(err, nodefs.ErrTooLarge):
		cfg.warnFile(nodePath, fmt.Sprintf("skipped: larger than %d bytes", maxConfFileSize))
		return
	default:
		// Any other open or read error makes config_parse fail, and resolved stops reading
		// (measured with a 0600 drop-in, and with a directory named like a drop-in: "Is a
		// directory").
		cfg.halt(nodePath, 0, errors.Unwrap(err).Error())
		return
	}
	cfg.Files = append(cfg.Files, nodePath)
	p.file(nodePath, data)
}

// readConf reads one configuration file as the systemd-resolve user would: resolved reads its
// configuration unprivileged (measured with a 0600 drop-in), so a regular file without
// the "other" read bit is an error, as is a directory ("is a directory", as resolved says).
func readConf(r nodefs.Reader, nodePath string) ([]byte, error) {
	fi, err := r.Stat(nodePath)
	if err == nil && fi.IsDir() {
		return nil, fmt.Errorf("read %s: %w", nodePath, errors.New("is a directory"))
	}
	if err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o004 == 0 {
		return nil, fmt.Errorf("read %s: %w", nodePath, fmt.Errorf("not readable by the systemd-resolve user (mode %04o)", fi.Mode().Perm()))
	}
	return r.ReadFile(nodePath, confKind)
}

// LoadResolvedViews reads resolved's configuration as LoadResolvedConfig does (all), and two views
// of it: without the file own (others: what the rest of the node asks for), and without anything
// under /run (persistent: what survives a reboot). The views are rebuilt from all's files in the
// same order, so "what would resolved use without X" needs no second directory walk; their
// Warnings are empty (all has every file's).
func LoadResolvedViews(r nodefs.Reader, own string) (all, others, persistent *ResolvedConfig) {
	all = LoadResolvedConfig(r)
	others = reparse(r, all.Files, func(p string) bool { return p == own })
	persistent = reparse(r, all.Files, func(p string) bool { return strings.HasPrefix(p, "/run/") })
	return all, others, persistent
}

// reparse rebuilds a resolved configuration from the files paths, in order, minus those skip
// selects, with one parser for all of them: linear in their number.
func reparse(r nodefs.Reader, paths []string, skip func(string) bool) *ResolvedConfig {
	cfg := &ResolvedConfig{}
	p := newConfParser(cfg)
	for _, path := range paths {
		if skip(path) {
			continue
		}
		data, err := r.ReadFile(path, confKind)
		if err != nil {
			continue // already reported by the first load
		}
		p.file(path, data)
		cfg.Files = append(cfg.Files, path)
	}
	cfg.Warnings = nil
	return cfg
}

// confParser applies files to one ResolvedConfig. Only the parser changes cfg's lists, so its
// indexes over them, built once, stay true from one file to the next.
type confParser struct {
	cfg  *ResolvedConfig
	path string
	// Indexes over cfg's lists, so that a long list stays linear to build.
	dnsIdx, fallbackIdx serverSet
	domainIdx           map[string]int // normalized name -> index in cfg.Domains
	extraIdx            map[string]struct{}
}

func newConfParser(cfg *ResolvedConfig) *confParser {
	p := &confParser{cfg: cfg,
		dnsIdx: newServerSet(cfg.DNS), fallbackIdx: newServerSet(cfg.FallbackDNS),
		domainIdx: map[string]int{}, extraIdx: map[string]struct{}{}}
	for i, d := range cfg.Domains {
		if k, err := normalizeDomain(domainName(d)); err == nil {
			p.domainIdx[k] = i
		}
	}
	for _, e := range cfg.DNSStubListenerExtra {
		p.extraIdx[e] = struct{}{}
	}
	return p
}

// file applies one file's bytes; each file starts outside any section, as config_parse does.
func (p *confParser) file(path string, data []byte) {
	if p.cfg.Halted != nil {
		return
	}
	p.path = path
	p.run(data)
}

// run reads one file's lines as config_parse does with resolved's one section, [Resolve].
func (p *confParser) run(data []byte) {
	parseConf(data, []string{"Resolve"}, func(a confAssignment) bool {
		p.assign(a.last, a.key, a.value)
		return true
	}, func(i confIssue) {
		if i.fatal() {
			p.cfg.halt(p.path, i.last, i.String())
			return
		}
		p.cfg.warn(p.path, i.last, i.String())
	})
}

// assign applies one [Resolve] assignment (resolved-gperf.gperf, 252).
func (p *confParser) assign(line int, key, value string) {
	cfg := p.cfg
	switch key {
	case "DNS":
		if value == "" {
			// config_parse_dns_servers: an empty assignment clears the list.
			cfg.DNS = nil
			p.dnsIdx = newServerSet(nil)
			cfg.DNSSources = []Setting{{p.path, line}}
			return
		}
		if p.addServers(&cfg.DNS, p.dnsIdx, line, value) {
			cfg.DNSSources = append(cfg.DNSSources, Setting{p.path, line})
		}
	case "FallbackDNS":
		if value == "" {
			cfg.FallbackDNS = nil
			p.fallbackIdx = newServerSet(nil)
			return
		}
		p.addServers(&cfg.FallbackDNS, p.fallbackIdx, line, value)
	case "Domains":
		if value == "" {
			cfg.Domains = nil
			p.domainIdx = map[string]int{}
			return
		}
		p.addDomains(line, value)
	case "DNSStubListener":
		// config_parse_dns_stub_listener_mode: empty means the default (yes);
		// otherwise a boolean, "udp" or "tcp".
		if value != "" && value != "udp" && value != "tcp" {
			if _, ok := parseBoolean(value); !ok {
				cfg.warn(p.path, line, fmt.Sprintf("failed to parse DNS stub listener mode %q, ignoring", value))
				return
			}
		}
		cfg.DNSStubListener = value
	case "DNSStubListenerExtra":
		if value == "" {
			cfg.DNSStubListenerExtra = nil
			p.extraIdx = map[string]struct{}{}
			return
		}
		// [udp:|tcp:]ADDRESS[:PORT][%IFNAME][#NAME] (config_parse_dns_stub_listener_extra).
		addr := strings.TrimPrefix(strings.TrimPrefix(value, "udp:"), "tcp:")
		if _, err := parseServer(addr); err != nil {
			cfg.warn(p.path, line, fmt.Sprintf("failed to parse address in DNSStubListenerExtra=%s, ignoring: %v", value, err))
			return
		}
		if _, dup := p.extraIdx[value]; dup {
			return
		}
		p.extraIdx[value] = struct{}{}
		cfg.DNSStubListenerExtra = append(cfg.DNSStubListenerExtra, value)
	case "LLMNR", "MulticastDNS", "DNSSEC", "DNSOverTLS", "Cache",
		"ReadEtcHosts", "ResolveUnicastSingleLabel", "CacheFromLocalhost":
		// Known to 252, not needed by nodedns.
	default:
		if !strings.HasPrefix(key, "X-") {
			cfg.warn(p.path, line, fmt.Sprintf("unknown key %q in section [Resolve], ignoring", key))
		}
	}
}

// addServers is manager_parse_dns_server_string_and_warn: each word is added
// or skipped on its own. It reports whether any server was added.
func (p *confParser) addServers(list *[]Server, seen serverSet, line int, value string) bool {
	words, err := splitWords(value, 0)
	if err != nil {
		// Words before the bad one are kept, as resolved adds as it goes.
		p.cfg.warn(p.path, line, fmt.Sprintf("failed to parse DNS server string %q, ignoring the rest: %v", value, err))
	}
	added := false
	for _, w := range words {
		s, err := parseServer(w)
		if err != nil {
			p.cfg.warn(p.path, line, fmt.Sprintf("failed to add DNS server address %q, ignoring: %v", w, err))
			continue
		}
		// dns_server_address_valid: resolved silently drops 0.0.0.0, :: and
		// its own stub addresses; we say so, as it is never what was meant.
		if !serverAddrValid(s.Addr) {
			p.cfg.warn(p.path, line, fmt.Sprintf("DNS server address %q is dropped by systemd-resolved (unspecified address or its own stub), ignoring", w))
			continue
		}
		if !seen.add(s) {
			// dns_server_find: a duplicate keeps the first one's place
			// (measured: "1.1.1.1 8.8.8.8 1.1.1.1:53" gives 1.1.1.1, 8.8.8.8).
			continue
		}
		*list = append(*list, s)
		added = true
	}
	return added
}

// addDomains is manager_parse_search_domains_and_warn (252): words are
// unquoted; a bad name is skipped on its own (measured).
func (p *confParser) addDomains(line int, value string) {
	words, err := splitWords(value, exUnquote)
	if err != nil {
		p.cfg.warn(p.path, line, fmt.Sprintf("failed to parse search domains string %q, ignoring the rest: %v", value, err))
	}
	for _, w := range words {
		name := strings.TrimPrefix(w, "~")
		if name == "*" || isRootDomain(name) {
			name = "." // "~", "*", "." and "~." all mean the routing-only root
		}
		key, err := normalizeDomain(name)
		if err != nil {
			p.cfg.warn(p.path, line, fmt.Sprintf("failed to add search domain %q, ignoring: %v", w, err))
			continue
		}
		if i, ok := p.domainIdx[key]; ok {
			// dns_search_domain_find: the entry keeps its place and takes
			// the routing-only flag of the latest mention (measured:
			// "example.org ~example.org Example.ORG." gives a search
			// domain).
			p.cfg.Domains[i] = w
			continue
		}
		p.domainIdx[key] = len(p.cfg.Domains)
		p.cfg.Domains = append(p.cfg.Domains, w)
	}
}

// domainName strips the routing-only marker and maps the root spellings.
func domainName(written string) string {
	n := strings.TrimPrefix(written, "~")
	if n == "*" || isRootDomain(n) {
		return "."
	}
	return n
}

func (c *ResolvedConfig) warn(path string, line int, msg string) {
	c.Warnings = append(c.Warnings, Warning{Path: path, Line: line, Msg: msg})
}

func (c *ResolvedConfig) warnFile(path, msg string) { c.warn(path, 0, msg) }

func (c *ResolvedConfig) halt(path string, line int, msg string) {
	w := Warning{Path: path, Line: line, Msg: msg + "; systemd-resolved 252 stops reading its configuration here"}
	c.Warnings = append(c.Warnings, w)
	c.Halted = &w
}

// parseBoolean is systemd's parse_boolean.
func parseBoolean(v string) (bool, bool) {
	switch strings.ToLower(v) {
	case "1", "yes", "y", "true", "t", "on":
		return true, true
	case "0", "no", "n", "false", "f", "off":
		return false, true
	}
	return false, false
}

// parseServer parses one DNS server word like systemd 252's
// in_addr_port_ifindex_name_from_string_auto (socket-netlink.c): the server
// name after the first '#', then the interface after the first '%', then the
// port after the last ':' ("[V6]:PORT", or "V4:PORT" when the whole is not a
// bare IPv6 address). "[::1]" without a port is invalid (measured).
func parseServer(word string) (Server, error) {
	s := Server{Raw: word}
	rest := word
	if i := strings.IndexByte(rest, '#'); i >= 0 {
		if i+1 == len(rest) {
			return Server{}, errors.New("empty server name after '#'")
		}
		s.SNI = rest[i+1:]
		rest = rest[:i]
	}
	if i := strings.IndexByte(rest, '%'); i >= 0 {
		ifn := rest[i+1:]
		if !ifnameValid(ifn) {
			return Server{}, fmt.Errorf("invalid interface name %q", ifn)
		}
		s.Iface = ifn
		rest = rest[:i]
	}
	if i := strings.LastIndexByte(rest, ':'); i >= 0 {
		if rest[0] == '[' {
			if i < 2 || rest[i-1] != ']' {
				return Server{}, errors.New("invalid bracketed IPv6 address")
			}
			port, err := parseIPPort(rest[i+1:])
			if err != nil {
				return Server{}, err
			}
			a, ok := parseAddrFamily(rest[1:i-1], true)
			if !ok {
				return Server{}, fmt.Errorf("invalid IPv6 address %q", rest[1:i-1])
			}
			s.Addr, s.Port = a, port
			return s, nil
		}
		if a, ok := parseAddrFamily(rest, true); ok {
			s.Addr = a
			return s, nil
		}
		a, ok := parseAddrFamily(rest[:i], false)
		if !ok {
			return Server{}, fmt.Errorf("invalid address %q", rest)
		}
		port, err := parseIPPort(rest[i+1:])
		if err != nil {
			return Server{}, err
		}
		s.Addr, s.Port = a, port
		return s, nil
	}
	a, ok := parseAddrFamily(rest, false)
	if !ok {
		return Server{}, fmt.Errorf("invalid address %q", rest)
	}
	s.Addr = a
	return s, nil
}

// parseAddrFamily is inet_pton for one family. netip rejects leading zeros in
// IPv4 octets as glibc's inet_pton does; zones never reach it ('%' is split
// off before).
func parseAddrFamily(s string, v6 bool) (netip.Addr, bool) {
	if strings.ContainsRune(s, '%') {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Is6() != v6 {
		return netip.Addr{}, false
	}
	return a, true
}

// parseIPPort is systemd's parse_ip_port: safe_atou16 with base 0 semantics
// (measured: ":0x35" is 53, ":053" is octal 43, ":+54" is 54), and not 0.
func parseIPPort(s string) (uint16, error) {
	v, ok := parseCUint(s)
	if !ok || v > 0xffff {
		return 0, fmt.Errorf("invalid port %q", s)
	}
	if v == 0 {
		return 0, errors.New("port 0 is not allowed")
	}
	return uint16(v), nil
}

// parseCUint parses like strtoul with base 0 after systemd's mangle_base:
// an optional '+', then 0x/0X hex, 0o/0O or a leading 0 octal, 0b/0B binary,
// else decimal. The whole string must be consumed.
func parseCUint(s string) (uint64, bool) {
	s = strings.TrimPrefix(s, "+")
	base := uint64(10)
	switch {
	case len(s) > 2 && (s[:2] == "0x" || s[:2] == "0X"):
		base, s = 16, s[2:]
	case len(s) > 2 && (s[:2] == "0o" || s[:2] == "0O"):
		base, s = 8, s[2:]
	case len(s) > 2 && (s[:2] == "0b" || s[:2] == "0B"):
		base, s = 2, s[2:]
	case len(s) > 1 && s[0] == '0':
		base, s = 8, s[1:]
	}
	if s == "" {
		return 0, false
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		var d uint64
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			d = uint64(c - '0')
		case c >= 'a' && c <= 'f':
			d = uint64(c-'a') + 10
		case c >= 'A' && c <= 'F':
			d = uint64(c-'A') + 10
		default:
			return 0, false
		}
		if d >= base {
			return 0, false
		}
		v = v*base + d
		if v > 1<<32 {
			return 0, false
		}
	}
	return v, true
}

// ifnameValid is ifname_valid_full(IFNAME_VALID_ALTERNATIVE|IFNAME_VALID_NUMERIC)
// of systemd 252: a positive index, or 1..127 printable ASCII bytes other than
// ':', '/', '%', not "." or "..", and not all digits.
func ifnameValid(s string) bool {
	if s == "" {
		return false
	}
	if n, ok := parseIfindex(s); ok && n > 0 {
		return true
	}
	if len(s) >= 128 || s == "." || s == ".." {
		return false
	}
	numeric := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 127 || c <= 32 || c == ':' || c == '/' || c == '%' {
			return false
		}
		if c < '0' || c > '9' {
			numeric = false
		}
	}
	return !numeric
}

// parseIfindex parses an interface index the way parse_ifindex does (safe_atoi,
// so base-0 prefixes apply: "010" is 8, measured). ok is false when s is not a
// positive number.
func parseIfindex(s string) (int, bool) {
	v, ok := parseCUint(s)
	if !ok || v == 0 || v > 1<<31-1 {
		return 0, false
	}
	return int(v), true
}

// serverAddrValid is dns_server_address_valid (252): not unspecified and not
// resolved's own stubs 127.0.0.53 / 127.0.0.54.
func serverAddrValid(a netip.Addr) bool {
	return a.IsValid() && !a.IsUnspecified() && !IsStub(a)
}

// IsStub reports whether a is one of systemd-resolved's own listeners: the stub 127.0.0.53 or the
// proxy 127.0.0.54 (252). resolved never uses them as servers, and a resolv.conf that lists them
// sends its reader through resolved. An IPv4-mapped IPv6 form counts too.
func IsStub(a netip.Addr) bool {
	a = a.Unmap()
	return a == netip.AddrFrom4([4]byte{127, 0, 0, 53}) || a == netip.AddrFrom4([4]byte{127, 0, 0, 54})
}

// serverSet finds duplicates as dns_server_find does: same address, port (53
// and 853 count as none), interface and server name.
type serverSet map[Server]struct{}

func newServerSet(list []Server) serverSet {
	set := serverSet{}
	for _, s := range list {
		set.add(s)
	}
	return set
}

// add reports whether s was new.
func (set serverSet) add(s Server) bool {
	k := Server{Addr: s.Addr, Port: normPort(s.Port), Iface: s.Iface, SNI: s.SNI}
	if _, ok := set[k]; ok {
		return false
	}
	set[k] = struct{}{}
	return true
}

func normPort(p uint16) uint16 {
	if p == 53 || p == 853 {
		return 0
	}
	return p
}

// isRootDomain is dns_name_is_root: "" and "." both name the root.
func isRootDomain(n string) bool { return n == "" || n == "." }

// normalizeDomain validates a DNS name like dns_name_normalize (dns-domain.c)
// and returns a comparison key (lowercase, no trailing dot). Labels are
// separated by unescaped dots, may use \C and \DDD escapes, must be 1..63
// bytes and free of control characters; the whole name is at most 253 bytes.
func normalizeDomain(name string) (string, error) {
	if name == "." {
		return ".", nil
	}
	if name == "" {
		return "", errors.New("empty domain name")
	}
	var labels []string
	var cur []byte
	total := 0
	flush := func() error {
		if len(cur) == 0 {
			return errors.New("empty label")
		}
		if len(cur) > 63 {
			return errors.New("label longer than 63 bytes")
		}
		total += len(cur) + 1
		labels = append(labels, strings.ToLower(string(cur)))
		cur = cur[:0]
		return nil
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '.':
			if err := flush(); err != nil {
				return "", err
			}
		case c == '\\':
			if i+1 >= len(name) {
				return "", errors.New("trailing backslash")
			}
			n := name[i+1]
			if n >= '0' && n <= '9' {
				if i+3 >= len(name) {
					return "", errors.New("short \\DDD escape")
				}
				d1, d2, d3 := name[i+1], name[i+2], name[i+3]
				if d2 < '0' || d2 > '9' || d3 < '0' || d3 > '9' {
					return "", errors.New("bad \\DDD escape")
				}
				v := int(d1-'0')*100 + int(d2-'0')*10 + int(d3-'0')
				if v > 255 {
					return "", errors.New("bad \\DDD escape")
				}
				cur = append(cur, byte(v))
				i += 3
			} else {
				if n < ' ' || n == 0x7f {
					return "", errors.New("control character in domain name")
				}
				cur = append(cur, n)
				i++
			}
		case c < ' ' || c == 0x7f:
			return "", errors.New("control character in domain name")
		default:
			cur = append(cur, c)
		}
	}
	if len(cur) > 0 {
		if err := flush(); err != nil {
			return "", err
		}
	}
	if total > 253+1 {
		return "", errors.New("domain name longer than 253 bytes")
	}
	return strings.Join(labels, "."), nil
}
