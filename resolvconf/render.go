package resolvconf

import (
	"bytes"
	"net/netip"
	"strings"
)

// Spec is the content of a resolv.conf file written from scratch.
type Spec struct {
	// Header lines are written first, each as "# line".
	Header []string
	// Nameservers are written one line each, in order.
	Nameservers []netip.Addr
	// Search is written as one search line, omitted when empty.
	Search []string
	// Options are written as one options line, omitted when empty.
	Options []string
}

// Render writes a fresh file: each header line as "# ...", then the
// nameserver lines, one search line (omitted when empty) and one options line
// (omitted when empty), each ending in '\n'. The output depends only on s.
//
// One search line, not several, because glibc and musl keep only the last.
// An entry that cannot be written so that a resolver reads it back (an
// invalid address or one whose zone has blanks, a search domain or option
// that is empty or contains blanks or a NUL) is left out; header lines have
// line breaks and NULs replaced by spaces instead.
func Render(s Spec) []byte {
	var b bytes.Buffer
	for _, h := range s.Header {
		b.WriteString(commentLine(h))
		b.WriteByte('\n')
	}
	for _, a := range s.Nameservers {
		if nameserverOK(a) {
			b.WriteString("nameserver " + a.String() + "\n")
		}
	}
	writeWords(&b, "search", s.Search)
	writeWords(&b, "options", s.Options)
	return b.Bytes()
}

// nameserverOK reports whether a nameserver line for a parses back to a.
func nameserverOK(a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	l, _ := parseLine("nameserver " + a.String())
	return l.Kind == Nameserver && l.Addr == a
}

// wordOK reports whether w survives a round trip as one word of a line.
func wordOK(w string) bool {
	return w != "" && !strings.ContainsAny(w, " \t\r\v\f\n\x00")
}

// writeWords writes "keyword w1 w2 ...\n" with the valid words, or nothing.
func writeWords(b *bytes.Buffer, keyword string, ws []string) {
	n := 0
	for _, w := range ws {
		if !wordOK(w) {
			continue
		}
		if n == 0 {
			b.WriteString(keyword)
		}
		b.WriteByte(' ')
		b.WriteString(w)
		n++
	}
	if n > 0 {
		b.WriteByte('\n')
	}
}
