package probes

import (
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

func TestParseCorefile(t *testing.T) {
	got, err := ParseCorefile([]byte(corefile))
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
		a, file, ok := forwardTarget(tc.to)
		if !ok || file != tc.file || (tc.addr != "" && a.String() != tc.addr) {
			t.Errorf("forwardTarget(%q) = %v %q %v", tc.to, a, file, ok)
		}
	}
	if _, err := ParseCorefile([]byte(".:53 {\n forward . 1.1.1.1\n")); err == nil {
		t.Error("an unclosed block parsed without error")
	}
}

func FuzzParseCorefile(f *testing.F) {
	f.Add([]byte(corefile))
	f.Add([]byte("}\n{{\nforward"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fws, _ := ParseCorefile(data)
		for _, fw := range fws {
			if len(fw.To) == 0 {
				t.Fatalf("forward without a target: %+v", fw)
			}
			for _, to := range fw.To {
				forwardTarget(to)
			}
		}
	})
}
