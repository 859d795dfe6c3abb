package leases

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/nodedns/nodedns/internal/ascii"
)

// ParseDhclient parses a dhclient.leases(5) file (ISC dhclient 4.4) and
// returns every lease in file order: `lease { ... }` blocks (DHCPv4) and
// `lease6 { ... }` blocks (DHCPv6, as in dhclient6.leases). Top-level
// `default-duid` statements are skipped.
//
// Inside a lease it reads interface, fixed-address, option subnet-mask,
// routers, domain-name-servers, domain-name, domain-search and interface-mtu,
// and the renew, rebind and expire dates (`4 2026/11/21 10:00:00;` in UTC,
// `epoch 1763719200;` with db-time-format local, or `never;`); other
// declarations (bootp, medium, filename, server-name, other options) are
// accepted and ignored. Inside a lease6 it reads interface, the first
// ia-na iaaddr (address, starts, max-life) and options dhcp6.name-servers and
// dhcp6.domain-search. Quoted strings take conflex.c's escapes; `#` starts a
// comment.
//
// A block cut off mid-way, a syntax error, a malformed value of a declaration
// it reads, or binary data is an error naming path:line and the reason.
func ParseDhclient(data []byte, path string) ([]Lease, error) {
	toks, err := lexDhclient(data, path)
	if err != nil {
		return nil, err
	}
	p := &dhParser{path: path, toks: toks}
	top, err := p.body(0, 0, "")
	if err != nil {
		return nil, err
	}
	var out []Lease
	for _, s := range top {
		kw, err := p.keyword(s)
		if err != nil {
			return nil, err
		}
		// clparse.c read_client_leases accepts exactly these three
		// statements and calls anything else a corrupt lease file.
		switch kw {
		case "lease", "lease6":
			if !s.block || len(s.words) != 1 {
				return nil, p.errf(s.line, "%s: want %s { ... }", kw, kw)
			}
			var l Lease
			if kw == "lease" {
				l, err = p.lease4(s)
			} else {
				l, err = p.lease6(s)
			}
			if err != nil {
				return nil, err
			}
			out = append(out, l)
		case "default-duid":
			if s.block {
				return nil, p.errf(s.line, "default-duid: unexpected block")
			}
		default:
			return nil, p.errf(s.line, "unexpected %q at top level (want lease, lease6 or default-duid)", clip(kw))
		}
	}
	return out, nil
}

type tokKind int

const (
	tWord   tokKind = iota // a name, number, address, date part: anything unquoted
	tString                // a quoted string, escapes undone
	tPunct                 // one of { } ; ,
)

type token struct {
	kind tokKind
	text string
	line int
}

// lexDhclient splits a lease file into tokens the way ISC's conflex.c does,
// close enough for the files dhclient writes: words, quoted strings and the
// punctuation { } ; , with `#` comments to the end of the line.
func lexDhclient(data []byte, path string) ([]token, error) {
	var toks []token
	line := 1
	for i := 0; i < len(data); {
		c := data[i]
		switch {
		case c == '\n':
			line++
			i++
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '#':
			for i < len(data) && data[i] != '\n' {
				i++
			}
		case c == '{' || c == '}' || c == ';' || c == ',':
			toks = append(toks, token{tPunct, string(c), line})
			i++
		case c == '"':
			start := line
			s, n, nl, ok := readString(data[i+1:])
			if !ok {
				return nil, fmt.Errorf("%s:%d: unterminated quoted string", path, start)
			}
			toks = append(toks, token{tString, s, start})
			i += 1 + n
			line += nl
		case c > ' ' && c < 0x7f:
			j := i
			for j < len(data) && isWordByte(data[j]) {
				j++
			}
			toks = append(toks, token{tWord, string(data[i:j]), line})
			i = j
		default:
			// dhclient writes only printable ASCII outside strings; a NUL or
			// a high byte here means the file is not a lease file (or was
			// overwritten by something else).
			return nil, fmt.Errorf("%s:%d: binary data (byte 0x%02x)", path, line, c)
		}
	}
	return toks, nil
}

