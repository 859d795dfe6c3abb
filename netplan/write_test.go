package netplan

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRender(t *testing.T) {
	tests := []struct {
		name string
		d    DropIn
		want string
	}{
		{
			name: "override both families, sorted by type then ID",
			d: DropIn{
				Comments: []string{"netplan.mode: override"},
				Overrides: []Override{
					{ID: "eth1", Type: "ethernets", DHCP4: true},
					{ID: "bond0", Type: "bonds", DHCP4: true, DHCP6: true},
					{ID: "eth0", Type: "ethernets", DHCP4: true, Nameservers: addrs("10.0.0.2", "2001:db8::53")},
				},
			},
			want: Header + `
# netplan.mode: override
network:
  version: 2
  bonds:
    bond0:
      dhcp4-overrides:
        use-domains: false
      dhcp6-overrides:
        use-domains: false
  ethernets:
    eth0:
      nameservers:
        addresses: [10.0.0.2, '2001:db8::53']
      dhcp4-overrides:
        use-domains: false
        use-dns: false
    eth1:
      dhcp4-overrides:
        use-domains: false
`,
		},
		{
			name: "pin keeps DHCPv6 with its domains off",
			d: DropIn{Pins: []Pin{{ID: "ens5", Type: "ethernets", Address: netip.MustParsePrefix("10.0.0.5/24"),
				Gateway: netip.MustParseAddr("10.0.0.1"), Nameservers: addrs("10.0.0.2"), DHCP6: true}}},
			want: Header + `
network:
  version: 2
  ethernets:
    ens5:
      dhcp4: false
      addresses: [10.0.0.5/24]
      routes: [{to: default, via: 10.0.0.1}]
      nameservers:
        addresses: [10.0.0.2]
      dhcp6-overrides:
        use-domains: false
`,
		},
		{
			name: "an odd but valid ID is quoted",
			d:    DropIn{Overrides: []Override{{ID: "&x", Type: "ethernets", DHCP4: true}}},
			want: Header + `
network:
  version: 2
  ethernets:
    '&x':
      dhcp4-overrides:
        use-domains: false
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.d.Render()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("Render (-want +got):\n%s", diff)
			}
			// What is written must read back as written: our parser, and Pins for a pin.
			cfg, err := Parse([]Doc{{Path: NodednsFile, Data: got}})
			if err != nil {
				t.Fatalf("rendered file does not parse: %v", err)
			}
			for _, o := range tt.d.Overrides {
				i := cfg.Interface(o.ID)
				if i == nil {
					t.Fatalf("%s missing after parse", o.ID)
				}
				if o.DHCP4 && i.DHCP4Overrides["use-domains"] != "false" {
					t.Errorf("%s: dhcp4-overrides = %v", o.ID, i.DHCP4Overrides)
				}
				if o.DHCP6 && i.DHCP6Overrides["use-domains"] != "false" {
					t.Errorf("%s: dhcp6-overrides = %v", o.ID, i.DHCP6Overrides)
				}
			}
			// DHCP6 is the node's own files' business: Pins leaves it false.
			var want []Pin
			for _, p := range tt.d.Pins {
				p.DHCP6 = false
				want = append(want, p)
			}
			if diff := cmp.Diff(want, Pins(cfg), cmpAddr, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); len(tt.d.Pins) > 0 && diff != "" {
				t.Errorf("Pins(Render(pins)) (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRenderRefuses(t *testing.T) {
	good := Pin{ID: "eth0", Type: "ethernets", Address: netip.MustParsePrefix("10.0.0.5/24"), Gateway: netip.MustParseAddr("10.0.0.1"), Nameservers: addrs("10.0.0.2")}
	tests := []struct {
		name string
		mod  func(*DropIn)
		want string
	}{
		{"no nameserver", func(d *DropIn) { d.Pins[0].Nameservers = nil }, "no nameserver"},
		{"no default route", func(d *DropIn) { d.Pins[0].Gateway = netip.Addr{} }, "no default route"},
		{"no address", func(d *DropIn) { d.Pins[0].Address = netip.Prefix{} }, "no IPv4 address"},
		{"twice", func(d *DropIn) { d.Overrides = []Override{{ID: "eth0", Type: "ethernets", DHCP4: true}} }, "configured twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := DropIn{Pins: []Pin{good}}
			tt.mod(&d)
			out, err := d.Render()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Render = %q, %v; want error containing %q", out, err, tt.want)
			}
		})
	}
}

func TestMatches(t *testing.T) {
	cfg := parseIfaces(t, `network:
  ethernets:
    eth0: {dhcp4: true}
    id0: {match: {macaddress: "52:54:00:00:00:01"}, set-name: lan0}
    any: {match: {name: "en*"}}
    bymac: {match: {macaddress: "52:54:00:00:00:02"}}
  bonds:
    bond0: {interfaces: [eth0]}
`)
	tests := []struct {
		id, ifname string
		want       bool
	}{
		{"eth0", "eth0", true}, {"eth0", "eth1", false},
		{"id0", "lan0", true}, {"id0", "id0", false},
		{"any", "enp1s0", true}, {"any", "eth0", false},
		{"bymac", "bymac", false}, // only the kernel knows which name the MAC has
		{"bond0", "bond0", true},
	}
	for _, tt := range tests {
		if got := cfg.Interface(tt.id).Matches(tt.ifname); got != tt.want {
			t.Errorf("%s.Matches(%q) = %v, want %v", tt.id, tt.ifname, got, tt.want)
		}
	}
}
