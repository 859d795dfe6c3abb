package systemd

// dnsdelegate.go reads systemd-resolved's DNS delegates (systemd 258 and later,
// systemd.dns-delegate(5)): files NAME.dns-delegate with a [Delegate] section whose DNS=, Domains=
// and DefaultRoute= make a scope of their own, next to the global one and the links'. A delegate
// with Domains=~. and DefaultRoute=yes takes every host lookup, whatever resolved.conf says
// (docs/contract.md "systemd-resolved 258 and later: DNS delegates").
//
// The rules follow resolved-dns-delegate.c of systemd 258+ and were checked against the real
// systemd-resolved 262 of Debian testing in a private namespace where the comment says "measured".

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/nodedns/nodedns/internal/nodefs"
)

// DNSDelegateDirs are where resolved 258+ looks for NAME.dns-delegate files, highest priority
// first: CONF_PATHS("systemd/dns-delegate.d"). A file in an earlier directory masks the same name
// in later ones (conf_files_list); a symlink to /dev/null, or an empty file, masks it for good.
var DNSDelegateDirs = []string{
	"/etc/systemd/dns-delegate.d",
	"/run/systemd/dns-delegate.d",
	"/usr/local/lib/systemd/dns-delegate.d",
	"/usr/lib/systemd/dns-delegate.d",
}

// DNSDelegateSuffix ends every delegate file's name; the name before it is the delegate's id.
const DNSDelegateSuffix = ".dns-delegate"

// dnsDelegatesMax is DNS_DELEGATES_MAX: resolved loads no more delegates than this.
const dnsDelegatesMax = 4096

// DNSDelegate is one delegate as resolved 258+ loads it: the main file, then its drop-ins
// (ID.dns-delegate.d/*.conf in every delegate directory, ordered by name as systemd orders
// drop-ins), each applied on top of the last.
type DNSDelegate struct {
	ID    string
	Path  string   // node path of the main file
	Files []string // node paths read: the main file, then its drop-ins
	Data  [][]byte // the bytes of each of Files
	DNS   []Server
	// DNSSources[i] is the file and line that set DNS[i], so a check can name the line to fix.
	DNSSources []Setting
	Domains    []string // as written, "~" kept for routing-only
	// DefaultRoute is the last valid DefaultRoute= value ("" when unset: resolved then decides by
	// the delegate's domains, as for a link).
	DefaultRoute string
	// Foreign names each of Files another user could have written, with why (nodedns.CheckTrusted:
	// the file, or a directory on the way, is not root's or is writable by others). resolved loads
	// it all the same; nodedns neither edits nor copies it (docs/contract.md "systemd-resolved 258 and
	// later: DNS delegates").
	Foreign map[string]string
}

// DNSDelegates is every delegate resolved would load, in file name order.
type DNSDelegates struct {
	Delegates []DNSDelegate
	// Masked are the node paths of delegate files hidden by a /dev/null symlink or an empty file.
	Masked   []string
	Warnings []Warning // unparsable lines, skipped files, delegates resolved refuses to load
}

var delegateKind = nodefs.Kind{Name: "systemd-resolved DNS delegate", Max: maxConfFileSize}

