package resolvconf

import (
	"fmt"
	"net/netip"
	"strings"
)

// keywords maps the keywords glibc's res_init.c recognises to their kinds.
var keywords = map[string]Kind{
	"nameserver": Nameserver,
	"search":     Search,
	"domain":     Domain,
	"options":    Options,
	"sortlist":   Sortlist,
}

// isBlank reports whether b separates words. glibc splits on ' ' and '\t'
// only; musl and kubelet split on any isspace byte. Splitting on all of them
// lets a CRLF file parse the way musl and kubelet read it, and Warnings
// reports the lines where glibc would keep the CR in a word.
func isBlank(b byte) bool {
	return b == ' ' || b == '\t' || b == '\r' || b == '\v' || b == '\f'
}

// words splits s at runs of blanks.
func words(s string) []string {
	var out []string
	for i := 0; i < len(s); {
		for i < len(s) && isBlank(s[i]) {
			i++
		}
		j := i
		for j < len(s) && !isBlank(s[j]) {
			j++
		}
		if j > i {
			out = append(out, s[i:j])
		}
		i = j
	}
	return out
}

// clip shortens s for a message: a garbage line can be a megabyte long.
func clip(s string) string {
	const n = 40
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// parseLine classifies one line (without its newline) and returns the
// warnings about it. Num is left for the caller.
func parseLine(raw string) (Line, []string) {
	l := Line{Raw: raw}
	i := 0
	for i < len(raw) && isBlank(raw[i]) {
		i++
	}
	if i == len(raw) {
		l.Kind = Blank
		return l, nil
	}
	if raw[i] == '#' || raw[i] == ';' {
		// glibc skips '#' and ';' lines only at column 0, but an indented
		// comment is ignored all the same: it matches no keyword.
		l.Kind = Comment
		return l, nil
	}
	if i > 0 {
		// glibc's MATCH and musl's strncmp compare at the start of the
		// buffer, so an indented keyword line is ignored. kubelet trims
		// the line first and would read it.
		l.Kind = Unknown
		l.Problem = "leading whitespace: glibc and musl match keywords only at the start of a line and ignore it (kubelet reads it)"
		return l, []string{l.Problem}
	}
	end := 0
	for end < len(raw) && !isBlank(raw[end]) {
		end++
	}
	word := raw[:end]
	kind, ok := keywords[word]
	if !ok {
		l.Kind = Unknown
		if _, lower := keywords[strings.ToLower(word)]; lower {
			// strncmp is case-sensitive in glibc and musl alike.
			l.Problem = fmt.Sprintf("keyword %q is not lowercase: glibc and musl ignore the line", clip(word))
		} else {
			l.Problem = fmt.Sprintf("unknown keyword %q: glibc and musl ignore the line", clip(word))
		}
		return l, []string{l.Problem}
	}
	rest := raw[end:]
	args := words(rest)
	if rest != "" && rest[0] != ' ' && rest[0] != '\t' && len(args) > 0 {
		// glibc's MATCH wants a space or tab right after the keyword. A
		// keyword followed by only a CR ("search\r" in a CRLF file) is an
		// empty line of that kind, which glibc ignores either way.
		l.Kind = Unknown
		l.Problem = fmt.Sprintf("keyword %q is followed by %q, not a space or tab: glibc ignores the line", word, rest[:1])
		return l, []string{l.Problem}
	}

	var warns []string
	if strings.ContainsAny(rest, "\r\v\f") {
		warns = append(warns, "carriage return or other control whitespace in the line (CRLF file?): glibc reads it as part of the word before it, musl and kubelet as a blank")
	}
	if len(raw) >= MuslMaxSearchLine {
		warns = append(warns, fmt.Sprintf("line of %d characters: musl ignores lines of %d characters or more", len(raw), MuslMaxSearchLine))
	}

	switch kind {
	case Nameserver:
		if len(args) == 0 {
			l.Kind = Unknown
			l.Problem = "nameserver line without an address: glibc and musl ignore it"
			return l, append([]string{l.Problem}, warns...)
		}
		// glibc and musl read the first word and ignore the rest of the
		// line ("Ignore trailing contents on the name server line").
		addr, ok := parseNameserver(args[0])
		if !ok {
			l.Kind = Unknown
			l.Problem = fmt.Sprintf("nameserver %q is not an IP address: glibc and musl ignore the line", clip(args[0]))
			return l, append([]string{l.Problem}, warns...)
		}
		l.Kind = Nameserver
		l.Addr = addr
		// glibc cuts the address at ' ', '\t' or '\n' only, so in a CRLF
		// file it reads "10.0.0.1\r", which __inet_aton_exact and
		// inet_pton reject: glibc 2.32+ drops the server that musl,
		// kubelet and Go's resolver use.
		glibcWord, _, _ := strings.Cut(strings.TrimLeft(rest, " \t"), " ")
		glibcWord, _, _ = strings.Cut(glibcWord, "\t")
		if _, ok := parseNameserver(glibcWord); !ok {
			warns = append(warns, fmt.Sprintf("glibc reads the address as %q and ignores the line", clip(glibcWord)))
		}
		if addr.Is4() && addr.String() != args[0] {
			warns = append(warns, fmt.Sprintf("address %q is read as %s (inet_aton shorthand, octal or hex notation)", args[0], addr))
		}
	case Search, Domain:
		l.Kind = kind
		l.Domains = args
		switch {
		case len(args) == 0 && kind == Search:
			// glibc: "if ((*cp == '\0') || (*cp == '\n')) continue;"
			// keeps the previous list; musl copies the empty rest of
			// the line and kubelet resets its list.
			warns = append(warns, "empty search line: glibc ignores it, musl and kubelet clear the search list")
		case len(args) == 0:
			warns = append(warns, "empty domain line: glibc and kubelet ignore it, musl clears the search list")
		case kind == Domain && len(args) > 1:
			// glibc cuts the domain at the first blank (strpbrk " \t\n");
			// musl copies the whole rest of the line as the search list.
			warns = append(warns, fmt.Sprintf("domain line with %d names: glibc uses only %q, musl all of them", len(args), args[0]))
		}
		warns = append(warns, commentWords(args, "search domain")...)
	case Options:
		l.Kind = Options
		l.Options = args
		warns = append(warns, commentWords(args, "option")...)
	case Sortlist:
		l.Kind = Sortlist
	}
	return l, warns
}

// commentWords warns about words that look like a trailing comment: glibc
// recognises comments only at the start of a line, so "search a # b" searches
// "#" and "b".
func commentWords(args []string, what string) []string {
	for _, a := range args {
		if a[0] == '#' || a[0] == ';' {
			return []string{fmt.Sprintf("%q is not a comment here: glibc and musl read it and what follows as %s words", clip(a), what)}
		}
	}
	return nil
}

// parseNameserver parses the address word of a nameserver line as glibc
// 2.36 does: first as IPv4 with __inet_aton_exact, then as IPv6 with
// inet_pton after cutting a "%zone" suffix, which is kept as the zone.
func parseNameserver(s string) (netip.Addr, bool) {
	if a, ok := parseInetAton(s); ok {
		return a, true
	}
	host, zone, hasZone := strings.Cut(s, "%")
	a, err := netip.ParseAddr(host)
	if err != nil || !a.Is6() {
		return netip.Addr{}, false
	}
	if hasZone && zone != "" {
		// glibc ignores a zone it cannot resolve ("for backwards
		// compatibility"); musl fails the address. Keep what is written.
		a = a.WithZone(zone)
	}
	return a, true
}

// parseInetAton parses s like glibc's inet_aton_end with the whole-string
// check of __inet_aton_exact (resolv/inet_addr.c): one to four parts
// separated by dots, each in C notation (0x hex, leading 0 octal, else
// decimal), the last part filling the remaining bytes, so "10.1" is 10.0.0.1
// and "010.0.0.1" is 8.0.0.1. musl's __inet_aton accepts the same forms.
func parseInetAton(s string) (netip.Addr, bool) {
	var b [4]byte
	n := 0
	for {
		if s == "" || s[0] < '0' || s[0] > '9' {
			return netip.Addr{}, false
		}
		v, rest, ok := parseCUint(s)
		if !ok {
			return netip.Addr{}, false
		}
		s = rest
		if s != "" && s[0] == '.' {
			if n >= 3 || v > 0xff {
				return netip.Addr{}, false
			}
			b[n] = byte(v)
			n++
			s = s[1:]
			continue
		}
		if s != "" {
			return netip.Addr{}, false
		}
		max := [4]uint64{0xffffffff, 0xffffff, 0xffff, 0xff}
		if v > max[n] {
			return netip.Addr{}, false
		}
		for i := 3; i >= n; i-- {
			b[i] = byte(v)
			v >>= 8
		}
		return netip.AddrFrom4(b), true
	}
}

// parseCUint reads an unsigned number the way strtoul(s, &end, 0) does after
// a leading digit, failing above 0xffffffff as inet_aton_end does.
func parseCUint(s string) (v uint64, rest string, ok bool) {
	base := uint64(10)
	i := 0
	switch {
	case len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && hexVal(s[2]) < 16:
		base, i = 16, 2
	case s[0] == '0':
		base = 8
	}
	for ; i < len(s); i++ {
		d := hexVal(s[i])
		if d >= base {
			break
		}
		v = v*base + d
		if v > 0xffffffff {
			return 0, "", false
		}
	}
	return v, s[i:], true
}

// hexVal returns the value of a hex digit, or 16 for any other byte.
func hexVal(c byte) uint64 {
	switch {
	case '0' <= c && c <= '9':
		return uint64(c - '0')
	case 'a' <= c && c <= 'f':
		return uint64(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return uint64(c-'A') + 10
	}
	return 16
}
