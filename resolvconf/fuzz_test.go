package resolvconf

import (
	"bytes"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fuzzEdits are the edits FuzzParse applies, one at a time to a fresh parse
// and all in a row to one File.
var fuzzEdits = []struct {
	name string
	do   func(*File)
}{
	{"remove ipv4 nameservers", func(f *File) { f.RemoveNameservers(netip.Addr.Is4) }},
	{"remove all nameservers", func(f *File) { f.RemoveNameservers(func(netip.Addr) bool { return true }) }},
	{"filter odd-length domains", func(f *File) { f.FilterSearch(func(d string) bool { return len(d)%2 == 0 }) }},
	{"filter all domains", func(f *File) { f.FilterSearch(func(string) bool { return false }) }},
	{"add nameservers", func(f *File) {
		f.AddNameservers([]netip.Addr{netip.MustParseAddr("192.0.2.53"), netip.MustParseAddr("fe80::53%eth0"), {}})
	}},
	{"remove trust-ad", func(f *File) { f.RemoveOption("trust-ad") }},
	{"remove first option", func(f *File) {
		if opts := f.Options(); len(opts) > 0 {
			f.RemoveOption(opts[0])
		}
	}},
	{"ensure header", func(f *File) { f.EnsureHeader("managed by nodedns") }},
}

func FuzzParse(f *testing.F) {
	for _, data := range inputs(f) {
		f.Add(data)
	}
	for _, s := range []string{
		"", "\n", "\r\n", "a", "nameserver", "nameserver 10.1", "nameserver fe80::1%",
		"search\r", "domain a b\nsearch\n", "options ndots:5\toptions\r\n", "\tnameserver 10.0.0.1",
		"nameserver 0x7f.1\nnameserver 010.0.0.1\nnameserver 4294967295\n",
		"search a # b\r\nnameserver 10.0.0.1 # c\r", "sortlist 10.0.0.0/255.0.0.0",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data)
		if err != nil {
			var pe *ParseError
			switch {
			case errors.Is(err, ErrTooLarge) && len(data) > MaxSize:
			case errors.As(err, &pe) && bytes.IndexByte(data, 0) >= 0:
			default:
				t.Fatalf("Parse refused %q: %v", data, err)
			}
			return
		}
		if bytes.IndexByte(data, 0) >= 0 {
			t.Fatalf("Parse accepted a NUL byte in %q", data)
		}
		if got := file.Bytes(); !bytes.Equal(got, data) {
			t.Fatalf("Bytes() = %q, want the input %q", got, data)
		}
		_ = file.Warnings()
		_ = file.SearchLineLen()
		_ = file.Kubelet()

		// Render of the effective values reads back the same.
		spec := Spec{Header: []string{"x"}, Nameservers: file.Nameservers(), Search: file.Search(), Options: file.Options()}
		if err := spec.Validate(); err != nil {
			t.Fatalf("the values of %q do not validate: %v", data, err)
		}
		r, err := Parse(Render(spec))
		if err != nil {
			t.Fatalf("Parse(Render()): %v", err)
		}
		if diff := cmp.Diff(spec.Nameservers, r.Nameservers(), addrCmp); diff != "" {
			t.Errorf("Render nameservers (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(spec.Search, r.Search()); diff != "" {
			t.Errorf("Render search (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(spec.Options, r.Options()); diff != "" {
			t.Errorf("Render options (-want +got):\n%s", diff)
		}

		all, _ := Parse(data)
		for _, e := range fuzzEdits {
			one, _ := Parse(data)
			e.do(one)
			checkReparse(t, one)
			e.do(all)
			checkReparse(t, all)
		}
	})
}

func BenchmarkParse(b *testing.B) {
	data, err := os.ReadFile(filepath.Join("testdata", "in", "resolved252-stub.conf"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		f, err := Parse(data)
		if err != nil {
			b.Fatal(err)
		}
		if len(f.Nameservers()) != 1 {
			b.Fatal("want one nameserver")
		}
	}
}
