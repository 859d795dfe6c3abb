package probes

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const corefile = `# kubespray nodelocaldns
cluster.local:53 {
    errors
    cache {
        success 9984 30
        denial 9984 5
    }
    reload
    loop
    bind 169.254.25.10
    forward . 10.233.0.3 {
        force_tcp
    }
}
in-addr.arpa:53 {
    bind 169.254.25.10
    forward . 10.233.0.3 { force_tcp }
}
.:53 {
    bind 169.254.25.10
    forward . /etc/resolv.conf dns://10.0.0.2:53 [fd00::2]:53
}
`

// parseCorefile is what the live host reads of a Corefile (internal/live): its server blocks, and
// their forward lines.
func parseCorefile(data []byte) ([]Forward, error) {
	blocks, err := ParseServerBlocks(data)
	return AllForwards(blocks), err
}

func TestParseCorefile(t *testing.T) {
	got, err := parseCorefile([]byte(corefile))
	if err != nil {
		t.Fatal(err)
	}
	want := []Forward{
		{Zones: []string{"cluster.local"}, From: ".", To: []string{"10.233.0.3"}, Line: 11},
		{Zones: []string{"in-addr.arpa"}, From: ".", To: []string{"10.233.0.3"}, Line: 17},
		{Zones: []string{"."}, From: ".", To: []string{"/etc/resolv.conf", "dns://10.0.0.2:53", "[fd00::2]:53"}, Line: 21},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("forwards (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		to   string
		addr string
		file string
	}{{"dns://10.0.0.2:53", "10.0.0.2", ""}, {"[fd00::2]:53", "fd00::2", ""}, {"127.0.0.53", "127.0.0.53", ""}, {"/etc/resolv.conf", "", "/etc/resolv.conf"}} {
		a, file, ok := ForwardTarget(tc.to)
		if !ok || file != tc.file || (tc.addr != "" && a.String() != tc.addr) {
			t.Errorf("ForwardTarget(%q) = %v %q %v", tc.to, a, file, ok)
		}
	}
	if _, err := parseCorefile([]byte(".:53 {\n forward . 1.1.1.1\n")); err == nil {
		t.Error("an unclosed block parsed without error")
	}
}

func FuzzParseCorefile(f *testing.F) {
	f.Add([]byte(corefile))
	f.Add([]byte("}\n{{\nforward"))
	f.Add([]byte(".:53 {\n kubernetes cluster.local in-addr.arpa {\n  fallthrough in-addr.arpa\n }\n forward . /etc/resolv.conf\n}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		blocks, _ := ParseServerBlocks(data)
		for _, z := range []string{"cluster.local", "in-addr.arpa", "."} {
			if b := BlockFor(blocks, z); b != nil {
				b.Kubernetes.Answers(z)
			}
		}
		fws := AllForwards(blocks)
		for _, fw := range fws {
			if len(fw.To) == 0 {
				t.Fatalf("forward without a target: %+v", fw)
			}
			for _, to := range fw.To {
				ForwardTarget(to)
			}
		}
	})
}

// TestParseCorefileTable reads one Corefile shape per row: which forward lines count (those directly in
// a server block) and the zones they serve.
func TestParseCorefileTable(t *testing.T) {
	tests := []struct {
		name, corefile string
		want           []Forward
		err            string
	}{
		{
			name:     "several keys on one server block",
			corefile: "cluster.local:53 in-addr.arpa:53 ip6.arpa:53 {\n    forward . 10.233.0.3\n}\n",
			want:     []Forward{{Zones: []string{"cluster.local", "in-addr.arpa", "ip6.arpa"}, From: ".", To: []string{"10.233.0.3"}, Line: 2}},
		},
		{
			name:     "a comma list of keys",
			corefile: "a.example,b.example:53 {\n forward . 10.0.0.1\n}\n",
			want:     []Forward{{Zones: []string{"a.example", "b.example"}, From: ".", To: []string{"10.0.0.1"}, Line: 2}},
		},
		{
			name:     "a scheme, a trailing dot and capitals in the key",
			corefile: "dns://Example.COM.:53 {\n forward . 10.0.0.1\n}\n",
			want:     []Forward{{Zones: []string{"example.com"}, From: ".", To: []string{"10.0.0.1"}, Line: 2}},
		},
		{
			name:     "the root zone without a port; FROM with a port",
			corefile: ". {\n forward example.org:53 10.0.0.1\n}\n",
			want:     []Forward{{Zones: []string{"."}, From: "example.org", To: []string{"10.0.0.1"}, Line: 2}},
		},
		{
			name:     "options of forward are not targets",
			corefile: ".:53 {\n forward . 10.0.0.1 10.0.0.2 { force_tcp }\n forward example.org 10.0.0.3 {\n  except a.example.org\n  policy sequential\n }\n}\n",
			want: []Forward{
				{Zones: []string{"."}, From: ".", To: []string{"10.0.0.1", "10.0.0.2"}, Line: 2},
				{Zones: []string{"."}, From: "example.org", To: []string{"10.0.0.3"}, Line: 3},
			},
		},
		{
			name:     "a forward word inside another plugin's block",
			corefile: ".:53 {\n cache {\n  forward . 9.9.9.9\n }\n}\n",
		},
		{
			name:     "comments",
			corefile: "# forward . 1.1.1.1\n.:53 { # the default zone\n # forward . 8.8.8.8\n forward . 10.0.0.1 # was 1.1.1.1\n}\n",
			want:     []Forward{{Zones: []string{"."}, From: ".", To: []string{"10.0.0.1"}, Line: 4}},
		},
		{
			name:     "forward without a target",
			corefile: ".:53 {\n forward .\n}\n",
		},
		{
			name:     "each server block has its own zones",
			corefile: "cluster.local {\n  forward . 10.233.0.3\n}\n. {\n  forward . /etc/resolv.conf\n}\n",
			want: []Forward{
				{Zones: []string{"cluster.local"}, From: ".", To: []string{"10.233.0.3"}, Line: 2},
				{Zones: []string{"."}, From: ".", To: []string{"/etc/resolv.conf"}, Line: 5},
			},
		},
		{
			name:     "a closing brace too many",
			corefile: ".:53 {\n forward . 10.0.0.1\n}\n}\n",
			want:     []Forward{{Zones: []string{"."}, From: ".", To: []string{"10.0.0.1"}, Line: 2}},
			err:      "line 4: unbalanced }",
		},
		{
			name:     "a block left open",
			corefile: ".:53 {\n cache {\n forward . 10.0.0.1\n",
			err:      "unbalanced {: 2 block(s) not closed",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseCorefile([]byte(tc.corefile))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("forwards (-want +got):\n%s", diff)
			}
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("error %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("error %v, want one saying %q", err, tc.err)
			}
		})
	}
}