// LoadDNSDelegates lists and parses the delegates of the node r reads, as resolved 258+ does at
// start (manager_load_delegates). Missing directories are fine.
func LoadDNSDelegates(r nodefs.Reader) *DNSDelegates {
	out := &DNSDelegates{}
	files, errs := nodefs.DropIns(r, DNSDelegateDirs, DNSDelegateSuffix)
	for _, err := range errs {
		out.Warnings = append(out.Warnings, Warning{Msg: fmt.Sprintf("skipped: %v", err)})
	}
	for _, f := range files {
		if masked(r, f.Path) {
			out.Masked = append(out.Masked, f.Path)
			continue
		}
		if len(out.Delegates) >= dnsDelegatesMax {
			out.Warnings = append(out.Warnings, Warning{Path: f.Path, Msg: fmt.Sprintf("not loaded: systemd-resolved loads at most %d delegates", dnsDelegatesMax)})
			continue
		}
		id := strings.TrimSuffix(f.Name, DNSDelegateSuffix)
		if !stringIsSafe(id) {
			// dns_delegate_load refuses "weird characters" in the name.
			out.Warnings = append(out.Warnings, Warning{Path: f.Path, Msg: "not loaded: systemd-resolved refuses a delegate file name with quotes, backslashes or control characters"})
			continue
		}
		d := DNSDelegate{ID: id, Path: f.Path}
		var ws []Warning
		ok := true
		for _, p := range append([]string{f.Path}, delegateDropIns(r, id, &ws)...) {
			data, err := readDelegateFile(r, p)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				// config_parse_many fails on an unreadable file: the delegate is not loaded.
				cause := errors.Unwrap(err)
				if cause == nil {
					cause = err
				}
				ws = append(ws, Warning{Path: p, Msg: fmt.Sprintf("%v; systemd-resolved does not load delegate %q", cause, id)})
				ok = false
				break
			}
			d.Files = append(d.Files, p)
			d.Data = append(d.Data, data)
			if err := nodefs.CheckTrusted(r, p); err != nil {
				if d.Foreign == nil {
					d.Foreign = map[string]string{}
				}
				d.Foreign[p] = err.Error()
			}
			fw, fatal := ParseDNSDelegate(&d, p, data)
			ws = append(ws, fw...)
			if fatal {
				ok = false
				break
			}
		}
		out.Warnings = append(out.Warnings, ws...)
		if ok {
			out.Delegates = append(out.Delegates, d)
		}
	}
	return out
}

// masked reports whether p is a /dev/null symlink or an empty file, which resolved skips.
func masked(r nodefs.Reader, p string) bool {
	fi, err := r.Lstat(p)
	if err != nil {
		return false
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		t, err := r.Readlink(p)
		return err == nil && path.Clean(t) == "/dev/null"
	}
	return fi.Mode().IsRegular() && fi.Size() == 0
}

// delegateDropIns lists ID.dns-delegate.d/*.conf over all delegate directories.
func delegateDropIns(r nodefs.Reader, id string, ws *[]Warning) []string {
	var dirs []string
	for _, d := range DNSDelegateDirs {
		dirs = append(dirs, DNSDelegateDropInDir(d, id))
	}
	dropins, errs := nodefs.DropIns(r, dirs, ".conf")
	for _, err := range errs {
		*ws = append(*ws, Warning{Msg: fmt.Sprintf("skipped: %v", err)})
	}
	var out []string
	for _, d := range dropins {
		if !masked(r, d.Path) {
			out = append(out, d.Path)
		}
	}
	return out
}

// DNSDelegateDropInDir is the drop-in directory of delegate id in the delegate directory dir.
func DNSDelegateDropInDir(dir, id string) string {
	return path.Join(dir, id+DNSDelegateSuffix+".d")
}

func readDelegateFile(r nodefs.Reader, p string) ([]byte, error) {
	fi, err := r.Stat(p)
	if err == nil && fi.IsDir() {
		return nil, fmt.Errorf("read %s: %w", p, errors.New("is a directory"))
	}
	return r.ReadFile(p, delegateKind)
}

// ParseDNSDelegate applies one file's bytes on top of d, as config_parse does with the [Delegate]
// section of resolved 258+. It returns the lines it skipped, and fatal when resolved would refuse
// to load the delegate at all (a bad section header, a line that is not UTF-8): config_parse_many
// then fails and dns_delegate_load drops the delegate.
func ParseDNSDelegate(d *DNSDelegate, path string, data []byte) (warnings []Warning, fatal bool) {
	if d == nil {
		return nil, false
	}
	p := &delegateParser{d: d, path: path}
	p.dnsIdx = serverSet{}
	for _, s := range d.DNS {
		p.dnsIdx.add(s)
	}
	p.run(data)
	return p.warnings, p.fatal
}

