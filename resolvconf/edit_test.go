package resolvconf

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// mustParse parses in or fails the test.
func mustParse(t *testing.T, in string) *File {
	t.Helper()
	f, err := Parse([]byte(in))
	if err != nil {
		t.Fatalf("Parse(%q): %v", in, err)
	}
	return f
}

// checkReparse asserts that the edited File reads back unchanged: Parse of
// its bytes gives the same lines (up to Num) and effective values. It
// compares by hand and calls cmp.Diff only to explain a difference: the fuzz
// target runs it on inputs of many thousand lines.
func checkReparse(t *testing.T, f *File) {
	t.Helper()
	g, err := Parse(f.Bytes())
	if err != nil {
		t.Fatalf("Parse(f.Bytes()): %v", err)
	}
	if !sameLines(f.Lines, g.Lines) {
		t.Errorf("lines after reparse differ (-edited +reparsed):\n%s", cmp.Diff(stripNum(f.Lines), stripNum(g.Lines), addrCmp))
	}
	if a, b := f.Nameservers(), g.Nameservers(); !slices.Equal(a, b) {
		t.Errorf("Nameservers() after reparse (-edited +reparsed):\n%s", cmp.Diff(a, b, addrCmp))
	}
	if a, b := f.Search(), g.Search(); !slices.Equal(a, b) {
		t.Errorf("Search() after reparse (-edited +reparsed):\n%s", cmp.Diff(a, b))
	}
	if a, b := f.Options(), g.Options(); !slices.Equal(a, b) {
		t.Errorf("Options() after reparse (-edited +reparsed):\n%s", cmp.Diff(a, b))
	}
}

// sameLines compares lines ignoring Num; nil and empty word lists are equal.
func sameLines(a, b []Line) bool {
	return slices.EqualFunc(a, b, func(x, y Line) bool {
		return x.Kind == y.Kind && x.Raw == y.Raw && x.Addr == y.Addr && x.Problem == y.Problem &&
			slices.Equal(x.Domains, y.Domains) && slices.Equal(x.Options, y.Options)
	})
}

func stripNum(ls []Line) []Line {
	out := slices.Clone(ls)
	for i := range out {
		out[i].Num = 0
	}
	return out
}

func inSet(addrs ...string) func(netip.Addr) bool {
	return func(a netip.Addr) bool {
		return slices.Contains(addrs, a.String())
	}
}

func TestRemoveNameservers(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		drop    func(netip.Addr) bool
		want    string
		removed []netip.Addr
	}{
		{
			name:    "seed 002: kubespray host file loses the cache",
			in:      "domain cluster.local\nsearch cluster.local default.svc.cluster.local. svc.cluster.local.\nnameserver 169.254.25.10\n",
			drop:    inSet("169.254.25.10"),
			want:    "domain cluster.local\nsearch cluster.local default.svc.cluster.local. svc.cluster.local.\n",
			removed: []netip.Addr{ip("169.254.25.10")},
		},
		{
			name:    "seed 001: node-cache file keeps the LAN server",
			in:      "search default.svc.cluster.local svc.cluster.local example.org\nnameserver 169.254.25.10\nnameserver 192.168.110.10\n",
			drop:    inSet("169.254.25.10"),
			want:    "search default.svc.cluster.local svc.cluster.local example.org\nnameserver 192.168.110.10\n",
			removed: []netip.Addr{ip("169.254.25.10")},
		},
		{
			name:    "comments, options, unknown and hostname lines stay",
			in:      "# keep me\nnameserver 10.0.0.1   # cache\noptions ndots:2\nnameserver dns.example\n  nameserver 10.0.0.1\nnameserver\t10.0.0.2\n",
			drop:    inSet("10.0.0.1"),
			want:    "# keep me\noptions ndots:2\nnameserver dns.example\n  nameserver 10.0.0.1\nnameserver\t10.0.0.2\n",
			removed: []netip.Addr{ip("10.0.0.1")},
		},
		{
			name:    "duplicates all go, in order",
			in:      "nameserver 10.0.0.1\nnameserver 10.0.0.2\nnameserver 10.0.0.1\n",
			drop:    inSet("10.0.0.1", "10.0.0.2"),
			want:    "",
			removed: []netip.Addr{ip("10.0.0.1"), ip("10.0.0.2"), ip("10.0.0.1")},
		},
		{
			name:    "last line without newline: the new last line keeps its own",
			in:      "search a\nnameserver 10.0.0.2\nnameserver 10.0.0.1",
			drop:    inSet("10.0.0.1"),
			want:    "search a\nnameserver 10.0.0.2\n",
			removed: []netip.Addr{ip("10.0.0.1")},
		},
		{
			name: "middle line of a file without final newline",
			in:   "nameserver 10.0.0.1\nsearch a",
			drop: inSet("10.0.0.1"),
			want: "search a",
			removed: []netip.Addr{
				ip("10.0.0.1"),
			},
		},
		{
			name:    "crlf line removed, others untouched",
			in:      "nameserver 10.0.0.1\r\nnameserver 10.0.0.2\r\n",
			drop:    inSet("10.0.0.1"),
			want:    "nameserver 10.0.0.2\r\n",
			removed: []netip.Addr{ip("10.0.0.1")},
		},
		{
			name:    "zone matters",
			in:      "nameserver fe80::1%eth0\nnameserver fe80::1%eth1\n",
			drop:    func(a netip.Addr) bool { return a == ip("fe80::1%eth1") },
			want:    "nameserver fe80::1%eth0\n",
			removed: []netip.Addr{ip("fe80::1%eth1")},
		},
		{
			name: "nothing to drop",
			in:   "nameserver 10.0.0.1",
			drop: inSet("10.9.9.9"),
			want: "nameserver 10.0.0.1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := mustParse(t, tt.in)
			removed := f.RemoveNameservers(tt.drop)
			if got := string(f.Bytes()); got != tt.want {
				t.Errorf("Bytes() = %q, want %q", got, tt.want)
			}
			if diff := cmp.Diff(tt.removed, removed, addrCmp); diff != "" {
				t.Errorf("removed (-want +got):\n%s", diff)
			}
			checkReparse(t, f)
		})
	}
}

