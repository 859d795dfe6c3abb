package resolvconf

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRender(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
		want string
	}{
		{
			name: "kubelet file",
			spec: Spec{
				Header:      []string{"This file is managed by nodedns. Do not edit.", "kubelet resolvConf: loop-free upstreams"},
				Nameservers: []netip.Addr{ip("192.168.1.1"), ip("2001:db8::53"), ip("fe80::1%eth0")},
				Search:      []string{"lab.example", "corp.example."},
				Options:     []string{"edns0", "ndots:2"},
			},
			want: "# This file is managed by nodedns. Do not edit.\n" +
				"# kubelet resolvConf: loop-free upstreams\n" +
				"nameserver 192.168.1.1\n" +
				"nameserver 2001:db8::53\n" +
				"nameserver fe80::1%eth0\n" +
				"search lab.example corp.example.\n" +
				"options edns0 ndots:2\n",
		},
		{
			name: "empty search and options are omitted",
			spec: Spec{Header: []string{"managed by nodedns"}, Nameservers: []netip.Addr{ip("169.254.169.253")}},
			want: "# managed by nodedns\nnameserver 169.254.169.253\n",
		},
		{
			name: "entries that cannot be written are left out",
			spec: Spec{
				Header:      []string{"two\nlines", ""},
				Nameservers: []netip.Addr{{}, ip("10.0.0.1"), ip("fe80::1").WithZone("a b")},
				Search:      []string{"", "a b", "ok.example", "nul\x00"},
				Options:     []string{"\t", "rotate"},
			},
			want: "# two lines\n#\nnameserver 10.0.0.1\nsearch ok.example\noptions rotate\n",
		},
		{
			name: "only invalid search words: no search line",
			spec: Spec{Nameservers: []netip.Addr{ip("10.0.0.1")}, Search: []string{" "}},
			want: "nameserver 10.0.0.1\n",
		},
		{
			name: "zero spec",
			spec: Spec{},
			want: "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Render(tt.spec)
			if string(got) != tt.want {
				t.Errorf("Render() = %q, want %q", got, tt.want)
			}
			if again := Render(tt.spec); string(again) != string(got) {
				t.Errorf("Render() is not deterministic: %q then %q", got, again)
			}
			f, err := Parse(got)
			if err != nil {
				t.Fatalf("Parse(Render()): %v", err)
			}
			if w := f.Warnings(); len(w) != 0 {
				t.Errorf("Render() output has warnings: %v", w)
			}
			var wantNS []netip.Addr
			for _, a := range tt.spec.Nameservers {
				if nameserverOK(a) {
					wantNS = append(wantNS, a)
				}
			}
			if diff := cmp.Diff(wantNS, f.Nameservers(), addrCmp); diff != "" {
				t.Errorf("Nameservers() of the output (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSpecValidate(t *testing.T) {
	ok := Spec{
		Header:      []string{"managed by nodedns"},
		Nameservers: []netip.Addr{ip("10.0.0.1")},
		Search:      []string{"a.example."},
		Options:     []string{"ndots:2"},
	}
	if err := ok.Validate(); err != nil {
		t.Errorf("Validate() = %v, want nil", err)
	}
	bad := Spec{
		Header:      []string{"a\nb"},
		Nameservers: []netip.Addr{{}},
		Search:      []string{"a b"},
		Options:     []string{""},
	}
	want := "header line 1: contains a line break or NUL\n" +
		"nameserver 1: \"invalid IP\" cannot be written as a nameserver line\n" +
		"search domain 1: \"a b\" is empty or contains blanks or a NUL\n" +
		"option 1: \"\" is empty or contains blanks or a NUL"
	if err := bad.Validate(); err == nil || err.Error() != want {
		t.Errorf("Validate() = %v, want %q", err, want)
	}
}
