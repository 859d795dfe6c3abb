package networkmanager

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Node paths NetworkManager 1.42 reads its configuration from (NetworkManager.conf(5); nm-config.c
// read_entire_config, 1.42.4).
const (
	// MainConfPath is the main file. nm-system-settings.conf beside it is read INSTEAD when it
	// exists and parses (a compatibility rule NM keeps since 0.9).
	MainConfPath    = "/etc/NetworkManager/NetworkManager.conf"
	OldMainConfPath = "/etc/NetworkManager/nm-system-settings.conf"
	// SystemConfDir, RunConfDir and EtcConfDir are the conf.d directories.
	SystemConfDir = "/usr/lib/NetworkManager/conf.d"
	RunConfDir    = "/run/NetworkManager/conf.d"
	EtcConfDir    = "/etc/NetworkManager/conf.d"
	// InternConfPath holds what was set over D-Bus (a global DNS configuration among others).
	InternConfPath = "/var/lib/NetworkManager/NetworkManager-intern.conf"
	// NodeDNSConfPath is the drop-in nodedns manages: named to sort last in /etc, whose files NM
	// reads last, so its keys win.
	NodeDNSConfPath = EtcConfDir + "/zz-nodedns.conf"
)

// Writes declares the node paths nodedns writes for NetworkManager (path.Match patterns): its
// drop-in, and the intern file, which nodedns edits when a global DNS set over D-Bus must go.
// node.Writes is the union of every mechanism's.
func Writes() []string { return []string{NodeDNSConfPath, InternConfPath} }

// Source is where an effective value came from: a file and line.
type Source struct {
	Path string
	Line int
}

func (s Source) String() string {
	if s.Line == 0 {
		return s.Path
	}
	return fmt.Sprintf("%s:%d", s.Path, s.Line)
}

// Value is one effective key: its raw value (as in the file, escapes not decoded) and the file and
// line it came from. A value extended with "key+=" names the file of the last extension.
type Value struct {
	Raw string
	Source
}

// Warning is something NM 1.42 ignores without failing: a key it drops, a file it skips.
type Warning struct {
	Source
	Msg string
}

func (w Warning) String() string { return w.Source.String() + ": " + w.Msg }

// Config is NetworkManager 1.42's configuration as it merges it: every conf.d file of
// /usr/lib/NetworkManager/conf.d whose name is in neither /run/NetworkManager/conf.d nor
// /etc/NetworkManager/conf.d, then those of /run whose name is not in /etc, then the main file,
// then /etc/NetworkManager/conf.d; each directory's *.conf files (hidden ones included) in strcmp
// order of their names. Later files win key by key. Measured with `NetworkManager --print-config`
// 1.42.4: its description line names the files in this order ("(lib: ...) (run: ...) (etc: ...)").
type Config struct {
	// MainFile is the main file read ("" when none exists).
	MainFile string
	// Files are the node paths read, in NM's order (the main file among them).
	Files []string
	// Warnings are keys and files NM ignores.
	Warnings []Warning
	// Intern is NetworkManager-intern.conf, nil when absent or unreadable (NM then starts with an
	// empty one; InternError says why).
	Intern      *KeyFile
	InternError error

	groups        []*mergedGroup
	groupIdx      map[string]*mergedGroup // name -> group, so that many files stay linear to merge
	lib, run, etc []string                // conf.d names NM read from each directory, for Description
}

// Description is the first line of `NetworkManager --print-config` without "# NetworkManager
// configuration: ": the main file, then the conf.d names NM read from each directory, e.g.
// "/etc/NetworkManager/NetworkManager.conf (lib: 10-a.conf) (etc: dns.conf, zz-nodedns.conf)".
func (c *Config) Description() string {
	main := c.MainFile
	if main == "" {
		main = MainConfPath
	}
	var b strings.Builder
	b.WriteString(main)
	for _, d := range []struct {
		name  string
		files []string
	}{{"lib", c.lib}, {"run", c.run}, {"etc", c.etc}} {
		if len(d.files) > 0 {
			fmt.Fprintf(&b, " (%s: %s)", d.name, strings.Join(d.files, ", "))
		}
	}
	return b.String()
}

type mergedGroup struct {
	name string
	keys []string
	vals map[string]Value
}

// LoadConfig reads NetworkManager's configuration from a node. A file NM 1.42 refuses (it would
// not start; Reload would keep the old configuration) gives a *ParseError and no Config. A
// missing directory or main file is fine.
func LoadConfig(fsys NodeFS) (*Config, error) {
	c := &Config{}
	lib, err := confNames(fsys, SystemConfDir)
	if err != nil {
		return nil, err
	}
	run, err := confNames(fsys, RunConfDir)
	if err != nil {
		return nil, err
	}
	etc, err := confNames(fsys, EtcConfDir)
	if err != nil {
		return nil, err
	}
	inEtc, inRun := nameSet(etc), nameSet(run)
	for _, n := range lib {
		if inEtc[n] || inRun[n] {
			continue
		}
		if err := c.readSnippet(fsys, path.Join(SystemConfDir, n)); err != nil {
			return nil, err
		}
		c.lib = append(c.lib, n)
	}
	for _, n := range run {
		if inEtc[n] {
			continue
		}
		if err := c.readSnippet(fsys, path.Join(RunConfDir, n)); err != nil {
			return nil, err
		}
		c.run = append(c.run, n)
	}
	if err := c.readMain(fsys); err != nil {
		return nil, err
	}
	for _, n := range etc {
		if err := c.readSnippet(fsys, path.Join(EtcConfDir, n)); err != nil {
			return nil, err
		}
		c.etc = append(c.etc, n)
	}
	data, err := fsys.ReadFile(InternConfPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		c.InternError = err
	default:
		// NM reads the intern file and rewrites it when it does not parse, so a bad one is no
		// error of the configuration.
		c.Intern, c.InternError = ParseKeyFile(InternConfPath, data)
	}
	return c, nil
}

// confNames lists a conf.d directory's *.conf names in strcmp order (_get_config_dir_files: the
// suffix is all NM checks; hidden files are read too).
func confNames(fsys NodeFS, dir string) ([]string, error) {
	names, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrNotRegular) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var out []string
	for _, n := range names {
		if strings.HasSuffix(n, ".conf") {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}

func (c *Config) readMain(fsys NodeFS) error {
	// nm-system-settings.conf first: a bad one is logged and skipped, then NetworkManager.conf.
	kf, err := readKeyFile(fsys, OldMainConfPath)
	switch {
	case err == nil:
		c.MainFile = OldMainConfPath
		c.merge(kf, true)
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		c.Warnings = append(c.Warnings, Warning{Source{Path: OldMainConfPath}, "skipped: " + err.Error()})
	}
	kf, err = readKeyFile(fsys, MainConfPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	}
	c.MainFile = MainConfPath
	c.merge(kf, true)
	return nil
}

func (c *Config) readSnippet(fsys NodeFS, p string) error {
	kf, err := readKeyFile(fsys, p)
	if errors.Is(err, fs.ErrNotExist) {
		// Listed but gone or a dangling symlink: NM's g_file_test fails and it refuses the
		// whole configuration ("file ... not found").
		return &ParseError{Path: p, Reason: "file " + p + " not found", bare: true}
	}
	if err != nil {
		return err
	}
	c.merge(kf, false)
	return nil
}

// readKeyFile reads and parses one file; read failures become *ParseError (NM cannot read it
// either) except a missing file.
func readKeyFile(fsys NodeFS, p string) (*KeyFile, error) {
	data, err := fsys.ReadFile(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, err
	case errors.Is(err, ErrNotRegular):
		return nil, &ParseError{Path: p, Reason: "Not a regular file"}
	case err != nil:
		return nil, &ParseError{Path: p, Reason: err.Error()}
	}
	return ParseKeyFile(p, data)
}

// Group and key names NM 1.42 gives a meaning in config files (nm-config-base.h).
const (
	groupConfig          = ".config"
	groupPrefixIntern    = ".intern."
	groupGlobalDNS       = "global-dns"
	groupPrefixDNSDomain = "global-dns-domain-"
)

// merge folds one file into the configuration as read_config does.
func (c *Config) merge(kf *KeyFile, base bool) {
	if !base && !c.snippetEnabled(kf) {
		return
	}
	c.Files = append(c.Files, kf.Path)
	for _, g := range kf.Groups {
		if g.Name == groupConfig || strings.HasPrefix(g.Name, groupPrefixIntern) {
			continue
		}
		for _, e := range g.Entries {
			key := e.Key
			if (strings.HasPrefix(key, ".was.") && len(key) > 5) || (strings.HasPrefix(key, ".set.") && len(key) > 5) || key == ".was" {
				continue // protected keys: NM ignores them in user files
			}
			src := Source{Path: kf.Path, Line: e.Line}
			if last := key[len(key)-1]; len(key) > 1 && (last == '+' || last == '-') {
				c.extend(g.Name, key[:len(key)-1], last, e.Value, src)
				continue
			}
			c.set(g.Name, key, Value{Raw: e.Value, Source: src})
		}
	}
}

// snippetEnabled is ignore_config_snippet: "[.config] enable=" turns a conf.d file off.
func (c *Config) snippetEnabled(kf *KeyFile) bool {
	e, ok := kf.Get(groupConfig, "enable")
	if !ok {
		return true
	}
	if v, ok := ParseBool(e.Value); ok {
		if !v {
			c.Warnings = append(c.Warnings, Warning{Source{kf.Path, e.Line}, "file ignored: [.config] enable=" + e.Value})
		}
		return v
	}
	// A match spec (nm-version:, nm-version-min:, env:): evaluated against NM's version and
	// NM_CONFIG_ENABLE_TAG at run time, which a file reader cannot know.
	c.Warnings = append(c.Warnings, Warning{Source{kf.Path, e.Line}, "[.config] enable=" + e.Value + " is a match spec nodedns does not evaluate: the file is taken as enabled"})
	return true
}

func (c *Config) group(name string, create bool) *mergedGroup {
	if g, ok := c.groupIdx[name]; ok {
		return g
	}
	if !create {
		return nil
	}
	g := &mergedGroup{name: name, vals: map[string]Value{}}
	c.groups = append(c.groups, g)
	if c.groupIdx == nil {
		c.groupIdx = map[string]*mergedGroup{}
	}
	c.groupIdx[name] = g
	return g
}

func nameSet(names []string) map[string]bool {
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	return set
}

func (c *Config) set(group, key string, v Value) {
	g := c.group(group, true)
	if _, ok := g.vals[key]; !ok {
		g.keys = append(g.keys, key)
	}
	g.vals[key] = v
}

// extend handles "key+=" and "key-=": only the string lists ([main] plugins and debug, [logging]
// domains) and device or connection specs can be extended; NM drops the key otherwise.
func (c *Config) extend(group, key string, op byte, raw string, src Source) {
	list := (group == "main" && (key == "plugins" || key == "debug")) || (group == "logging" && key == "domains")
	spec := (group == "main" && (key == "no-auto-default" || key == "ignore-carrier" || key == "assume-ipv6ll-only")) ||
		(group == "keyfile" && key == "unmanaged-devices") ||
		((strings.HasPrefix(group, "connection") || strings.HasPrefix(group, "device")) && key == "match-device") ||
		(strings.HasPrefix(group, "device") && key == "allowed-connections")
	if !list && !spec {
		c.Warnings = append(c.Warnings, Warning{src, fmt.Sprintf("[%s] %s%c= ignored: NetworkManager 1.42 extends only string lists and device specs", group, key, op)})
		return
	}
	var oldV, newV []string
	old, had := c.Get(group, key)
	if list {
		if had {
			oldV, _ = SplitList(old.Raw, ',')
		}
		newV, _ = SplitList(raw, ',')
	} else {
		if had {
			oldV = splitSpec(old.Raw)
		}
		newV = splitSpec(raw)
	}
	var merged []string
	for _, o := range oldV {
		if op != '-' || !slices.Contains(newV, o) {
			merged = append(merged, o)
		}
	}
	if op == '+' {
		for _, n := range newV {
			if !slices.Contains(oldV, n) {
				merged = append(merged, n)
			}
		}
	}
	var b strings.Builder
	for i, m := range merged {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(escapeValue(m, ','))
	}
	c.set(group, key, Value{Raw: b.String(), Source: src})
}

// splitSpec splits a device spec list as nm_match_spec_split does in the simple cases: on ',' and
// ';', items trimmed of whitespace, empty items dropped, "\," kept literal.
func splitSpec(raw string) []string {
	var out []string
	var b strings.Builder
	flush := func() {
		if s := strings.Trim(b.String(), asciiSpace); s != "" {
			out = append(out, s)
		}
		b.Reset()
	}
	for i := 0; i < len(raw); i++ {
		switch ch := raw[i]; {
		case ch == '\\' && i+1 < len(raw):
			i++
			b.WriteByte(raw[i])
		case ch == ',' || ch == ';':
			flush()
		default:
			b.WriteByte(ch)
		}
	}
	flush()
	return out
}

// Get returns the effective value of key in group.
func (c *Config) Get(group, key string) (Value, bool) {
	if g := c.group(group, false); g != nil {
		v, ok := g.vals[key]
		return v, ok
	}
	return Value{}, false
}

// Groups lists the groups that have at least one effective key, in the order they first got one.
func (c *Config) Groups() []string {
	out := make([]string, 0, len(c.groups))
	for _, g := range c.groups {
		out = append(out, g.name)
	}
	return out
}

// Keys lists a group's effective keys in the order they were first set.
func (c *Config) Keys(group string) []string {
	if g := c.group(group, false); g != nil {
		return append([]string(nil), g.keys...)
	}
	return nil
}

// DNSMode is [main] dns= as NM 1.42 reads it: "" when unset (NM then picks "default", or
// "systemd-resolved" when /etc/resolv.conf points at resolved's stub).
func (c *Config) DNSMode() (string, Source) { return c.mainWord("dns") }

// RCManager is [main] rc-manager= ("" when unset: NM 1.42 then uses "auto", which writes a
// regular /etc/resolv.conf as "file" does unless it is a symlink or immutable).
func (c *Config) RCManager() (string, Source) { return c.mainWord("rc-manager") }

// mainWord is a one-word [main] key as NM 1.42 reads it: unescaped, trimmed, lower case; "" when
// unset or not a valid value.
func (c *Config) mainWord(key string) (string, Source) {
	v, ok := c.Get("main", key)
	if !ok {
		return "", Source{}
	}
	s, err := UnescapeValue(v.Raw)
	if err != nil {
		return "", v.Source
	}
	return strings.ToLower(strings.Trim(s, asciiSpace)), v.Source
}

// GlobalDNS is a global DNS configuration as NM 1.42 builds it (nm-config-data.c load_global_dns):
// "[global-dns] searches= options=" and one "[global-dns-domain-NAME] servers= options=" per
// domain, NAME "*" being every name. While it has a "*" domain with servers, NM 1.42 writes ONLY
// its servers, its searches (and the host's own domain) to resolv.conf: no connection's or DHCP's
// servers or search domains (nm-dns-manager.c _collect_resolv_conf_data; measured on 1.42.4).
type GlobalDNS struct {
	// Internal: set over D-Bus (Manager.GlobalDnsConfiguration), stored in
	// NetworkManager-intern.conf; NM uses it only while no config file sets global DNS.
	Internal bool
	// Searches and Options after NM's clean-up (trimmed, empty and repeated items dropped; an
	// option that is not NAME or NAME:NUMBER dropped). Searches starting with "~" and empty ones
	// never reach resolv.conf.
	Searches, Options []string
	// SearchesFrom and OptionsFrom name the lines that set them (zero when unset).
	SearchesFrom, OptionsFrom Source
	// Domains sorted by name; a domain without one valid server is dropped.
	Domains []GlobalDNSDomain
}

// GlobalDNSDomain is one [global-dns-domain-NAME].
type GlobalDNSDomain struct {
	Name string
	// Servers are the valid addresses, as written (NM 1.42 keeps their text; it drops any item
	// that is not an IPv4 or IPv6 address).
	Servers     []string
	Options     []string
	ServersFrom Source
}

// Domain returns the domain named name.
func (g *GlobalDNS) Domain(name string) (GlobalDNSDomain, bool) {
	for _, d := range g.Domains {
		if d.Name == name {
			return d, true
		}
	}
	return GlobalDNSDomain{}, false
}

// Overrides reports whether the configuration replaces every connection's DNS in resolv.conf:
// it has a "*" domain (which has servers, or it would have been dropped).
func (g *GlobalDNS) Overrides() bool {
	if g == nil {
		return false
	}
	_, ok := g.Domain("*")
	return ok
}

// GlobalDNS returns the global DNS configuration NM 1.42 uses: the one of the config files when
// any of them has a key in [global-dns] or a [global-dns-domain-*] group, else the one set over
// D-Bus (NetworkManager-intern.conf); nil when there is none, or when its domains lack "*" (NM
// then ignores it whole).
func (c *Config) GlobalDNS() *GlobalDNS {
	if g, present := c.UserGlobalDNS(); present {
		return g
	}
	return c.InternGlobalDNS()
}

// UserGlobalDNS is the global DNS of the config files; present reports whether they have one at
// all (then NM ignores and drops the one set over D-Bus, even when this one is empty or
// ignored).
func (c *Config) UserGlobalDNS() (g *GlobalDNS, present bool) {
	get := func(group, key string) (string, Source, bool) {
		v, ok := c.Get(group, key)
		return v.Raw, v.Source, ok
	}
	return buildGlobalDNS(c.Groups(), get, groupGlobalDNS, groupPrefixDNSDomain, false)
}

// InternGlobalDNS is the global DNS set over D-Bus as NetworkManager-intern.conf stores it
// ([.intern.global-dns], [.intern.global-dns-domain-NAME]), whether or not NM uses it.
func (c *Config) InternGlobalDNS() *GlobalDNS {
	if c.Intern == nil {
		return nil
	}
	var names []string
	for _, g := range c.Intern.Groups {
		if len(g.Entries) > 0 {
			names = append(names, g.Name)
		}
	}
	get := func(group, key string) (string, Source, bool) {
		e, ok := c.Intern.Get(group, key)
		return e.Value, Source{Path: c.Intern.Path, Line: e.Line}, ok
	}
	g, _ := buildGlobalDNS(names, get, groupPrefixIntern+groupGlobalDNS, groupPrefixIntern+groupPrefixDNSDomain, true)
	return g
}

func buildGlobalDNS(groups []string, get func(group, key string) (string, Source, bool), main, domainPrefix string, internal bool) (*GlobalDNS, bool) {
	present := false
	for _, g := range groups {
		if g == main || strings.HasPrefix(g, domainPrefix) {
			present = true
		}
	}
	if !present {
		return nil, false
	}
	g := &GlobalDNS{Internal: internal}
	list := func(group, key string) ([]string, Source) {
		raw, src, ok := get(group, key)
		if !ok {
			return nil, Source{}
		}
		items, err := SplitList(raw, ',')
		if err != nil {
			return nil, src // NM: the key reads as absent
		}
		return cleanList(items), src
	}
	g.Searches, g.SearchesFrom = list(main, "searches")
	opts, src := list(main, "options")
	for _, o := range opts {
		if validDNSOption(o) {
			g.Options = append(g.Options, o)
		}
	}
	if len(g.Options) > 0 {
		g.OptionsFrom = src
	}
	hasStar := false
	for _, name := range groups {
		if !strings.HasPrefix(name, domainPrefix) || len(name) == len(domainPrefix) {
			continue
		}
		servers, src := list(name, "servers")
		var valid []string
		for _, s := range servers {
			if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
				valid = append(valid, s)
			}
		}
		if len(valid) == 0 {
			continue
		}
		d := GlobalDNSDomain{Name: name[len(domainPrefix):], Servers: valid, ServersFrom: src}
		d.Options, _ = list(name, "options")
		g.Domains = append(g.Domains, d)
		if d.Name == "*" {
			hasStar = true
		}
	}
	if len(g.Domains) > 0 && !hasStar {
		return nil, true // "global DNS configuration is missing default domain, ignore it"
	}
	sort.Slice(g.Domains, func(i, j int) bool { return g.Domains[i].Name < g.Domains[j].Name })
	return g, true
}

// validDNSOption is _nm_utils_dns_option_validate without a list of known options, as NM 1.42
// checks global DNS options: NAME, or NAME:DIGITS with a value up to 2^31-1.
func validDNSOption(o string) bool {
	name, value, hasValue := strings.Cut(o, ":")
	if name == "" {
		return false
	}
	if !hasValue {
		return true
	}
	if value == "" || strings.Trim(value, "0123456789") != "" {
		return false
	}
	n, err := strconv.ParseInt(value, 10, 64)
	return err == nil && n <= 1<<31-1
}