func TestFilterSearch(t *testing.T) {
	notIn := func(drop ...string) func(string) bool {
		return func(d string) bool {
			return !slices.Contains(drop, CanonicalDomain(d))
		}
	}
	tests := []struct {
		name    string
		in      string
		keep    func(string) bool
		want    string
		removed []string
	}{
		{
			name:    "seed 001: stub file loses the DHCP domain",
			in:      "nameserver 127.0.0.53\noptions edns0 trust-ad\nsearch default.svc.cluster.local svc.cluster.local example.org\n",
			keep:    notIn("example.org"),
			want:    "nameserver 127.0.0.53\noptions edns0 trust-ad\nsearch default.svc.cluster.local svc.cluster.local\n",
			removed: []string{"example.org"},
		},
		{
			name:    "seed 002: cluster domains leave both lines; the domain line goes",
			in:      "domain cluster.local\nsearch cluster.local default.svc.cluster.local. svc.cluster.local.\nnameserver 169.254.25.10\n",
			keep:    notIn("cluster.local", "default.svc.cluster.local", "svc.cluster.local"),
			want:    "nameserver 169.254.25.10\n",
			removed: []string{"cluster.local", "cluster.local", "default.svc.cluster.local.", "svc.cluster.local."},
		},
		{
			name:    "every line is filtered, not only the effective one",
			in:      "domain example.org\nsearch example.org  corp.example\tlab.example\n# note\nsearch old.example EXAMPLE.ORG.\n",
			keep:    notIn("example.org"),
			want:    "search corp.example lab.example\n# note\nsearch old.example\n",
			removed: []string{"example.org", "example.org", "EXAMPLE.ORG."},
		},
		{
			name:    "untouched lines keep their spacing and CR",
			in:      "search  a.example\tb.example\r\nsearch c.example example.org\r\n",
			keep:    notIn("example.org"),
			want:    "search  a.example\tb.example\r\nsearch c.example\n",
			removed: []string{"example.org"},
		},
		{
			name:    "removing the effective line makes the earlier one effective",
			in:      "search a.example\nsearch example.org\n",
			keep:    notIn("example.org"),
			want:    "search a.example\n",
			removed: []string{"example.org"},
		},
		{
			name:    "domain line keeps its keyword",
			in:      "domain example.org lab.example\n",
			keep:    notIn("example.org"),
			want:    "domain lab.example\n",
			removed: []string{"example.org"},
		},
		{
			name: "empty search line is left alone",
			in:   "search\nsearch a\n",
			keep: notIn("b"),
			want: "search\nsearch a\n",
		},
		{
			name:    "last line without newline",
			in:      "nameserver 10.0.0.1\nsearch example.org",
			keep:    notIn("example.org"),
			want:    "nameserver 10.0.0.1\n",
			removed: []string{"example.org"},
		},
		{
			name:    "indented search line is not a search line",
			in:      " search example.org\n",
			keep:    notIn("example.org"),
			want:    " search example.org\n",
			removed: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := mustParse(t, tt.in)
			removed := f.FilterSearch(tt.keep)
			if got := string(f.Bytes()); got != tt.want {
				t.Errorf("Bytes() = %q, want %q", got, tt.want)
			}
			if diff := cmp.Diff(tt.removed, removed); diff != "" {
				t.Errorf("removed (-want +got):\n%s", diff)
			}
			checkReparse(t, f)
		})
	}
}

