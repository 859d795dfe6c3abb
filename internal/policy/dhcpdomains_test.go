package policy

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/leases"
	"github.com/nodedns/nodedns/internal/node"
)

// TestDHCPDomainsRecord: nodedns's record of networkd links' DHCP search domains
// (docs/contract.md "DHCP search domains") follows their leases, bridges a moment without one, and
// goes with the link; dhclient leases and hostile values are not recorded.
func TestDHCPDomainsRecord(t *testing.T) {
	const leaseFile = "/run/systemd/netif/leases/2"
	networkd := func(iface, path, domain string, search ...string) leases.Lease {
		return leases.Lease{Path: path, Client: leases.Networkd, Interface: iface, IfIndex: 2, DomainName: domain, SearchDomains: search}
	}
	rec := func(links map[string]node.DHCPDomainsRecord) node.Managed {
		return node.Managed{Path: node.DHCPDomainsStatePath, Exists: true, Data: node.MarshalDHCPDomainsState(node.DHCPDomainsState{Links: links})}
	}
	ens3 := map[string]node.DHCPDomainsRecord{"ens3": {Domains: []string{"example.org"}, From: leaseFile}}
	tests := []struct {
		name   string
		leases []leases.Lease
		record map[string]node.DHCPDomainsRecord // nil: no file
		links  []string                          // the node's links; nil: unknown
		// want is the record after the plan (nil: no file); op the change planned ("" none).
		want map[string]node.DHCPDomainsRecord
		op   Op
		// dhcp is whether example.org is a DHCP search domain in this pass.
		dhcp bool
	}{
		{name: "a networkd lease hands out domains", leases: []leases.Lease{networkd("ens3", leaseFile, "example.org", "example.org", "corp.example")}, links: []string{"ens3"},
			want: map[string]node.DHCPDomainsRecord{"ens3": {Domains: []string{"example.org", "corp.example"}, From: leaseFile}}, op: OpWrite, dhcp: true},
		{name: "networkd 262's lease over varlink", leases: []leases.Lease{networkd("ens3", leases.NetworkdVarlinkSocket, "example.org")}, links: []string{"ens3"},
			want: map[string]node.DHCPDomainsRecord{"ens3": {Domains: []string{"example.org"}, From: leases.NetworkdVarlinkSocket}}, op: OpWrite, dhcp: true},
		{name: "recorded, lease the same", leases: []leases.Lease{networkd("ens3", leaseFile, "example.org")}, record: ens3, links: []string{"ens3"}, want: ens3, dhcp: true},
		{name: "recorded, the lease gone for a moment", record: ens3, links: []string{"ens3"}, want: ens3, dhcp: true},
		{name: "recorded, the lease gone, links unknown (--root without /sys)", record: ens3, want: ens3, dhcp: true},
		{name: "recorded, the lease hands out no domain any more", leases: []leases.Lease{networkd("ens3", leaseFile, "")}, record: ens3, links: []string{"ens3"}, op: OpRemove},
		{name: "recorded, the link gone", record: ens3, links: []string{"ens4"}, op: OpRemove},
		{name: "another link keeps its record", leases: []leases.Lease{networkd("ens4", "/run/systemd/netif/leases/3", "corp.example")}, record: ens3, links: []string{"ens3", "ens4"},
			want: map[string]node.DHCPDomainsRecord{"ens3": ens3["ens3"], "ens4": {Domains: []string{"corp.example"}, From: "/run/systemd/netif/leases/3"}}, op: OpWrite, dhcp: true},
		{name: "a dhclient lease is not recorded (its file stays)", leases: []leases.Lease{{Path: "/var/lib/dhcp/dhclient.ens3.leases", Client: leases.Dhclient, Interface: "ens3", DomainName: "example.org"}},
			links: []string{"ens3"}, dhcp: true},
		{name: "a hostile value is not recorded", leases: []leases.Lease{networkd("ens3", leaseFile, "$(reboot)")}, links: []string{"ens3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &node.Snapshot{Now: now, Leases: tt.leases, DHCPDomains: tt.record}
			if tt.record != nil {
				s.DHCPDomainsState = rec(tt.record)
			}
			if tt.links != nil {
				s.LinkNames = map[string]bool{}
				for _, l := range tt.links {
					s.LinkNames[l] = true
				}
			}
			p := Compute(s, config.Default())
			if got := p.Facts.IsDHCPDomain("example.org"); got != tt.dhcp {
				t.Errorf("example.org a DHCP search domain: %v, want %v (%v)", got, tt.dhcp, p.Facts.DHCPDomains)
			}
			i := slices.IndexFunc(p.Changes, func(c Change) bool { return c.Path == node.DHCPDomainsStatePath })
			var op Op
			if i >= 0 {
				op = p.Changes[i].Op
			}
			if op != tt.op {
				t.Fatalf("change %q, want %q (%+v)", op, tt.op, p.Changes)
			}
			after := tt.record
			if i >= 0 {
				after = nil
				if op == OpWrite {
					st, err := node.ParseDHCPDomainsState("after", p.Changes[i].After)
					if err != nil {
						t.Fatal(err)
					}
					after = st.Links
				}
			}
			if diff := cmp.Diff(tt.want, after); diff != "" {
				t.Errorf("the record (-want +got):\n%s", diff)
			}
		})
	}
}
