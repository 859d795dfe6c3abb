// Package resolvconf parses, queries, edits and renders resolv.conf(5) files
// the way the resolvers that read them do: glibc's res_init.c (2.36, Debian 12)
// first, with musl's src/network/resolvconf.c and kubelet's parseResolvConf
// where they differ and the difference matters to a Kubernetes node.
//
// The package has no OS access. Parse keeps every byte, so a File that was not
// edited renders back to exactly its input, and the edits change only the
// lines they must: the comments, options, unknown lines and order of a file
// someone else wrote stay as they were. A line an edit rewrites is written
// with single spaces and a bare '\n', without the CR of a CRLF file (glibc
// would read the CR as part of the last word); a line an edit adds ends in
// '\n' even at the end of a file whose last line had none.
package resolvconf

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// MaxSize is the largest input Parse accepts, in bytes. A real resolv.conf is
// a few hundred bytes; the limit keeps a runaway writer (or a wrong path) from
// making nodedns read gigabytes.
const MaxSize = 1 << 20

// Limits the callers check. Parse and the edits do not enforce them: they
// describe what the readers of the file do, and the policy decides.
const (
	// MaxNameservers is how many nameserver lines glibc (resolv/resolv.h
	// MAXNS) and musl (src/network/lookup.h MAXNS) use; later ones are
	// ignored, and kubelet truncates to the same number
	// (validation.MaxDNSNameservers).
	MaxNameservers = 3
	// MuslMaxSearchLine is musl's limit on a line: __get_resolv_conf reads
	// lines with fgets into a 256-byte buffer and skips any line that does
	// not fit with its newline, so a search line of 255 characters or more
	// is ignored as a whole (musl 1.2.x resolvconf.c).
	MuslMaxSearchLine = 255
	// KubeletMaxSearch is the most search domains a pod may get:
	// k8s.io/kubernetes pkg/apis/core/validation MaxDNSSearchPaths, which
	// kubelet applies when it builds a pod's resolv.conf (dns.go).
	KubeletMaxSearch = 32
	// KubeletMaxSearchLen is the longest search list a pod may get, counted
	// as the domains joined by single spaces: validation
	// MaxDNSSearchListChars.
	KubeletMaxSearchLen = 2048
)

// Kind is the kind of a resolv.conf line.
type Kind int

// The kinds of lines. Keywords are what glibc's res_init.c matches.
const (
	// Blank is an empty line or one of only whitespace.
	Blank Kind = iota
	// Comment is a line whose first non-blank character is '#' or ';'.
	Comment
	// Nameserver is a "nameserver ADDR" line whose address is an IP.
	Nameserver
	// Search is a "search DOMAIN..." line.
	Search
	// Domain is a "domain NAME" line.
	Domain
	// Options is an "options WORD..." line.
	Options
	// Sortlist is a "sortlist ADDR/MASK..." line (glibc only; musl ignores it).
	Sortlist
	// Unknown is a line no resolver reads the way it looks; Line.Problem says why.
	Unknown
)

var kindNames = [...]string{
	Blank:      "blank",
	Comment:    "comment",
	Nameserver: "nameserver",
	Search:     "search",
	Domain:     "domain",
	Options:    "options",
	Sortlist:   "sortlist",
	Unknown:    "unknown",
}

// String returns the lowercase name of the kind, e.g. "nameserver".
func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Line is one line of a resolv.conf file.
//
// Raw is what Bytes writes; the other fields are what the resolvers read from
// it. Change a File through its methods, which keep the two in step.
type Line struct {
	Kind Kind
	// Num is the 1-based line number in the input; 0 for a line an edit added.
	Num int
	// Raw is the exact bytes of the line without its newline. The newline is
	// the '\n' byte alone: a CR before it stays in Raw, since glibc and musl
	// read the CR as part of the line too.
	Raw string
	// Addr is the address of a Nameserver line, IPv6 zone kept (fe80::1%eth0).
	Addr netip.Addr
	// Domains are the words of a Search or Domain line as written (trailing
	// dots kept).
	Domains []string
	// Options are the words of an Options line as written ("ndots:5", "edns0").
	Options []string
	// Problem says why a line was not understood: set for Unknown lines
	// (including a nameserver that is not an IP address), "" otherwise.
	Problem string
}