func TestFilterSearchCallsKeepOncePerDomain(t *testing.T) {
	f := mustParse(t, "domain a\nsearch a b c\nsearch d\n")
	var seen []string
	f.FilterSearch(func(d string) bool {
		seen = append(seen, d)
		return d != "b"
	})
	if diff := cmp.Diff([]string{"a", "a", "b", "c", "d"}, seen); diff != "" {
		t.Errorf("keep called with (-want +got):\n%s", diff)
	}
}

func TestAddNameservers(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		addrs []netip.Addr
		want  string
	}{
		{
			name:  "after the last nameserver line",
			in:    "# head\nnameserver 10.0.0.1\nsearch a\nnameserver 10.0.0.2\noptions ndots:2\n",
			addrs: []netip.Addr{ip("192.0.2.1"), ip("2001:db8::1")},
			want:  "# head\nnameserver 10.0.0.1\nsearch a\nnameserver 10.0.0.2\nnameserver 192.0.2.1\nnameserver 2001:db8::1\noptions ndots:2\n",
		},
		{
			name:  "after the last search or domain line when no nameserver",
			in:    "domain cluster.local\nsearch cluster.local default.svc.cluster.local. svc.cluster.local.\noptions ndots:2\n",
			addrs: []netip.Addr{ip("192.168.1.1")},
			want:  "domain cluster.local\nsearch cluster.local default.svc.cluster.local. svc.cluster.local.\nnameserver 192.168.1.1\noptions ndots:2\n",
		},
		{
			name:  "at the end when neither",
			in:    "# only a comment\noptions edns0\n",
			addrs: []netip.Addr{ip("192.168.1.1")},
			want:  "# only a comment\noptions edns0\nnameserver 192.168.1.1\n",
		},
		{
			name:  "at the end of a file without final newline",
			in:    "options edns0",
			addrs: []netip.Addr{ip("192.168.1.1")},
			want:  "options edns0\nnameserver 192.168.1.1\n",
		},
		{
			name:  "in the middle of a file without final newline",
			in:    "nameserver 10.0.0.1\noptions edns0",
			addrs: []netip.Addr{ip("192.168.1.1")},
			want:  "nameserver 10.0.0.1\nnameserver 192.168.1.1\noptions edns0",
		},
		{
			name:  "empty file",
			in:    "",
			addrs: []netip.Addr{ip("192.168.1.1")},
			want:  "nameserver 192.168.1.1\n",
		},
		{
			name:  "hostname nameserver lines do not count",
			in:    "nameserver dns.example\nsearch a\n",
			addrs: []netip.Addr{ip("192.168.1.1")},
			want:  "nameserver dns.example\nsearch a\nnameserver 192.168.1.1\n",
		},
		{
			name:  "zone kept, invalid skipped",
			in:    "search a\n",
			addrs: []netip.Addr{{}, ip("fe80::53%eth0"), ip("fe80::1").WithZone("bad zone"), ip("::ffff:10.0.0.1")},
			want:  "search a\nnameserver fe80::53%eth0\nnameserver ::ffff:10.0.0.1\n",
		},
		{
			name:  "nothing to add",
			in:    "search a",
			addrs: nil,
			want:  "search a",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := mustParse(t, tt.in)
			f.AddNameservers(tt.addrs)
			if got := string(f.Bytes()); got != tt.want {
				t.Errorf("Bytes() = %q, want %q", got, tt.want)
			}
			checkReparse(t, f)
		})
	}
}