type delegateParser struct {
	d        *DNSDelegate
	path     string
	dnsIdx   serverSet
	warnings []Warning
	fatal    bool
}

func (p *delegateParser) warn(line int, msg string) {
	p.warnings = append(p.warnings, Warning{Path: p.path, Line: line, Msg: msg})
}

// run reads one file's lines as config_parse does with the delegate's one section, [Delegate]: a
// fatal line makes resolved drop the delegate (dns_delegate_load fails).
func (p *delegateParser) run(data []byte) {
	parseConf(data, []string{"Delegate"}, p.assign, func(i confIssue) {
		if i.fatal() {
			p.warn(i.last, i.String()+"; systemd-resolved does not load this delegate")
			p.fatal = true
			return
		}
		p.warn(i.last, i.String())
	})
}

// assign applies one [Delegate] assignment.
func (p *delegateParser) assign(a confAssignment) bool {
	line, key, value := a.last, a.key, a.value
	switch key {
	case "DNS":
		p.dns(line, value)
	case "Domains":
		if value == "" {
			p.d.Domains = nil
			return true
		}
		// config_parse_delegate_domains: words without unquoting; "~", "*" and "." all mean the
		// routing-only root.
		words, err := splitWords(value, 0)
		if err != nil {
			p.warn(line, fmt.Sprintf("failed to parse search domains string %q, ignoring the rest: %v", value, err))
		}
		for _, w := range words {
			key, err := normalizeDomain(domainName(w))
			if err != nil {
				p.warn(line, fmt.Sprintf("failed to add search domain %q, ignoring: %v", w, err))
				continue
			}
			found := false
			for i, x := range p.d.Domains {
				if k, _ := normalizeDomain(domainName(x)); k == key {
					p.d.Domains[i], found = w, true
					break
				}
			}
			if !found {
				p.d.Domains = append(p.d.Domains, w)
			}
		}
	case "DefaultRoute":
		if value == "" {
			p.d.DefaultRoute = ""
			return true
		}
		if _, ok := parseBoolean(value); !ok {
			p.warn(line, fmt.Sprintf("failed to parse DefaultRoute=%s, ignoring", value))
			return true
		}
		p.d.DefaultRoute = value
	case "FirewallMark":
		// Known to resolved 262 (the mark its queries to the delegate's servers carry); not needed.
	default:
		if !strings.HasPrefix(key, "X-") {
			p.warn(line, fmt.Sprintf("unknown key %q in section [Delegate], ignoring", key))
		}
	}
	return true
}

// dns is config_parse_delegate_dns_servers: an empty value clears the list; otherwise each word
// is a server as for resolved.conf's DNS=, 0.0.0.0, :: and resolved's own stubs are dropped
// silently, and a server already listed keeps its place. (Early 258 sources returned at a duplicate,
// dropping the rest of the line; resolved 262 reads on: measured, "DNS=192.0.2.1 192.0.2.1:53
// 169.254.25.10" serves 192.0.2.1 and 169.254.25.10.)
func (p *delegateParser) dns(line int, value string) {
	if value == "" {
		p.d.DNS, p.d.DNSSources = nil, nil
		p.dnsIdx = serverSet{}
		return
	}
	words, err := splitWords(value, 0)
	if err != nil {
		p.warn(line, fmt.Sprintf("failed to parse DNS server string %q, ignoring the rest: %v", value, err))
	}
	for _, w := range words {
		s, err := parseServer(w)
		if err != nil {
			p.warn(line, fmt.Sprintf("failed to parse DNS server string %q, ignoring: %v", w, err))
			continue
		}
		if !serverAddrValid(s.Addr) {
			continue
		}
		if !p.dnsIdx.add(s) {
			continue
		}
		p.d.DNS = append(p.d.DNS, s)
		p.d.DNSSources = append(p.d.DNSSources, Setting{Path: p.path, Line: line})
	}
}

