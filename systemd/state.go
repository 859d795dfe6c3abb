package systemd

import "net/netip"

// systemd-resolved's names (org.freedesktop.resolve1(5), systemd 252).
const (
	// ResolvedBusName is the well-known name systemd-resolved owns on the system bus.
	ResolvedBusName = "org.freedesktop.resolve1"
	// ResolvedUnit is the unit that runs systemd-resolved.
	ResolvedUnit = "systemd-resolved.service"
)

// DNSServer is one DNS server as resolved lists it.
type DNSServer struct {
	IfIndex int // 0: global
	Addr    netip.Addr
	Port    uint16 // 0: the default (53)
	Name    string // server name for DNS-over-TLS ("" when none)
}

func (s DNSServer) String() string {
	out := s.Addr.String()
	if s.Port != 0 && s.Port != 53 {
		out = netip.AddrPortFrom(s.Addr, s.Port).String()
	}
	if s.Name != "" {
		out += "#" + s.Name
	}
	return out
}

// LinkDomain is a search or routing domain resolved uses, with its link (0: global).
type LinkDomain struct {
	IfIndex int
	Domain
}

// ManagerState is what resolved's Manager object says: every server and domain, global (IfIndex
// 0) and per link.
type ManagerState struct {
	DNS         []DNSServer
	FallbackDNS []DNSServer
	Domains     []LinkDomain
	// ResolvConfMode is "stub", "static", "uplink", "foreign" or "missing"; "" before systemd 247,
	// which has no such property (callers degrade: the mode is simply unknown).
	ResolvConfMode   string
	CurrentDNSServer *DNSServer
	// HasDNSEx reports whether the Ex properties (ports, server names; systemd 246+) were there.
	HasDNSEx bool
}

// LinkInfo is what resolved's Link object says about one link.
type LinkInfo struct {
	IfIndex int
	DNS     []DNSServer
	Domains []Domain
	// DefaultRoute reports whether the link's servers take queries outside its routing domains;
	// HasDefaultRoute is false before systemd 240, which has no such property.
	DefaultRoute    bool
	HasDefaultRoute bool
}

// ResolvedState is resolved's whole live view: the global settings and every link it knows.
type ResolvedState struct {
	DNS            []DNSServer // global servers only (IfIndex 0)
	Domains        []Domain    // global domains only
	FallbackDNS    []DNSServer
	ResolvConfMode string
	Current        *DNSServer
	Links          []LinkInfo // by ifindex
	// Delegates are the DNS delegates resolved runs with (systemd 258+; none before).
	Delegates []DelegateInfo
}

// DelegateInfo is what one of resolved's DnsDelegate objects says (resolved 258+:
// /org/freedesktop/resolve1/dns_delegate/ID, listed by Manager.ListDelegates).
type DelegateInfo struct {
	ID           string
	DNS          []DNSServer
	Domains      []Domain
	DefaultRoute bool
}

// Link returns the live link with ifindex i.
func (s *ResolvedState) Link(i int) (LinkInfo, bool) {
	for _, l := range s.Links {
		if l.IfIndex == i {
			return l, true
		}
	}
	return LinkInfo{}, false
}
