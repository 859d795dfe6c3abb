package node

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestOfferedStateRoundTrip(t *testing.T) {
	st := OfferedState{Interfaces: map[string]OfferedRecord{
		"enp1s0": {Servers: []netip.Addr{netip.MustParseAddr("10.66.0.53")}, LeaseFile: "/var/lib/dhcp/dhclient.enp1s0.leases"},
		"eth1":   {Servers: []netip.Addr{netip.MustParseAddr("2001:db8::53")}, LeaseFile: "/var/lib/dhcp/dhclient.leases"},
	}}
	data := MarshalOfferedState(st)
	if !strings.HasPrefix(string(data), "{\n  \"comment\": \"Managed by nodedns") || !strings.HasSuffix(string(data), "}\n") {
		t.Errorf("rendering:\n%s", data)
	}
	got, err := ParseOfferedState("f", data)
	if err != nil {
		t.Fatal(err)
	}
	st.Comment = OfferedStateComment
	if diff := cmp.Diff(st, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	for _, bad := range []string{`{"interfaces": {"": {}}}`, `{"interfaces": {"eth0": {"servers": ["x"]}}}`, `{"other": 1}`, `[`,
		`{"interfaces": {}} {}`, `{"interfaces": {}}x`} {
		if _, err := ParseOfferedState("f", []byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func FuzzParseOfferedState(f *testing.F) {
	f.Add(MarshalOfferedState(OfferedState{Interfaces: map[string]OfferedRecord{"enp1s0": {Servers: []netip.Addr{netip.MustParseAddr("10.66.0.53")}}}}))
	f.Add([]byte(`{"interfaces": {"eth0": {"servers": [""]}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := ParseOfferedState("f", data)
		if err != nil {
			return
		}
		// What parses renders and parses again to the same records.
		again, err := ParseOfferedState("f", MarshalOfferedState(st))
		if err != nil {
			t.Fatalf("re-parse: %v", err)
		}
		if len(again.Interfaces) != len(st.Interfaces) {
			t.Fatalf("%d interfaces, then %d", len(st.Interfaces), len(again.Interfaces))
		}
	})
}
