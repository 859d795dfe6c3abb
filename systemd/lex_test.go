package systemd

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPhysLines: the line ends of read_line (fileio.c 252), where a run of distinct line-end bytes
// is one line end.
func TestPhysLines(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []physLine
	}{
		{"a\nb", []physLine{{"a", "\n"}, {"b", ""}}},
		{"a\r\nb\n", []physLine{{"a", "\r\n"}, {"b", "\n"}}},
		{"a\n\rb", []physLine{{"a", "\n\r"}, {"b", ""}}},
		{"a\n\nb", []physLine{{"a", "\n"}, {"", "\n"}, {"b", ""}}},
		{"a\r\rb", []physLine{{"a", "\r"}, {"", "\r"}, {"b", ""}}},
		{"a\r\n\rb", []physLine{{"a", "\r\n"}, {"", "\r"}, {"b", ""}}},
		{"a\n\x00b", []physLine{{"a", "\n\x00"}, {"b", ""}}},
		{"a\r\x00b", []physLine{{"a", "\r\x00"}, {"b", ""}}},
		{"a\r\n\x00b", []physLine{{"a", "\r\n\x00"}, {"b", ""}}},
		{"a\n\r\x00b", []physLine{{"a", "\n\r\x00"}, {"b", ""}}},
		{"a\x00\nb", []physLine{{"a", "\x00"}, {"", "\n"}, {"b", ""}}},
		{"\n", []physLine{{"", "\n"}}},
		{"", nil},
	} {
		got := physLines([]byte(tc.in))
		if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(physLine{})); diff != "" {
			t.Errorf("physLines(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
	// Joining the lines gives the input back, whatever it is.
	in := "x\r\n\x00\n\r\r\x00y\n\n"
	var b strings.Builder
	for _, l := range physLines([]byte(in)) {
		b.WriteString(l.text + l.eol)
	}
	if b.String() != in {
		t.Errorf("joined %q, want %q", b.String(), in)
	}
}

// TestReadLineEnds: line numbers and continuations over combined line ends. systemd-analyze verify
// 252 on a unit with the same lines under [Service] says "Unknown key" at lines 4, 5, 8 and 9: the
// \n\r before "still" ends one line, so the continuation reaches it.
func TestReadLineEnds(t *testing.T) {
	const p = "/etc/systemd/resolved.conf"
	cfg := &ResolvedConfig{}
	ParseResolvedConf(cfg, p, []byte("[Resolve]\n\rDNS=192.0.2.1\n\x00Domains=example.org\r\x00Foo=bar\n\r\x00Bar=1\n\nBaz=2 \\\n\rstill=continued\nQux=3\n"))
	if diff := cmp.Diff([]Setting{{p, 2}}, cfg.DNSSources); diff != "" {
		t.Errorf("DNSSources (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"example.org"}, cfg.Domains); diff != "" {
		t.Errorf("Domains (-want +got):\n%s", diff)
	}
	var warns []string
	for _, w := range cfg.Warnings {
		warns = append(warns, w.String())
	}
	want := []string{
		p + `:4: unknown key "Foo" in section [Resolve], ignoring`,
		p + `:5: unknown key "Bar" in section [Resolve], ignoring`,
		p + `:8: unknown key "Baz" in section [Resolve], ignoring`,
		p + `:9: unknown key "Qux" in section [Resolve], ignoring`,
	}
	if diff := cmp.Diff(want, warns); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}

// TestExtractWord: extract_first_word's flags as unit files, resolved.conf and networkd's state
// files use them.
func TestExtractWord(t *testing.T) {
	for _, tc := range []struct {
		in    string
		flags int
		want  []string
		err   error
	}{
		{"  a \t b  ", 0, []string{"a", "b"}, nil},
		{`a\ b "c d"`, 0, []string{"a b", `"c`, `d"`}, nil},
		{`"a b" 'c"d'e ""`, exUnquote, []string{"a b", `c"de`, ""}, nil},
		{`"a \" b"`, exUnquote, []string{`a " b`}, nil},
		{`"a b`, exUnquote, nil, errUnbalanced},
		{`"a b`, exUnquote | exRelax, []string{"a b"}, nil},
		{`a b\`, 0, []string{"a"}, errTrailingBackslash},
		{`a b\`, exRelax, []string{"a", "b"}, nil},
		{`a b\`, exUnescapeRelax, []string{"a", `b\`}, nil},
		{`\x41\s\101\u00e9 \q`, exCUnescape, []string{"A A\u00e9"}, errEscape},
		{`\q \x00`, exCUnescape | exUnescapeRelax, []string{`\q`, `\x00`}, nil},
		{`a\b "c\d" \x41`, exRetainEscape, []string{`a\b`, `"c\d"`, `\x41`}, nil},
		{"a\vb\u00a0c\fd", 0, []string{"a\vb\u00a0c\fd"}, nil},
	} {
		got, err := splitWords(tc.in, tc.flags)
		if diff := cmp.Diff(tc.want, got); diff != "" || err != tc.err {
			t.Errorf("splitWords(%q, %#x): error %v, want %v; (-want +got):\n%s", tc.in, tc.flags, err, tc.err, diff)
		}
	}
}

// FuzzExtractWord: words escaped for a set of flags come back from extractWord as they were, and
// arbitrary input never makes it panic, leave blanks at the start of the rest, or return a rest
// that is not a suffix of its input.
func FuzzExtractWord(f *testing.F) {
	f.Add("a\x00b c\x00\"q'\\", "x \"y\" \\z\\")
	f.Add("\xff\x01", "\\x41 '\"")
	f.Fuzz(func(t *testing.T, packed, raw string) {
		for _, flags := range []int{0, exUnquote, exUnquote | exCUnescape, exRelax | exUnquote, exRetainEscape,
			exCUnescape | exUnescapeRelax, exUnquote | exCUnescape | exUnescapeRelax} {
			for s := raw; ; {
				w, rest, ok, err := extractWord(s, flags)
				if !strings.HasSuffix(s, rest) || (ok && rest != "" && strings.IndexByte(whitespace, rest[0]) >= 0) {
					t.Fatalf("extractWord(%q, %#x) = %q, rest %q", s, flags, w, rest)
				}
				if !ok || err != nil {
					break
				}
				s = rest
			}
		}
		var words []string
		for _, w := range strings.Split(packed, "\x00") {
			if w != "" {
				words = append(words, w)
			}
		}
		// Flags 0: a backslash before every byte takes it literally.
		// EXTRACT_UNQUOTE: single quotes, a backslash before ' and \ inside.
		// EXTRACT_CUNESCAPE: \xNN for every byte.
		var plain, quoted, hex []string
		for _, w := range words {
			var p, q, h strings.Builder
			q.WriteByte('\'')
			for i := 0; i < len(w); i++ {
				p.WriteString("\\" + w[i:i+1])
				if w[i] == '\'' || w[i] == '\\' {
					q.WriteByte('\\')
				}
				q.WriteByte(w[i])
				fmt.Fprintf(&h, `\x%02x`, w[i])
			}
			q.WriteByte('\'')
			plain, quoted, hex = append(plain, p.String()), append(quoted, q.String()), append(hex, h.String())
		}
		for _, tc := range []struct {
			enc   []string
			flags int
		}{{plain, 0}, {quoted, exUnquote}, {hex, exCUnescape}} {
			got, err := splitWords(" "+strings.Join(tc.enc, " \t ")+"\n", tc.flags)
			if err != nil || !slices.Equal(got, words) {
				t.Fatalf("flags %#x: %q gave %q (%v), want %q", tc.flags, tc.enc, got, err, words)
			}
		}
	})
}

// FuzzParseConf feeds arbitrary files to the lexer of config_parse: physical lines join back to
// the input, and every assignment parseConf hands on is in a section the caller reads, with a key,
// both stripped, on lines that only go forward; nothing comes after a fatal line.
func FuzzParseConf(f *testing.F) {
	f.Add([]byte("\xef\xbb\xbf[Resolve]\r\nDNS=1.1.1.1 \\\n# c\n 8.8.8.8\n\r[X-a]\nk\n[b]\n=v\n[Resolve\n"))
	f.Add([]byte("a=b\x00[Unit]\n\x00Before=x\\"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var joined strings.Builder
		for _, l := range physLines(data) {
			if strings.ContainsAny(l.text, "\n\r\x00") || l.eol == "" && joined.Len()+len(l.text) != len(data) {
				t.Fatalf("line %q ends %q", l.text, l.eol)
			}
			joined.WriteString(l.text + l.eol)
		}
		if joined.String() != string(data) {
			t.Fatalf("lines join to %q", joined.String())
		}
		sections := []string{"Resolve", "Unit"}
		last, stopped := 0, false
		check := func(first, l int) {
			if stopped || first < 1 || first > l || first <= last {
				t.Fatalf("line %d-%d after %d (stopped: %v) in %q", first, l, last, stopped, data)
			}
			last = l
		}
		parseConf(data, sections, func(a confAssignment) bool {
			check(a.first, a.last)
			if !slices.Contains(sections, a.section) || a.key == "" || a.key != strings.Trim(a.key, whitespace) ||
				a.value != strings.Trim(a.value, whitespace) || !validUTF8(a.key+a.value) {
				t.Fatalf("assignment %+v from %q", a, data)
			}
			return true
		}, func(i confIssue) {
			check(i.first, i.last)
			stopped = i.fatal()
			_ = i.String()
		})
	})
}