func isWordByte(c byte) bool {
	if c <= ' ' || c >= 0x7f {
		return false
	}
	switch c {
	case '{', '}', ';', ',', '"', '#':
		return false
	}
	return true
}

// readString reads a quoted string after its opening quote, undoing the
// escapes of ISC conflex.c read_string: \t \r \n \b, octal \NNN, hex \xHH,
// and a backslash before any other character keeps that character. It
// returns the string, the bytes consumed (closing quote included), the
// newlines crossed, and false when the string never ends.
func readString(data []byte) (string, int, int, bool) {
	var b strings.Builder
	nl := 0
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch c {
		case '"':
			return b.String(), i + 1, nl, true
		case '\n':
			nl++
			b.WriteByte(c)
		case '\\':
			i++
			if i >= len(data) {
				return "", 0, 0, false
			}
			e := data[i]
			switch {
			case e == 't':
				b.WriteByte('\t')
			case e == 'r':
				b.WriteByte('\r')
			case e == 'n':
				b.WriteByte('\n')
			case e == 'b':
				b.WriteByte('\b')
			case e >= '0' && e <= '7':
				v, n := 0, 0
				for n < 3 && i+n < len(data) && data[i+n] >= '0' && data[i+n] <= '7' {
					v = v*8 + int(data[i+n]-'0')
					n++
				}
				b.WriteByte(byte(v))
				i += n - 1
			case e == 'x':
				v, n := 0, 0
				for n < 2 && i+1+n < len(data) && ascii.IsHex(data[i+1+n]) {
					v = v*16 + ascii.HexVal(data[i+1+n])
					n++
				}
				if n == 0 {
					b.WriteByte('x')
				} else {
					b.WriteByte(byte(v))
				}
				i += n
			default:
				if e == '\n' {
					nl++
				}
				b.WriteByte(e)
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, 0, false
}

// stmt is one statement: the tokens before its `;`, or before its `{` with
// the statements of the block that follows.
type stmt struct {
	line  int
	words []token // words, strings and commas; never { } ;
	block bool
	body  []stmt
}

type dhParser struct {
	path string
	toks []token
	pos  int
}

// maxDepth bounds block nesting: dhclient writes at most lease6 > ia-na >
// iaaddr; anything deeper is not a lease file, and the bound keeps hostile
// input from recursing without end.
const maxDepth = 8

func (p *dhParser) errf(line int, format string, args ...any) error {
	return fmt.Errorf("%s:%d: %s", p.path, line, fmt.Sprintf(format, args...))
}

// body parses statements until the `}` closing a block opened at openLine
// (depth > 0), or until the end of the file (depth 0).
func (p *dhParser) body(depth, openLine int, name string) ([]stmt, error) {
	var out []stmt
	for {
		if p.pos >= len(p.toks) {
			if depth > 0 {
				return nil, p.errf(openLine, "unexpected end of file: %s block not closed", name)
			}
			return out, nil
		}
		t := p.toks[p.pos]
		if t.kind == tPunct && t.text == "}" {
			if depth == 0 {
				return nil, p.errf(t.line, "unexpected }")
			}
			p.pos++
			return out, nil
		}
		if t.kind == tPunct && t.text == ";" {
			p.pos++ // an empty statement
			continue
		}
		s := stmt{line: t.line}
		for done := false; !done; {
			if p.pos >= len(p.toks) {
				if depth > 0 {
					return nil, p.errf(openLine, "unexpected end of file: %s block not closed", name)
				}
				return nil, p.errf(s.line, "unexpected end of file: statement not ended by ;")
			}
			t := p.toks[p.pos]
			p.pos++
			switch {
			case t.kind == tPunct && t.text == ";":
				done = true
			case t.kind == tPunct && t.text == "{":
				if depth+1 > maxDepth {
					return nil, p.errf(t.line, "blocks nested too deeply")
				}
				inner := "unnamed"
				if len(s.words) > 0 {
					inner = clip(s.words[0].text)
				}
				body, err := p.body(depth+1, s.line, inner)
				if err != nil {
					return nil, err
				}
				s.block, s.body = true, body
				done = true
			case t.kind == tPunct && t.text == "}":
				return nil, p.errf(t.line, "missing ; before }")
			default:
				s.words = append(s.words, t)
			}
		}
		if len(s.words) == 0 {
			return nil, p.errf(s.line, "block without a name")
		}
		out = append(out, s)
	}
}

// keyword returns the statement's first word, which must be unquoted.
func (p *dhParser) keyword(s stmt) (string, error) {
	if s.words[0].kind != tWord {
		return "", p.errf(s.line, "expected a keyword, found %q", clip(s.words[0].text))
	}
	return s.words[0].text, nil
}

// lease4 interprets a `lease { ... }` block.
func (p *dhParser) lease4(s stmt) (Lease, error) {
	l := Lease{Path: p.path, Line: s.line, Client: Dhclient}
	var (
		addr netip.Addr
		bits = -1
	)
	for _, d := range s.body {
		kw, err := p.keyword(d)
		if err != nil {
			return Lease{}, err
		}
		if d.block {
			return Lease{}, p.errf(d.line, "%s: unexpected block in lease", clip(kw))
		}
		args := d.words[1:]
		switch kw {
		case "interface":
			v, err := p.oneString(d, args)
			if err != nil {
				return Lease{}, err
			}
			l.Interface = v
		case "fixed-address":
			a, err := p.oneAddr(d, args, parseIPv4)
			if err != nil {
				return Lease{}, err
			}
			addr = a
		case "renew", "rebind", "expire":
			t, err := p.date(d, args)
			if err != nil {
				return Lease{}, err
			}
			if kw == "expire" {
				l.Expire = t
			}
		case "option":
			if len(args) == 0 || args[0].kind != tWord {
				return Lease{}, p.errf(d.line, "option: missing option name")
			}
			name, vals := args[0].text, args[1:]
			switch name {
			case "subnet-mask":
				m, err := p.oneAddr(d, vals, parseIPv4)
				if err != nil {
					return Lease{}, err
				}
				n, ok := maskBits(m)
				if !ok {
					return Lease{}, p.errf(d.line, "option subnet-mask: non-contiguous netmask %s", m)
				}
				bits = n
			case "routers":
				as, err := p.addrs(d, vals, parseIPv4)
				if err != nil {
					return Lease{}, err
				}
				l.Routers = as
			case "domain-name-servers":
				as, err := p.addrs(d, vals, parseIPv4)
				if err != nil {
					return Lease{}, err
				}
				l.DNS = as
			case "domain-name":
				v, err := p.oneString(d, vals)
				if err != nil {
					return Lease{}, err
				}
				l.DomainName = v
			case "domain-search":
				v, err := p.strings(d, vals)
				if err != nil {
					return Lease{}, err
				}
				l.SearchDomains = v
			case "interface-mtu":
				if len(vals) != 1 || vals[0].kind != tWord {
					return Lease{}, p.errf(d.line, "option interface-mtu: want one number")
				}
				n, err := parseMTU(vals[0].text)
				if err != nil {
					return Lease{}, p.errf(d.line, "option interface-mtu: %v", err)
				}
				l.MTU = n
			}
		}
		// Anything else (bootp, medium, filename, server-name, other
		// options) does not matter to nodedns; dhclient accepts it.
	}
	l.Address = leaseAddress(addr, bits)
	return l, nil
}

// lease6 interprets a `lease6 { ... }` block as dhclient -6 writes it
// (common/parse.c / client/clparse.c parse_client6_lease_statement).
func (p *dhParser) lease6(s stmt) (Lease, error) {
	l := Lease{Path: p.path, Line: s.line, Client: Dhclient, V6: true}
	for _, d := range s.body {
		kw, err := p.keyword(d)
		if err != nil {
			return Lease{}, err
		}
		args := d.words[1:]
		switch {
		case kw == "interface" && !d.block:
			v, err := p.oneString(d, args)
			if err != nil {
				return Lease{}, err
			}
			l.Interface = v
		case kw == "ia-na" && d.block:
			if err := p.iaNA(d, &l); err != nil {
				return Lease{}, err
			}
		case kw == "option" && !d.block:
			if len(args) == 0 || args[0].kind != tWord {
				return Lease{}, p.errf(d.line, "option: missing option name")
			}
			switch args[0].text {
			case "dhcp6.name-servers":
				as, err := p.addrs(d, args[1:], parseIPv6)
				if err != nil {
					return Lease{}, err
				}
				l.DNS = as
			case "dhcp6.domain-search":
				v, err := p.strings(d, args[1:])
				if err != nil {
					return Lease{}, err
				}
				l.SearchDomains = v
			}
		}
	}
	return l, nil
}

// infiniteLifetime is the DHCPv6 lifetime that never ends (RFC 8415 section 7.7).
const infiniteLifetime = 0xffffffff

// iaNA takes the first iaaddr of an ia-na block as the lease's address: its
// expiry is its starts plus its max-life (valid lifetime), both written by
// dhclient as plain seconds.
func (p *dhParser) iaNA(ia stmt, l *Lease) error {
	for _, d := range ia.body {
		if !d.block || d.words[0].kind != tWord || d.words[0].text != "iaaddr" {
			continue
		}
		a, err := p.oneAddr(d, d.words[1:], parseIPv6)
		if err != nil {
			return err
		}
		var starts, maxLife int64 = -1, -1
		for _, e := range d.body {
			if e.block || e.words[0].kind != tWord {
				continue
			}
			var dst *int64
			switch e.words[0].text {
			case "starts":
				dst = &starts
			case "max-life":
				dst = &maxLife
			default:
				continue
			}
			if len(e.words) != 2 || e.words[1].kind != tWord {
				return p.errf(e.line, "%s: want one number", e.words[0].text)
			}
			n, err := strconv.ParseInt(e.words[1].text, 10, 64)
			if !isDigits(e.words[1].text) || err != nil || n > 1<<40 {
				return p.errf(e.line, "%s: invalid number %q", e.words[0].text, clip(e.words[1].text))
			}
			*dst = n
		}
		if l.Address.IsValid() {
			continue // the first address is the lease's; keep going only to validate
		}
		l.Address = netip.PrefixFrom(a, 128)
		if starts >= 0 && maxLife >= 0 && maxLife != infiniteLifetime {
			l.Expire = time.Unix(starts+maxLife, 0).UTC()
		}
	}
	return nil
}

// oneString wants exactly one value: a quoted string (or a bare word, which
// dhclient's parser also takes for names).
func (p *dhParser) oneString(d stmt, args []token) (string, error) {
	if len(args) != 1 || args[0].kind == tPunct {
		return "", p.errf(d.line, "%s: want one quoted string", p.what(d))
	}
	return args[0].text, nil
}

// strings wants a comma-separated list of strings, as dhclient writes
// domain-search: `"example.org.", "corp.example."`.
func (p *dhParser) strings(d stmt, args []token) ([]string, error) {
	items, err := p.list(d, args)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(items))
	for _, t := range items {
		out = append(out, t.text)
	}
	return out, nil
}

// oneAddr wants exactly one address.
func (p *dhParser) oneAddr(d stmt, args []token, parse func(string) (netip.Addr, bool)) (netip.Addr, error) {
	if len(args) != 1 || args[0].kind != tWord {
		return netip.Addr{}, p.errf(d.line, "%s: want one address", p.what(d))
	}
	a, ok := parse(args[0].text)
	if !ok {
		return netip.Addr{}, p.errf(d.line, "%s: invalid address %q", p.what(d), clip(args[0].text))
	}
	return a, nil
}

// addrs wants a comma-separated list of addresses, as dhclient writes
// routers and domain-name-servers: `10.0.2.3, 10.0.2.4`.
func (p *dhParser) addrs(d stmt, args []token, parse func(string) (netip.Addr, bool)) ([]netip.Addr, error) {
	items, err := p.list(d, args)
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, 0, len(items))
	for _, t := range items {
		a, ok := parse(t.text)
		if t.kind != tWord || !ok {
			return nil, p.errf(d.line, "%s: invalid address %q", p.what(d), clip(t.text))
		}
		out = append(out, a)
	}
	return out, nil
}

