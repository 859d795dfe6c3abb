package node

// dhclient.go reads what ISC dhclient's configuration does to the DNS options DHCP offers
// (kubespray's `supersede domain-name-servers 169.254.25.10, ...` in dhclient.conf), what DHCP
// really offered behind it as far as the lease files' history still shows, and what nodedns
// recorded of that offer before dhclient trimmed the history (docs/contract.md "Upstreams").

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/nodedns/nodedns/internal/leases"
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/internal/statefile"
)

// SourceDhclientConf is a dhclient.conf nodedns could not read.
const SourceDhclientConf Source = "dhclient.conf"

// OfferedStatePath is the node path of the state file in which nodedns records, per interface, the
// DNS servers DHCP offered behind a dhclient.conf supersede (policy writes it through a plan change,
// so restore removes it).
const OfferedStatePath = "/var/lib/nodedns/dhcp-offered.json"

// OfferedState is the content of OfferedStatePath.
type OfferedState struct {
	// Comment says what the file is, since JSON has no comments (docs/contract.md "Where things
	// live": every file nodedns creates names nodedns and says it is managed).
	Comment string `json:"comment"`
	// Interfaces maps an interface name to what DHCP last offered there.
	Interfaces map[string]OfferedRecord `json:"interfaces"`
}

// OfferedRecord is the DNS servers DHCP offered on one interface.
type OfferedRecord struct {
	Servers []netip.Addr `json:"servers"`
	// LeaseFile is the dhclient lease file the offer was read from.
	LeaseFile string `json:"leaseFile"`
}

// OfferedStateComment is OfferedState.Comment.
const OfferedStateComment = "Managed by nodedns: the DNS servers DHCP offered, which dhclient.conf's supersede hides from dhclient's lease file once dhclient has restarted twice (nodedns restore removes it)."

// ParseOfferedState parses OfferedStatePath's content; name is for the error.
func ParseOfferedState(name string, data []byte) (OfferedState, error) {
	var st OfferedState
	if err := statefile.Decode(data, &st); err != nil {
		return OfferedState{}, fmt.Errorf("parse %s: %w", name, err)
	}
	for iface, r := range st.Interfaces {
		if iface == "" {
			return OfferedState{}, fmt.Errorf("parse %s: an empty interface name", name)
		}
		for _, a := range r.Servers {
			if !a.IsValid() {
				return OfferedState{}, fmt.Errorf("parse %s: %s: an invalid server", name, iface)
			}
		}
	}
	return st, nil
}

// MarshalOfferedState renders the state file, indented, with a final newline; map keys sorted.
func MarshalOfferedState(st OfferedState) []byte {
	st.Comment = OfferedStateComment
	if st.Interfaces == nil {
		st.Interfaces = map[string]OfferedRecord{}
	}
	b, err := statefile.Encode(st)
	if err != nil {
		panic(err) // addresses and strings always marshal
	}
	return b
}

// DhclientOffer is what one dhclient lease file shows of one interface's DHCP offer behind the
// dhclient.conf rules.
type DhclientOffer struct {
	Interface string
	LeaseFile string
	// DNS is leases.OfferedDNS over the file's blocks (history included).
	DNS leases.Offered
	// Search is leases.OfferedSearch likewise.
	Search leases.Offered
	// Rules are dhclient.conf's domain-name-servers rules for the interface, in execution order.
	Rules []leases.Rule
}

// Superseded reports whether a supersede rule replaces the offered servers on this interface: the
// case in which dhclient's lease file loses the offer (leases.Offered).
func (o DhclientOffer) Superseded() bool {
	return slices.ContainsFunc(o.Rules, func(r leases.Rule) bool { return r.Policy == leases.Supersede })
}

// readDhclient reads dhclient.conf's DNS rules, the offers behind them in every dhclient lease file,
// and nodedns's record of earlier offers.
func (s *Snapshot) readDhclient(r nodefs.Reader) {
	var ps []nodefs.Problem
	s.DhclientRules, ps = leases.LoadDhclientConf(r)
	problems(s, SourceDhclientConf, ps)
	s.OfferedState = s.readStateRecord(r, OfferedStatePath)
	if s.OfferedState.Exists && s.OfferedState.Err == nil {
		st, err := ParseOfferedState(OfferedStatePath, s.OfferedState.Data)
		if err != nil {
			s.problem(SourceManaged, OfferedStatePath, 0, err.Error())
		} else {
			s.Offered = st.Interfaces
		}
	}
	var conf leases.DhclientConf // no rules: the offer is what each block shows
	if s.DhclientRules != nil {
		conf = *s.DhclientRules
	}
	for _, lf := range leases.ReadDhclientHistory(r) {
		var ifaces []string
		for _, l := range lf.Leases {
			if !l.V6 && !slices.Contains(ifaces, l.Interface) {
				ifaces = append(ifaces, l.Interface)
			}
		}
		for _, iface := range ifaces {
			s.DhclientOffers = append(s.DhclientOffers, DhclientOffer{
				Interface: iface,
				LeaseFile: lf.Path,
				DNS:       leases.OfferedDNS(lf.Leases, conf, iface),
				Search:    leases.OfferedSearch(lf.Leases, conf, iface),
				Rules:     conf.RulesFor(leases.OptDomainNameServers, iface),
			})
		}
	}
}

// DhclientOfferFor returns the offer behind a (current, last-block) dhclient lease l, if the lease
// file was read with its history.
func (s *Snapshot) DhclientOfferFor(l leases.Lease) (DhclientOffer, bool) {
	for _, o := range s.DhclientOffers {
		if o.LeaseFile == l.Path && o.Interface == l.Interface && !l.V6 {
			return o, true
		}
	}
	return DhclientOffer{}, false
}