// File is a parsed resolv.conf.
type File struct {
	// Lines are the lines in order.
	Lines []Line
	// noFinalNewline is set when the input's last line had no newline. It is
	// inverted so that a File built by hand ends with a newline.
	noFinalNewline bool
}

// Warning is something a resolver will read differently from how the file
// looks: a line it ignores, a CR it keeps, a limit it applies.
type Warning struct {
	// Line is the 1-based line number in f.Bytes() (the input, for a File
	// not edited since Parse).
	Line int
	// Msg says what the resolvers do with the line.
	Msg string
}

// String formats the warning as "line N: msg".
func (w Warning) String() string { return fmt.Sprintf("line %d: %s", w.Line, w.Msg) }

// ErrTooLarge is returned (wrapped) for input larger than MaxSize.
var ErrTooLarge = errors.New("too large")

// ParseError is returned for input that is not text.
type ParseError struct {
	// Line is the 1-based line of the offending byte.
	Line int
	// Msg is the reason.
	Msg string
}

// Error formats the error as "line N: reason"; callers that know the path
// prefix it ("/etc/resolv.conf:3: ...").
func (e *ParseError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// Parse parses resolv.conf bytes. It fails only for input over MaxSize or
// input that is not text (a NUL byte, which no writer of resolv.conf emits
// and which glibc's getline-based reader would silently cut the line at).
// Everything else parses: lines no resolver understands are kept verbatim as
// Unknown with Problem set, and reported by Warnings.
func Parse(data []byte) (*File, error) {
	if len(data) > MaxSize {
		return nil, fmt.Errorf("input of %d bytes is %w: the limit is %d", len(data), ErrTooLarge, MaxSize)
	}
	if i := bytes.IndexByte(data, 0); i >= 0 {
		return nil, &ParseError{Line: bytes.Count(data[:i], []byte{'\n'}) + 1, Msg: "NUL byte: not a text file"}
	}
	f := &File{}
	if len(data) == 0 {
		return f, nil
	}
	s := string(data)
	if strings.HasSuffix(s, "\n") {
		s = s[:len(s)-1]
	} else {
		f.noFinalNewline = true
	}
	f.Lines = make([]Line, 0, strings.Count(s, "\n")+1)
	num := 0
	for raw := range strings.SplitSeq(s, "\n") {
		num++
		l, _ := parseLine(raw)
		l.Num = num
		f.Lines = append(f.Lines, l)
	}
	return f, nil
}

// Bytes renders the file. For a File returned by Parse and not edited since,
// the result equals the input byte for byte. Every line ends in a newline
// except the last one when the input's did not.
func (f *File) Bytes() []byte {
	if len(f.Lines) == 0 {
		return []byte{}
	}
	n := len(f.Lines)
	for _, l := range f.Lines {
		n += len(l.Raw)
	}
	b := make([]byte, 0, n)
	for i, l := range f.Lines {
		b = append(b, l.Raw...)
		if i < len(f.Lines)-1 || !f.noFinalNewline {
			b = append(b, '\n')
		}
	}
	return b
}

// Warnings lists the lines glibc, musl or kubelet read differently from how
// they look, in line order: every Unknown line (with its Problem), CRs and
// other control whitespace inside keyword lines, lines musl skips for length,
// empty search and domain lines, extra names on a domain line, "#" words
// that are not comments, inet_aton shorthand addresses, and nameservers past
// MaxNameservers.
func (f *File) Warnings() []Warning {
	var ws []Warning
	ns := 0
	for i, l := range f.Lines {
		_, msgs := parseLine(l.Raw)
		for _, m := range msgs {
			ws = append(ws, Warning{Line: i + 1, Msg: m})
		}
		if l.Kind == Nameserver {
			ns++
			if ns > MaxNameservers {
				// glibc and musl stop at MAXNS; kubelet truncates to 3
				// when it copies the list into a pod.
				ws = append(ws, Warning{Line: i + 1, Msg: fmt.Sprintf("nameserver %s is number %d: glibc and musl use only the first %d", l.Addr, ns, MaxNameservers)})
			}
		}
	}
	return ws
}

// Nameservers returns the addresses of all nameserver lines in order,
// duplicates included. Callers apply MaxNameservers.
//
// A line glibc would drop only because of a CR after the address (a CRLF
// file) is included: musl, kubelet and Go's resolver (CoreDNS's
// forward . /etc/resolv.conf) still read it, and Warnings reports it.
func (f *File) Nameservers() []netip.Addr {
	var out []netip.Addr
	for _, l := range f.Lines {
		if l.Kind == Nameserver {
			out = append(out, l.Addr)
		}
	}
	return out
}

// Search returns the effective search list as glibc reads it: the last
// search or domain line that names at least one domain wins (res_init.c
// clears the list on each such line; musl's __get_resolv_conf also keeps the
// last). A domain line gives its first name only: glibc cuts it at the first
// blank. An empty search or domain line is skipped as glibc skips it (musl
// and kubelet would clear the list instead; Warnings says so). Domains are as
// written, trailing dots kept; compare them with CanonicalDomain.
//
// Search reads the file only: with no search or domain line glibc falls back
// to the domain part of the host name, and the LOCALDOMAIN environment
// variable overrides the file. kubelet ignores domain lines altogether (see
// Kubelet); the files nodedns writes for it use a search line only.
func (f *File) Search() []string {
	for i := len(f.Lines) - 1; i >= 0; i-- {
		l := f.Lines[i]
		switch {
		case l.Kind == Search && len(l.Domains) > 0:
			return append([]string(nil), l.Domains...)
		case l.Kind == Domain && len(l.Domains) > 0:
			return []string{l.Domains[0]}
		}
	}
	return nil
}

// Options returns the option words of all options lines in order, as written.
// glibc's res_setoptions applies every options line in turn, so all count.
func (f *File) Options() []string {
	var out []string
	for _, l := range f.Lines {
		if l.Kind == Options {
			out = append(out, l.Options...)
		}
	}
	return out
}

// SearchLineLen returns the length in characters of the effective search
// list written as one line with single spaces ("search a b c"), the form
// kubelet writes into a pod's resolv.conf; compare it with
// MuslMaxSearchLine. It is 0 when the search list is empty.
func (f *File) SearchLineLen() int {
	domains := f.Search()
	if len(domains) == 0 {
		return 0
	}
	n := len("search")
	for _, d := range domains {
		n += 1 + len(d)
	}
	return n
}

// CanonicalDomain lowercases d and strips one trailing dot, for comparing
// domains ("svc.cluster.local." and "SVC.cluster.local" are the same search
// domain to a resolver). Only ASCII letters are folded: DNS names compare
// case-insensitively in ASCII only (RFC 4343).
func CanonicalDomain(d string) string {
	d = strings.TrimSuffix(d, ".")
	for i := 0; i < len(d); i++ {
		if c := d[i]; 'A' <= c && c <= 'Z' {
			b := []byte(d)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return d
}

// ValidDomain reports whether d is a domain name where nodedns takes one: a DHCP search domain, the
// cluster domain, a name to probe. The rule is dhclient's own before it hands a value to
// dhclient-script (isc-dhcp 4.4 check_domain_name, RFC 1035 with the widely used underscore):
// labels of 1 to 63 letters, digits, '-' and '_', neither of the last two at a label's start or
// end, separated by dots, at most one trailing dot, and at most 253 characters without it (the
// longest name DNS carries). glibc and musl search such a name as written, and systemd-resolved
// accepts it; none holds a blank, quote, '$', backquote or control character, so a shell that
// evaluated it could run nothing. A DHCP value that fails is a hostile offer.
func ValidDomain(d string) bool {
	d = strings.TrimSuffix(d, ".")
	if d == "" || len(d) > 253 {
		return false
	}
	for _, label := range strings.Split(d, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			switch {
			case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
			case c == '-' || c == '_':
				if i == 0 || i == len(label)-1 {
					return false
				}
			default:
				return false
			}
		}
	}
	return true
}
