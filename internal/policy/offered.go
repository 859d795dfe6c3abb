package policy

import (
	"bytes"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/nodedns/nodedns/internal/leases"
	"github.com/nodedns/nodedns/internal/node"
)

// DHCPOffer is what nodedns knows of the DNS servers DHCP offered on one interface whose dhclient.conf
// rules change them (kubespray's `supersede domain-name-servers 169.254.25.10, ...`): the rule is the
// persistent source `check` names, the offer what the DHCP source of upstreams falls back to when the
// lease lists only loop addresses (docs/contract.md "Upstreams").
type DHCPOffer struct {
	Interface string
	LeaseFile string
	// Rule is the last supersede or prepend rule for domain-name-servers on the interface (the
	// persistent source); nil when only append or default rules exist.
	Rule *leases.Rule
	// RuleLoops are the loop addresses Rule lists.
	RuleLoops []netip.Addr
	// Offered are the servers DHCP offered, when known; From says where that was read: a lease
	// block (FILE:LINE, the current one or an older one) or nodedns's record (node.OfferedStatePath).
	Offered []netip.Addr
	From    string
	// Lost is true when dhclient's lease file no longer shows the offer (the supersede hid it in
	// every block left) and nodedns has no record of it either.
	Lost bool
	// Used is true when the current lease lists only loop addresses and the DHCP source of
	// upstreams took Offered instead.
	Used bool
}

// dhclientOffers derives the DHCPOffers from the snapshot: f's loop addresses must be known.
func (f *Facts) dhclientOffers(s *node.Snapshot) []DHCPOffer {
	var out []DHCPOffer
	for _, o := range s.DhclientOffers {
		if len(o.Rules) == 0 {
			continue
		}
		d := DHCPOffer{Interface: o.Interface, LeaseFile: o.LeaseFile}
		for i := range o.Rules {
			r := o.Rules[i]
			if r.Policy == leases.Supersede || r.Policy == leases.Prepend {
				d.Rule = &r
			}
		}
		if d.Rule != nil {
			for _, a := range d.Rule.Servers {
				if f.IsLoop(a, false) {
					d.RuleLoops = append(d.RuleLoops, a)
				}
			}
		}
		switch rec, ok := s.Offered[o.Interface]; {
		case o.DNS.Known:
			d.Offered, d.From = o.DNS.Servers, fmt.Sprintf("%s:%d", o.DNS.Lease.Path, o.DNS.Lease.Line)
		case ok && len(rec.Servers) > 0:
			d.Offered, d.From = rec.Servers, node.OfferedStatePath
		default:
			d.Lost = o.DNS.Hidden != nil
		}
		for _, l := range s.Leases {
			if l.Path == o.LeaseFile && l.Interface == o.Interface && !l.V6 && l.Current(s.Now) && len(d.Offered) > 0 &&
				!slices.ContainsFunc(l.DNS, func(a netip.Addr) bool { return !f.IsLoop(a, true) }) {
				d.Used = true
			}
		}
		out = append(out, d)
	}
	return out
}

// dhcpLeaseServers are the DHCP source of upstreams: the servers of the current leases, except that
// a dhclient lease listing only loop addresses (a supersede with the cache alone, kubespray's
// disable_host_nameservers: true) gives the servers DHCP offered behind it. A lease that still lists
// a real server keeps it: dhclient-script writes that list, and the enter hook only filters it.
func (f Facts) dhcpLeaseServers(s *node.Snapshot) []netip.Addr {
	var out []netip.Addr
	for _, l := range s.Leases {
		if !l.Current(s.Now) {
			continue
		}
		used := false
		for _, o := range f.DHCPOffers {
			if o.Used && o.LeaseFile == l.Path && o.Interface == l.Interface && !l.V6 {
				out = append(out, o.Offered...)
				used = true
			}
		}
		if !used {
			out = append(out, l.DNS...)
		}
	}
	return out
}

// offeredState plans node.OfferedStatePath: nodedns's record of the servers DHCP offered on every
// interface whose dhclient.conf supersedes them, written while the lease file still shows the offer
// (dhclient drops the last unsuperseded block at its second restart). Records of interfaces whose
// offer is no longer visible are kept; nothing is written where no supersede is in force.
func (p *Plan) offeredState(s *node.Snapshot) {
	recs := map[string]node.OfferedRecord{}
	maps.Copy(recs, s.Offered)
	changed := false
	var why []string
	for _, o := range s.DhclientOffers {
		if !o.Superseded() || !o.DNS.Known || len(o.DNS.Servers) == 0 {
			continue
		}
		rec := node.OfferedRecord{Servers: o.DNS.Servers, LeaseFile: o.LeaseFile}
		if old, ok := recs[o.Interface]; ok && slices.Equal(old.Servers, rec.Servers) && old.LeaseFile == rec.LeaseFile {
			continue
		}
		recs[o.Interface] = rec
		changed = true
		var as []string
		for _, a := range rec.Servers {
			as = append(as, a.String())
		}
		rule := o.Rules[len(o.Rules)-1]
		for _, r := range o.Rules {
			if r.Policy == leases.Supersede {
				rule = r
			}
		}
		why = append(why, fmt.Sprintf("DHCP offered %s on %s (%s:%d), which %s:%d supersedes", strings.Join(as, " "), o.Interface, o.DNS.Lease.Path, o.DNS.Lease.Line, rule.Path, rule.Line))
	}
	if !changed {
		return
	}
	after := node.MarshalOfferedState(node.OfferedState{Interfaces: recs})
	var before []byte
	if s.OfferedState.Exists {
		before = s.OfferedState.Data
	}
	if bytes.Equal(before, after) {
		return
	}
	p.write(node.OfferedStatePath, node.OfferedStatePath, before, after, 0o644,
		"remember the servers DHCP offered: "+strings.Join(why, "; ")+"; dhclient's lease file loses them at its second restart")
}

// HiddenOfferHint says why no upstream is known on a node where a dhclient.conf supersede hides the
// offer and nodedns has no record of it, for the blocked targets and the checks.
func (f Facts) HiddenOfferHint() string {
	var parts []string
	for _, o := range f.DHCPOffers {
		if !o.Lost || o.Rule == nil {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s:%d (`%s %s %s`) replaces the servers DHCP offers on %s, and neither %s nor nodedns's record still shows them",
			o.Rule.Path, o.Rule.Line, o.Rule.Policy, o.Rule.Option, addrWords(o.Rule.Servers), o.Interface, o.LeaseFile))
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, "; ") + "; kubespray writes that line (resolvconf_mode: host_resolvconf; with disable_host_nameservers: true it lists only the cache): give nodedns `upstreams` (kubespray's upstream_dns_servers), or set kubespray's `nameservers` or disable_host_nameservers: false"
}

func addrWords(as []netip.Addr) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, ",")
}

// withHint appends "; hint" when there is one.
func withHint(h string) string {
	if h == "" {
		return ""
	}
	return "; " + h
}
