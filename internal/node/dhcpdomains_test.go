package node

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestDHCPDomainsStateRoundTrip(t *testing.T) {
	st := DHCPDomainsState{Links: map[string]DHCPDomainsRecord{
		"enp1s0": {Domains: []string{"example.org", "corp.example"}, From: "/run/systemd/netif/leases/2"},
		"eth1":   {Domains: []string{"lan"}, From: "/run/systemd/netif/io.systemd.Network"},
	}}
	data := MarshalDHCPDomainsState(st)
	if !strings.HasPrefix(string(data), "{\n  \"comment\": \"Managed by nodedns") || !strings.HasSuffix(string(data), "}\n") {
		t.Errorf("rendering:\n%s", data)
	}
	got, err := ParseDHCPDomainsState("f", data)
	if err != nil {
		t.Fatal(err)
	}
	st.Comment = DHCPDomainsStateComment
	if diff := cmp.Diff(st, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	for _, bad := range []string{`{"links": {"": {}}}`, `{"links": {"eth0": {"domains": [""]}}}`, `{"links": {"eth0": {"domains": ["a b"]}}}`,
		`{"links": {"eth0": {"domains": ["x\n"]}}}`, `{"other": 1}`, `[`,
		`{"links": {}}{"links": {}}`, `{"links": {}}}`} {
		if _, err := ParseDHCPDomainsState("f", []byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func FuzzParseDHCPDomainsState(f *testing.F) {
	f.Add(MarshalDHCPDomainsState(DHCPDomainsState{Links: map[string]DHCPDomainsRecord{"enp1s0": {Domains: []string{"example.org"}, From: "/run/systemd/netif/leases/2"}}}))
	f.Add([]byte(`{"links": {"eth0": {"domains": ["."]}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := ParseDHCPDomainsState("f", data)
		if err != nil {
			return
		}
		// What parses renders and parses again to the same records.
		again, err := ParseDHCPDomainsState("f", MarshalDHCPDomainsState(st))
		if err != nil {
			t.Fatalf("re-parse: %v", err)
		}
		st.Comment = DHCPDomainsStateComment
		if diff := cmp.Diff(st, again, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("re-parse differs (-first +again):\n%s", diff)
		}
	})
}
