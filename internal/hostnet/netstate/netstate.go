// Package netstate holds the records of the host's network state that internal/hostnet reads over
// rtnetlink: an interface with its addresses, a local-table route, a policy rule, the default-route
// uplink. It is pure, so the self-check judges them without importing hostnet and netlink.
package netstate

import (
	"net/netip"

	"golang.org/x/sys/unix"
)

// Link is a network interface as the checks need it.
type Link struct {
	Name      string
	Index     int
	Type      string // bridge, dummy, ...: any type carries a cache address (this CI kernel has no dummy)
	AdminUp   bool
	OperState string
	Addrs     []netip.Prefix
}

// Route is a local-table route.
type Route struct {
	Dst       netip.Prefix
	LinkIndex int
}

// Rule is one policy routing rule (`ip rule`).
type Rule struct {
	Family   int // 4 or 6
	Priority int
	Table    int // 255 is local; 0 with no Goto is a non-lookup action (blackhole, unreachable, ...)
	Goto     int // 0 when none (a goto always targets a later, so non-zero, priority)
	Src, Dst netip.Prefix
	IIF, OIF string
	Mark     uint32
	Mask     uint32 // 0 when the rule has no fwmark selector
	Invert   bool
}

// The routing table ids of rtnetlink(7).
const (
	TableLocal = unix.RT_TABLE_LOCAL
	TableMain  = unix.RT_TABLE_MAIN
)

// Uplink is the interface that carries the IPv4 default route, with its IPv4 addresses.
type Uplink struct {
	IfName  string
	IfIndex int
	Gateway netip.Addr
	Addrs   []netip.Prefix
}

// Listener is a socket bound to a port of an address as the kernel's socket diagnostics list it:
// a UDP socket, or a listening TCP one.
type Listener struct {
	Addr  netip.Addr
	Proto string // "udp" or "tcp"
	// Inode is the socket's inode number (what /proc/PID/fd/N links to as socket:[N]), UID the
	// user the socket belongs to (the file system uid of the process that made it).
	Inode uint32
	UID   uint32
}
