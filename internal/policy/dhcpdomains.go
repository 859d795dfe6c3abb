package policy

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/nodedns/nodedns/internal/leases"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/resolvconf"
)

// dhcpdomains.go keeps nodedns's record of the DHCP search domains systemd-networkd's links were
// handed (node.DHCPDomainsStatePath; docs/contract.md "DHCP search domains"). networkd's lease is
// gone for a moment while it re-takes it after `networkctl reload`: the lease file (networkd 252)
// or the varlink reply's lease (262, which keeps no file) is absent, and a pass in that moment would
// no longer know the domain as a DHCP one and let it into kubelet's resolv.conf. The record is
// written while a lease shows the domains, used only while the link has no networkd lease, and
// forgotten when the link's lease no longer hands the domains out, when the link is gone, and by
// restore.

// networkdLeaseDomains are, per interface with a networkd lease in the snapshot, the valid DHCP
// search domains its leases hand out (canonical, in order), and the lease they were read from.
func networkdLeaseDomains(s *node.Snapshot) map[string]node.DHCPDomainsRecord {
	out := map[string]node.DHCPDomainsRecord{}
	for _, l := range s.Leases {
		if l.Client != leases.Networkd || l.V6 || l.Interface == "" {
			continue
		}
		rec := out[l.Interface]
		if rec.From == "" {
			rec.From = l.Path
		}
		for _, v := range append([]string{l.DomainName}, l.SearchDomains...) {
			for _, w := range strings.Fields(v) {
				d := resolvconf.CanonicalDomain(w)
				if d != "" && resolvconf.ValidDomain(d) && !slices.Contains(rec.Domains, d) {
					rec.Domains = append(rec.Domains, d)
				}
			}
		}
		out[l.Interface] = rec
	}
	return out
}

// recordedDHCPDomains adds the record's domains of the links that have no networkd lease now and
// are still there (docs/contract.md "DHCP search domains").
func (f *Facts) recordedDHCPDomains(s *node.Snapshot) {
	seen := networkdLeaseDomains(s)
	for _, iface := range slices.Sorted(maps.Keys(s.DHCPDomains)) {
		if _, ok := seen[iface]; ok || (s.LinkNames != nil && !s.LinkNames[iface]) {
			continue
		}
		rec := s.DHCPDomains[iface]
		for _, d := range rec.Domains {
			if resolvconf.ValidDomain(d) {
				f.addDomain(d, fmt.Sprintf("%s (%s, from %s)", node.DHCPDomainsStatePath, iface, rec.From))
			}
		}
	}
}

// dhcpDomainsState plans node.DHCPDomainsStatePath: each link's record follows its networkd lease
// while one is in the snapshot (dropped when the lease hands out no domain), stays while none is,
// and goes with the link. The file goes when no record is left.
func (p *Plan) dhcpDomainsState(s *node.Snapshot) {
	recs := map[string]node.DHCPDomainsRecord{}
	maps.Copy(recs, s.DHCPDomains)
	var why []string
	seen := networkdLeaseDomains(s)
	for _, iface := range slices.Sorted(maps.Keys(seen)) {
		rec := seen[iface]
		old, had := recs[iface]
		switch {
		case len(rec.Domains) == 0 && had:
			delete(recs, iface)
			why = append(why, fmt.Sprintf("%s's lease (%s) hands out no search domain any more", iface, rec.From))
		case len(rec.Domains) > 0 && (!slices.Equal(old.Domains, rec.Domains) || old.From != rec.From):
			recs[iface] = rec
			why = append(why, fmt.Sprintf("DHCP hands %s %s (%s)", iface, strings.Join(rec.Domains, " "), rec.From))
		}
	}
	if s.LinkNames != nil {
		for _, iface := range slices.Sorted(maps.Keys(recs)) {
			if !s.LinkNames[iface] {
				delete(recs, iface)
				why = append(why, fmt.Sprintf("link %s is gone", iface))
			}
		}
	}
	cur := s.DHCPDomainsState
	if len(recs) == 0 {
		if cur.Exists {
			p.Changes = append(p.Changes, Change{Path: node.DHCPDomainsStatePath, Target: node.DHCPDomainsStatePath, Op: OpRemove, Before: cur.Data,
				Reason: "no networkd link's DHCP search domains to remember: " + strings.Join(why, "; ")})
		}
		return
	}
	after := node.MarshalDHCPDomainsState(node.DHCPDomainsState{Links: recs})
	var before []byte
	if cur.Exists {
		before = cur.Data
	}
	if bytes.Equal(before, after) {
		return
	}
	p.write(node.DHCPDomainsStatePath, node.DHCPDomainsStatePath, before, after, 0o644,
		"remember the DHCP search domains of networkd's links ("+strings.Join(why, "; ")+"): networkd's lease is gone for a moment while it re-takes it, and the domains must stay out of kubelet's resolv.conf then")
}
