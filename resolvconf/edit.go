package resolvconf

import (
	"net/netip"
	"slices"
	"strings"
)

// RemoveNameservers removes every nameserver line whose address drop
// reports true, and returns those addresses in file order. Other lines,
// including nameserver lines that are not IP addresses, stay.
func (f *File) RemoveNameservers(drop func(netip.Addr) bool) (removed []netip.Addr) {
	out := make([]Line, 0, len(f.Lines))
	for i, l := range f.Lines {
		if l.Kind == Nameserver && drop(l.Addr) {
			removed = append(removed, l.Addr)
			f.removedLast(i)
			continue
		}
		out = append(out, l)
	}
	f.setLines(out)
	return removed
}

// FilterSearch removes the domains for which keep returns false from every
// search and domain line, not just the effective one, so that no earlier line
// can bring a dropped domain back. A line left with no domain is removed; a
// line that lost some is rewritten with single spaces. It returns the removed
// domains as written, in file order.
//
// Removing the effective line makes an earlier search or domain line
// effective, as it would be for glibc and musl reading the new file.
func (f *File) FilterSearch(keep func(domain string) bool) (removed []string) {
	return f.editWords(func(l *Line) *[]string {
		if l.Kind == Search || l.Kind == Domain {
			return &l.Domains
		}
		return nil
	}, keep)
}

// RemoveOption removes the option word name from every options line and
// reports whether it removed any. A name without ':' also matches the words
// "name:value" ("ndots" removes "ndots:5"). A line left empty is removed.
func (f *File) RemoveOption(name string) bool {
	if name == "" {
		return false
	}
	removed := f.editWords(func(l *Line) *[]string {
		if l.Kind == Options {
			return &l.Options
		}
		return nil
	}, func(w string) bool {
		if w == name {
			return false
		}
		if !strings.Contains(name, ":") && strings.HasPrefix(w, name+":") {
			return false
		}
		return true
	})
	return len(removed) > 0
}

// AddNameservers inserts one nameserver line per address, in order, after the
// last existing nameserver line, or, if there is none, after the last search
// or domain line, or else at the end. It does not deduplicate. An address that
// cannot be written as a nameserver line (the zero Addr, a zone with blanks)
// is skipped.
func (f *File) AddNameservers(addrs []netip.Addr) {
	var add []Line
	for _, a := range addrs {
		if nameserverOK(a) {
			add = append(add, Line{Kind: Nameserver, Raw: "nameserver " + a.String(), Addr: a})
		}
	}
	if len(add) == 0 {
		return
	}
	at := -1
	for i, l := range f.Lines {
		if l.Kind == Nameserver {
			at = i + 1
		}
	}
	if at < 0 {
		for i, l := range f.Lines {
			if l.Kind == Search || l.Kind == Domain {
				at = i + 1
			}
		}
	}
	if at < 0 {
		at = len(f.Lines)
	}
	f.insert(at, add...)
}

// EnsureHeader makes "# text" the first line, unless the first line is
// already exactly that. Line breaks and NULs in text become spaces, so the
// header stays one comment line.
func (f *File) EnsureHeader(text string) {
	raw := commentLine(text)
	if len(f.Lines) > 0 && f.Lines[0].Raw == raw {
		return
	}
	f.insert(0, Line{Kind: Comment, Raw: raw})
}

// commentLine renders text as one comment line: "# text", or "#" when empty.
func commentLine(text string) string {
	text = strings.Map(func(r rune) rune {
		switch r {
		case '\n', '\r', 0:
			return ' '
		}
		return r
	}, text)
	if text == "" {
		return "#"
	}
	return "# " + text
}

// editWords removes the words keep rejects from the word list that field
// selects on each line, calling keep once per word in file order, and returns
// the removed words. Lines whose list it empties are removed, others that
// lost words are rewritten; lines whose list is empty to begin with stay.
func (f *File) editWords(field func(*Line) *[]string, keep func(string) bool) (removed []string) {
	out := make([]Line, 0, len(f.Lines))
	for i, l := range f.Lines {
		if ws := field(&l); ws != nil && len(*ws) > 0 {
			var kept []string
			for _, w := range *ws {
				if keep(w) {
					kept = append(kept, w)
				} else {
					removed = append(removed, w)
				}
			}
			if len(kept) == 0 {
				f.removedLast(i)
				continue
			}
			if len(kept) < len(*ws) {
				*ws = kept
				l.Raw = l.Kind.String() + " " + strings.Join(kept, " ")
			}
		}
		out = append(out, l)
	}
	f.setLines(out)
	return removed
}

// setLines replaces the lines; no lines is nil, as Parse gives for "".
func (f *File) setLines(ls []Line) {
	if len(ls) == 0 {
		ls = nil
	}
	f.Lines = ls
}

// removedLast records that line i is being removed: when it is the last line
// of a file whose last line had no newline, the new last line keeps its own.
func (f *File) removedLast(i int) {
	if i == len(f.Lines)-1 {
		f.noFinalNewline = false
	}
}

// insert inserts lines before index at. Inserted lines always end in a
// newline.
func (f *File) insert(at int, lines ...Line) {
	if at == len(f.Lines) {
		f.noFinalNewline = false
	}
	f.Lines = slices.Insert(f.Lines, at, lines...)
}
