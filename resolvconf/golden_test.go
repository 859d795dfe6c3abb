package resolvconf

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodedns/nodedns/internal/testutil/golden"

	"github.com/google/go-cmp/cmp"
)

// inputs returns the fixture files under testdata/in: the files quoted in the
// incident reports (seeds 001, 002, 003), systemd-resolved 252's generated
// files, a dhclient-written file, an AWS one, a CRLF one and a messy one.
func inputs(tb testing.TB) map[string][]byte {
	tb.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "in", "*.conf"))
	if err != nil {
		tb.Fatal(err)
	}
	if len(paths) < 10 {
		tb.Fatalf("found %d fixtures under testdata/in, want at least 10", len(paths))
	}
	out := make(map[string][]byte)
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		out[strings.TrimSuffix(filepath.Base(p), ".conf")] = data
	}
	return out
}

// describe renders what Parse read, for the golden files.
func describe(f *File) string {
	var b strings.Builder
	b.WriteString("lines:\n")
	for _, l := range f.Lines {
		fmt.Fprintf(&b, "  %d %s %q", l.Num, l.Kind, l.Raw)
		switch l.Kind {
		case Nameserver:
			fmt.Fprintf(&b, " addr=%s", l.Addr)
		case Search, Domain:
			fmt.Fprintf(&b, " domains=%q", l.Domains)
		case Options:
			fmt.Fprintf(&b, " options=%q", l.Options)
		case Unknown:
			fmt.Fprintf(&b, " problem=%q", l.Problem)
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "nameservers: %v\n", f.Nameservers())
	fmt.Fprintf(&b, "search: %q\n", f.Search())
	fmt.Fprintf(&b, "search line length: %d\n", f.SearchLineLen())
	fmt.Fprintf(&b, "options: %q\n", f.Options())
	b.WriteString("warnings:\n")
	for _, w := range f.Warnings() {
		fmt.Fprintf(&b, "  %s\n", w)
	}
	return b.String()
}

func TestGolden(t *testing.T) {
	for name, data := range inputs(t) {
		t.Run(name, func(t *testing.T) {
			f, err := Parse(data)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := f.Bytes(); !bytes.Equal(got, data) {
				t.Errorf("Bytes() differs from the input (-want +got):\n%s", cmp.Diff(string(data), string(got)))
			}
			got := describe(f)
			golden.Check(t, filepath.Join("testdata", "golden", name+".golden"), []byte(got))
		})
	}
}