// list splits `item, item, ...`, refusing empty lists and stray commas.
func (p *dhParser) list(d stmt, args []token) ([]token, error) {
	if len(args) == 0 {
		return nil, p.errf(d.line, "%s: missing value", p.what(d))
	}
	var out []token
	for i, t := range args {
		isComma := t.kind == tPunct && t.text == ","
		if (i%2 == 1) != isComma {
			return nil, p.errf(d.line, "%s: malformed list (want values separated by commas)", p.what(d))
		}
		if !isComma {
			out = append(out, t)
		}
	}
	if len(args)%2 == 0 {
		return nil, p.errf(d.line, "%s: malformed list (trailing comma)", p.what(d))
	}
	return out, nil
}

// what names a declaration for an error: "option routers", "fixed-address".
func (p *dhParser) what(d stmt) string {
	w := clip(d.words[0].text)
	if w == "option" && len(d.words) > 1 {
		w += " " + clip(d.words[1].text)
	}
	return w
}

// date parses a dhclient date, as dhclient.leases(5) and common/parse.c
// parse_date_core define it: `W YYYY/MM/DD HH:MM:SS` in UTC (W is the weekday,
// 0 for Sunday, and carries no information), `epoch SECONDS` (written with
// db-time-format local, followed by a comment), or `never`. never gives the
// zero time: the lease does not expire.
func (p *dhParser) date(d stmt, args []token) (time.Time, error) {
	bad := func(reason string) (time.Time, error) {
		return time.Time{}, p.errf(d.line, "%s: %s", clip(d.words[0].text), reason)
	}
	for _, a := range args {
		if a.kind != tWord {
			return bad("malformed date")
		}
	}
	switch {
	case len(args) == 1 && args[0].text == "never":
		return time.Time{}, nil
	case len(args) == 2 && args[0].text == "epoch":
		n, err := strconv.ParseInt(args[1].text, 10, 64)
		if !isDigits(args[1].text) || err != nil || n > 1<<40 {
			return bad(fmt.Sprintf("invalid epoch %q", clip(args[1].text)))
		}
		return time.Unix(n, 0).UTC(), nil
	case len(args) == 3:
		if w := args[0].text; len(w) != 1 || w[0] < '0' || w[0] > '6' {
			return bad(fmt.Sprintf("invalid weekday %q (want 0 to 6)", clip(args[0].text)))
		}
		ymd, ok1 := numbers(args[1].text, "/")
		hms, ok2 := numbers(args[2].text, ":")
		if !ok1 || !ok2 {
			return bad(fmt.Sprintf("malformed date %q %q (want YYYY/MM/DD HH:MM:SS)", clip(args[1].text), clip(args[2].text)))
		}
		t := time.Date(ymd[0], time.Month(ymd[1]), ymd[2], hms[0], hms[1], hms[2], 0, time.UTC)
		// time.Date normalises 2026/02/30 to March; a date that does not
		// survive the round trip is not a real date.
		if ymd[0] < 1970 || ymd[0] > 9999 || hms[0] > 23 || hms[1] > 59 || hms[2] > 59 ||
			t.Year() != ymd[0] || int(t.Month()) != ymd[1] || t.Day() != ymd[2] {
			return bad(fmt.Sprintf("invalid date %s %s", clip(args[1].text), clip(args[2].text)))
		}
		return t, nil
	}
	return bad("malformed date (want W YYYY/MM/DD HH:MM:SS, epoch N or never)")
}

// numbers splits s at sep into exactly three non-negative decimal numbers.
func numbers(s, sep string) ([3]int, bool) {
	var out [3]int
	parts := strings.Split(s, sep)
	if len(parts) != 3 {
		return out, false
	}
	for i, p := range parts {
		if !isDigits(p) || len(p) > 4 {
			return out, false
		}
		out[i], _ = strconv.Atoi(p)
	}
	return out, true
}

// isDigits reports whether s is a non-empty run of ASCII digits (no sign).
func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
