// Package leases reads the DHCP leases that DHCP clients leave on a node:
// systemd-networkd's /run/systemd/netif/leases/IFINDEX, ISC dhclient's
// *.leases files and NetworkManager's *.lease files.
//
// nodedns uses them for three things: the DHCP search domains (option 119
// domain-search and option 15 domain-name; every lease file counts, expired
// or not, because a DHCP server that handed a domain out once will again),
// the DNS servers of the current leases (a source of upstreams), and the
// current lease's addressing (address, prefix, router, MTU, expiry) to pin it
// as static netplan configuration.
//
// The parsers are pure (bytes in, leases out); only Load, LoadDhclientConf
// (dhclient.conf's rules for the DNS options) and ReadDhclientHistory touch
// the file system, through a nodefs.Reader, and they never write.
package leases

import (
	"net/netip"
	"strings"
	"time"
)

// Client names the DHCP client that wrote a lease file.
type Client string

// The DHCP clients whose lease files Load understands.
const (
	// Networkd is systemd-networkd: /run/systemd/netif/leases/IFINDEX, KEY=VALUE lines.
	Networkd Client = "networkd"
	// Dhclient is ISC dhclient: /var/lib/dhcp/*.leases and /var/lib/dhclient/*.leases,
	// in dhclient.leases(5) syntax.
	Dhclient Client = "dhclient"
	// NetworkManager is NetworkManager: /var/lib/NetworkManager/*.lease. The internal
	// client writes KEY=VALUE lines like networkd; the dhclient plugin writes dhclient syntax.
	NetworkManager Client = "networkmanager"
)

// Lease is one DHCP lease as its client recorded it.
type Lease struct {
	// Path is the file the lease came from, as a node path (for example
	// /var/lib/dhcp/dhclient.eth0.leases), never joined under a root.
	Path string
	// Line is the line of the `lease {` (or `lease6 {`) in a dhclient-syntax
	// file; 0 for KEY=VALUE files.
	Line int
	// Client is the DHCP client that wrote the file.
	Client Client
	// Interface is the interface name: dhclient's `interface "eth0";`, the name
	// of networkd's IfIndex (filled in by Load), or the name at the end of a
	// NetworkManager file name. Empty when unknown.
	Interface string
	// IfIndex is the interface index of a networkd lease (its file name); 0 otherwise.
	IfIndex int
	// Address is the leased address with its prefix length (fixed-address with
	// option subnet-mask, or ADDRESS with NETMASK; /32 when no mask is given,
	// /128 for a DHCPv6 iaaddr). The zero Prefix when the file names no address.
	Address netip.Prefix
	// Routers are the routers (option 3), in file order.
	Routers []netip.Addr
	// DNS are the DNS servers (option 6, or dhcp6.name-servers), in file order.
	DNS []netip.Addr
	// DomainName is option 15 as written. Some DHCP servers put several
	// space-separated domains here; Domains splits them.
	DomainName string
	// SearchDomains is option 119 (or dhcp6.domain-search), as written (often
	// with a trailing dot).
	SearchDomains []string
	// MTU is option 26 interface-mtu; 0 when not given.
	MTU int
	// Expire is when the lease expires (dhclient `expire`, or starts plus
	// max-life of a DHCPv6 address). Zero when the file does not say, or says
	// `never`: networkd's files exist only while the lease is held.
	Expire time.Time
	// V6 is true for a dhclient `lease6` block (DHCPv6). dhclient keeps the last
	// lease per interface and family, so a DHCPv6 lease never replaces a DHCPv4 one.
	V6 bool
}

// Current reports whether the lease still counts as a source of upstreams at
// now: a lease whose expiry is in the past does not. A lease without an expiry
// (networkd, NetworkManager, `expire never;`) is current.
func (l Lease) Current(now time.Time) bool {
	if l.Expire.IsZero() {
		return true
	}
	return now.Before(l.Expire)
}

// Domains returns DomainName and SearchDomains, in that order, deduplicated,
// with trailing dots stripped and lowercased. DomainName is split on white
// space: ISC dhclient-script (4.4) copies a multi-word domain-name to the
// `search` line when no domain-search was given, so each word is a search
// domain in practice.
func (l Lease) Domains() []string {
	var out []string
	seen := map[string]bool{}
	add := func(d string) {
		d = strings.ToLower(strings.TrimRight(strings.TrimSpace(d), "."))
		if d == "" || seen[d] {
			return
		}
		seen[d] = true
		out = append(out, d)
	}
	for _, d := range strings.Fields(l.DomainName) {
		add(d)
	}
	for _, d := range l.SearchDomains {
		add(d)
	}
	return out
}

// leaseAddress is a lease's address with the length of its netmask (bits), the zero Prefix when
// the lease names no address. Without a netmask (bits < 0: no subnet-mask in a dhclient lease, no
// NETMASK in networkd's file, which systemd fills with a classful mask on receipt, so a file
// networkd wrote always has one) it claims only the address itself rather than invent a subnet.
func leaseAddress(addr netip.Addr, bits int) netip.Prefix {
	if !addr.IsValid() {
		return netip.Prefix{}
	}
	if bits < 0 {
		bits = 32
	}
	return netip.PrefixFrom(addr, bits)
}

// maskBits converts a dotted IPv4 netmask to a prefix length. A mask whose
// one bits are not contiguous is refused: the kernel and netplan take only a
// prefix length, so such a mask cannot be pinned faithfully.
func maskBits(mask netip.Addr) (int, bool) {
	if !mask.Is4() {
		return 0, false
	}
	b := mask.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	ones := 0
	for v&0x80000000 != 0 {
		ones++
		v <<= 1
	}
	if v != 0 {
		return 0, false
	}
	return ones, true
}

// parseIPv4 parses a dotted-quad IPv4 address; IPv4-mapped IPv6 and zones are refused.
func parseIPv4(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return netip.Addr{}, false
	}
	return a, true
}

// parseIPv6 parses an IPv6 address without a zone (DHCPv6 hands out global
// addresses; a zone in a lease file means corruption).
func parseIPv6(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is6() || a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a, true
}