func TestRemoveOption(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		option string
		want   string
		ok     bool
	}{
		{"from a line with others", "nameserver 127.0.0.53\noptions edns0 trust-ad\nsearch a\n", "trust-ad", "nameserver 127.0.0.53\noptions edns0\nsearch a\n", true},
		{"line left empty is removed", "options trust-ad\nnameserver 10.0.0.1\n", "trust-ad", "nameserver 10.0.0.1\n", true},
		{"every line", "options trust-ad  rotate\noptions\ttrust-ad\noptions edns0 trust-ad\n", "trust-ad", "options rotate\noptions edns0\n", true},
		{"name matches name:value", "options ndots:5 edns0\n", "ndots", "options edns0\n", true},
		{"name:value matches exactly", "options ndots:5 ndots:2\n", "ndots:2", "options ndots:5\n", true},
		{"prefix is not a match", "options trust-adx single-request-reopen\n", "trust-ad", "options trust-adx single-request-reopen\n", false},
		{"absent", "options edns0\n", "trust-ad", "options edns0\n", false},
		{"comment mentioning it stays", "# options trust-ad\n", "trust-ad", "# options trust-ad\n", false},
		{"empty name removes nothing", "options :x edns0\n", "", "options :x edns0\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := mustParse(t, tt.in)
			if got := f.RemoveOption(tt.option); got != tt.ok {
				t.Errorf("RemoveOption(%q) = %v, want %v", tt.option, got, tt.ok)
			}
			if got := string(f.Bytes()); got != tt.want {
				t.Errorf("Bytes() = %q, want %q", got, tt.want)
			}
			checkReparse(t, f)
		})
	}
}

func TestEnsureHeader(t *testing.T) {
	const text = "Managed by nodedns: edits are kept, loop addresses removed"
	tests := []struct {
		name string
		in   string
		text string
		want string
	}{
		{"adds it", "nameserver 10.0.0.1\n", text, "# " + text + "\nnameserver 10.0.0.1\n"},
		{"already there", "# " + text + "\nnameserver 10.0.0.1\n", text, "# " + text + "\nnameserver 10.0.0.1\n"},
		{"another comment first", "# Generated by dhclient\nnameserver 10.0.0.1\n", text, "# " + text + "\n# Generated by dhclient\nnameserver 10.0.0.1\n"},
		{"exact match only", "#" + text + "\n", text, "# " + text + "\n#" + text + "\n"},
		{"empty file", "", text, "# " + text + "\n"},
		{"file without final newline", "nameserver 10.0.0.1", text, "# " + text + "\nnameserver 10.0.0.1"},
		{"line breaks become spaces", "", "a\nb\r\x00c", "# a b  c\n"},
		{"empty text", "search a\n", "", "#\nsearch a\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := mustParse(t, tt.in)
			f.EnsureHeader(tt.text)
			if got := string(f.Bytes()); got != tt.want {
				t.Errorf("Bytes() = %q, want %q", got, tt.want)
			}
			checkReparse(t, f)
			f.EnsureHeader(tt.text)
			if got := string(f.Bytes()); got != tt.want {
				t.Errorf("second EnsureHeader changed the file to %q", got)
			}
		})
	}
}

// TestEditHostFile runs the edits nodedns makes to a regular /etc/resolv.conf
// (docs/contract.md) on the file kubespray left behind in seed 002, and on a
// dhclient-written file with a DHCP search domain (seed 001).
func TestEditHostFile(t *testing.T) {
	loop := inSet("169.254.25.10", "169.254.20.10", "10.233.0.3")
	t.Run("seed 002", func(t *testing.T) {
		f := mustParse(t, "domain cluster.local\nsearch cluster.local default.svc.cluster.local. svc.cluster.local.\nnameserver 169.254.25.10\n")
		f.EnsureHeader("managed by nodedns")
		f.RemoveNameservers(loop)
		f.FilterSearch(func(d string) bool {
			d = CanonicalDomain(d)
			return d != "cluster.local" && !strings.HasSuffix(d, ".cluster.local")
		})
		if len(f.Nameservers()) == 0 {
			f.AddNameservers([]netip.Addr{ip("192.168.2.1")})
		}
		want := "# managed by nodedns\nnameserver 192.168.2.1\n"
		if got := string(f.Bytes()); got != want {
			t.Errorf("Bytes() = %q, want %q", got, want)
		}
		checkReparse(t, f)
	})
	t.Run("dhclient with a DHCP domain", func(t *testing.T) {
		f := mustParse(t, "# Generated by dhclient\ndomain example.org\nsearch example.org. lab.example\nnameserver 169.254.25.10\nnameserver 192.168.1.1\noptions timeout:2 trust-ad\n")
		f.EnsureHeader("managed by nodedns")
		f.RemoveNameservers(loop)
		f.FilterSearch(func(d string) bool { return CanonicalDomain(d) != "example.org" })
		f.RemoveOption("trust-ad")
		want := "# managed by nodedns\n# Generated by dhclient\nsearch lab.example\nnameserver 192.168.1.1\noptions timeout:2\n"
		if got := string(f.Bytes()); got != want {
			t.Errorf("Bytes() = %q, want %q", got, want)
		}
		checkReparse(t, f)
	})
}