// DelegateWatches declares what LoadDNSDelegates reads: the delegate directories (their files and
// the drop-in directories in them) and the drop-in directories of the delegates ids names.
func DelegateWatches(ids []string) []nodefs.Watch {
	var ws []nodefs.Watch
	match := func(n string) bool {
		return !strings.HasPrefix(n, ".") && (strings.HasSuffix(n, DNSDelegateSuffix) || strings.HasSuffix(n, DNSDelegateSuffix+".d"))
	}
	for _, d := range DNSDelegateDirs {
		ws = append(ws, nodefs.Watch{Dir: d, Match: match, Complete: completeDelegate})
		for _, id := range ids {
			ws = append(ws, nodefs.Watch{Dir: DNSDelegateDropInDir(d, id), Match: nodefs.Suffix(".conf"), Complete: completeDelegate})
		}
	}
	return ws
}

// completeDelegate: a delegate file is complete when its last line is finished. An empty file
// masks the delegate, which is complete too.
func completeDelegate(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return nodefs.NewlineTerminated(b)
}

// sharedLibVersion matches the private library every systemd build installs with its version in
// the name (libsystemd-shared-262.so; Debian 12: /usr/lib/x86_64-linux-gnu/systemd/
// libsystemd-shared-252.so; Fedora: /usr/lib64/systemd/).
var sharedLibVersion = regexp.MustCompile(`^libsystemd-shared-([0-9]+)(\.[0-9a-z~.-]*)?\.so$`)

// sharedLibDirs are where distributions put libsystemd-shared: Debian and Ubuntu under the
// multiarch triplet, Fedora and SUSE in lib64, Arch in /usr/lib/systemd, split-usr systems in
// /lib/systemd.
var sharedLibDirs = func() []string {
	dirs := []string{"/usr/lib/systemd", "/usr/lib64/systemd", "/lib/systemd"}
	for _, triplet := range []string{"x86_64-linux-gnu", "aarch64-linux-gnu", "arm-linux-gnueabihf", "powerpc64le-linux-gnu", "s390x-linux-gnu", "riscv64-linux-gnu"} {
		dirs = append(dirs, "/usr/lib/"+triplet+"/systemd", "/lib/"+triplet+"/systemd")
	}
	return dirs
}()

// InstalledVersion is the major version of the systemd installed on the node r reads, from the
// name of its libsystemd-shared-VERSION.so; 0 when none is found. It is how nodedns tells
// resolved 258+ (which reads DNS delegates) from older ones, under --root as on the live node.
func InstalledVersion(r nodefs.Reader) int {
	best := 0
	for _, dir := range sharedLibDirs {
		es, err := r.ReadDir(dir)
		if err != nil {
			continue // missing, or not listable: no version from here
		}
		for _, e := range es {
			m := sharedLibVersion.FindStringSubmatch(e.Name())
			if m == nil {
				continue
			}
			if v, err := strconv.Atoi(m[1]); err == nil && v > best {
				best = v
			}
		}
	}
	return best
}

// VersionWatches declares what InstalledVersion reads: a systemd upgrade renames the library.
func VersionWatches() []nodefs.Watch {
	var ws []nodefs.Watch
	for _, d := range sharedLibDirs {
		ws = append(ws, nodefs.Watch{Dir: d, Match: func(n string) bool { return sharedLibVersion.MatchString(n) }, Complete: func([]byte) error { return nil }})
	}
	return ws
}

// DelegatesSince is the first systemd release whose resolved reads DNS delegates.
const DelegatesSince = 258

// LoadDelegates reads resolved's DNS delegates where resolved reads them (docs/contract.md
// "systemd-resolved 258 and later: DNS delegates"): on systemd 258 and later, or when the version is
// unknown (a dns-delegate.d directory only exists where someone wrote one for resolved 258+). On an
// older systemd the files mean nothing to resolved: d is nil, and nodedns leaves them alone. version
// is InstalledVersion's.
func LoadDelegates(r nodefs.Reader) (d *DNSDelegates, version int) {
	version = InstalledVersion(r)
	if version != 0 && version < DelegatesSince {
		return nil, version
	}
	return LoadDNSDelegates(r), version
}