func TestForwardTarget(t *testing.T) {
	tests := []struct {
		to, addr, file string
		ok             bool
	}{
		{to: "10.0.0.2", addr: "10.0.0.2", ok: true},
		{to: "10.0.0.2:5353", addr: "10.0.0.2", ok: true},
		{to: "dns://10.0.0.2:53", addr: "10.0.0.2", ok: true},
		{to: "tls://1.1.1.1", addr: "1.1.1.1", ok: true},
		{to: "[fd00::2]:53", addr: "fd00::2", ok: true},
		{to: "dns://[fd00::2]:53", addr: "fd00::2", ok: true},
		{to: "fd00::2", addr: "fd00::2", ok: true},
		{to: "[fd00::2]", addr: "fd00::2", ok: true},
		{to: "::ffff:10.0.0.1", addr: "10.0.0.1", ok: true},
		{to: "127.0.0.53", addr: "127.0.0.53", ok: true},
		{to: "/etc/resolv.conf", file: "/etc/resolv.conf", ok: true},
		{to: "resolv.conf"},
		{to: "{$UPSTREAM}"},
		{to: "kube-dns.kube-system.svc.cluster.local"},
	}
	for _, tc := range tests {
		a, file, ok := ForwardTarget(tc.to)
		var want netip.Addr
		if tc.addr != "" {
			want = netip.MustParseAddr(tc.addr)
		}
		if a != want || file != tc.file || ok != tc.ok {
			t.Errorf("ForwardTarget(%q) = %v %q %v, want %v %q %v", tc.to, a, file, ok, want, tc.file, tc.ok)
		}
	}
}
