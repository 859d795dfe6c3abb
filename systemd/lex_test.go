package systemd

import (
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