// Watches declares what LoadDelegates read: the library that names systemd's version, the
// delegate directories, and the drop-in directories of the delegates d found (d may be nil: before
// the first read, or on an older systemd).
func (d *DNSDelegates) Watches() []nodefs.Watch {
	var ids []string
	if d != nil {
		for _, dl := range d.Delegates {
			ids = append(ids, dl.ID)
		}
	}
	return append(DelegateWatches(ids), VersionWatches()...)
}

// FileData returns the bytes read from p, one of d.Files.
func (d DNSDelegate) FileData(p string) ([]byte, bool) {
	for i, f := range d.Files {
		if f == p && i < len(d.Data) {
			return d.Data[i], true
		}
	}
	return nil, false
}

// DelegateOverridePath is where a same-named file masks p, a delegate file or one of its drop-ins
// outside /etc: the same name under /etc/systemd/dns-delegate.d (systemd.dns-delegate(5): a file in
// /etc overrides the same name in /run and /usr/lib). A file already in /etc is its own override.
// ok is false when p is in no delegate directory.
func DelegateOverridePath(p string) (string, bool) {
	for _, d := range DNSDelegateDirs {
		if rel, found := strings.CutPrefix(p, d+"/"); found {
			return path.Join(DNSDelegateDirs[0], rel), true
		}
	}
	return "", false
}

// RemoveDelegateServers rewrites one delegate file (or drop-in) without the DNS= servers drop
// selects, on the lines given (1-based, as DNSSources names them); every other byte stays. A line
// left with no server becomes a comment saying what was there: an empty DNS= would reset the
// servers set before it. It refuses lines that are not a plain one-line DNS= assignment (a
// continued line), so that nothing it does not understand is changed.
func RemoveDelegateServers(data []byte, lines map[int]bool, drop func(Server) bool) ([]byte, error) {
	var b strings.Builder
	line := 0
	prevContinued := false
	for _, pl := range physLines(data) {
		text, eol := pl.text, pl.eol
		line++
		if !lines[line] && isComment(text) {
			// A comment is dropped before continuations are joined: it neither ends nor starts one.
			b.WriteString(text + eol)
			continue
		}
		continued := endsEscaped(text)
		if !lines[line] {
			b.WriteString(text + eol)
			prevContinued = continued
			continue
		}
		trimmed := strings.Trim(text, whitespace)
		key, value, ok := strings.Cut(trimmed, "=")
		if !ok || prevContinued || continued || strings.Trim(key, whitespace) != "DNS" {
			return nil, fmt.Errorf("line %d is not a one-line DNS= assignment", line)
		}
		if strings.ContainsRune(value, '\\') {
			return nil, fmt.Errorf("line %d: a DNS= value with backslash escapes is left to the operator", line)
		}
		words, err := splitWords(strings.Trim(value, whitespace), 0)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		var keep, dropped []string
		for _, w := range words {
			if sv, err := parseServer(w); err == nil && drop(sv) {
				dropped = append(dropped, w)
				continue
			}
			keep = append(keep, w)
		}
		indent := text[:len(text)-len(strings.TrimLeft(text, whitespace))]
		switch {
		case len(dropped) == 0:
			b.WriteString(text + eol)
		case len(keep) == 0:
			b.WriteString(indent + "# DNS=" + strings.Join(dropped, " ") + " (loop address removed by nodedns)" + eol)
		default:
			b.WriteString(indent + "DNS=" + strings.Join(keep, " ") + eol)
		}
		prevContinued = false
	}
	if len(lines) > 0 {
		for l := range lines {
			if l > line {
				return nil, fmt.Errorf("line %d is past the end of the file", l)
			}
		}
	}
	return []byte(b.String()), nil
}
