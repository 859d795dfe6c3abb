package probes

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nodedns/nodedns/internal/hostnet/netstate"
)

func TestRuleBypasses(t *testing.T) {
	main := netstate.Rule{Family: 4, Priority: 32766, Table: netstate.TableMain}
	tests := []struct {
		name    string
		rules   []netstate.Rule
		want    []int // priorities of the bypassing rules
		noLocal bool
	}{
		{"default rules", []netstate.Rule{localRuleAt(0), main}, nil, false},
		{"seed 004: vlan rules ahead of the moved local rule", []netstate.Rule{
			{Family: 4, Priority: 10, Table: 102, IIF: "vlan.eth.2"},
			{Family: 4, Priority: 10, Table: 102, IIF: "vlanc6461fc2633"},
			localRuleAt(20),
			{Family: 4, Priority: 512, Table: netstate.TableMain, Dst: netip.MustParsePrefix("10.0.42.112/32")},
			main,
		}, []int{10, 10}, false},
		{"seed 004 after the fix: same rules behind local", []netstate.Rule{localRuleAt(20), {Family: 4, Priority: 1536, Table: 101, Src: netip.MustParsePrefix("10.0.62.182/32")}, main}, nil, false},
		{"fwmark rules ahead of local (Cilium) catch only marked packets", []netstate.Rule{{Family: 4, Priority: 9, Table: 2004, Mark: 0x200, Mask: 0xf00}, localRuleAt(100), main}, nil, false},
		{"a rule for another destination", []netstate.Rule{{Family: 4, Priority: 5, Table: 7, Dst: netip.MustParsePrefix("10.0.0.0/8")}, localRuleAt(20)}, nil, false},
		{"a rule for the link-local range", []netstate.Rule{{Family: 4, Priority: 5, Table: 7, Dst: netip.MustParsePrefix("169.254.0.0/16")}, localRuleAt(20)}, []int{5}, false},
		{"IPv6 rules do not count for an IPv4 address", []netstate.Rule{{Family: 6, Priority: 1, Table: 7}, localRuleAt(0)}, nil, false},
		{"no local rule", []netstate.Rule{main}, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bs, noLocal := RuleBypasses(tc.rules, []netip.Addr{cache})
			var got []int
			for _, b := range bs {
				got = append(got, b.Rule.Priority)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("bypassing rules (-want +got):\n%s", diff)
			}
			if (len(noLocal) > 0) != tc.noLocal {
				t.Errorf("noLocal = %v, want %v", noLocal, tc.noLocal)
			}
		})
	}
	if got, want := ruleString(netstate.Rule{Family: 4, Priority: 10, Table: 102, IIF: "vlan.eth.2"}), "10: from all iif vlan.eth.2 lookup 102"; got != want {
		t.Errorf("ruleString = %q, want %q", got, want)
	}
}
