package hostnet

import (
	"net/netip"
	"slices"

	"github.com/nodedns/nodedns/internal/hostnet/netstate"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// tcpListen is TCP_LISTEN in inet_diag's idiag_state.
const tcpListen = 10

// Listeners lists the UDP sockets and listening TCP sockets bound to port of any of addrs in the
// caller's network namespace, over sock_diag netlink (inet_diag): no /proc table is read or parsed,
// and each comes with its inode and the user it belongs to, from the kernel. An IPv4-mapped IPv6
// address counts as its IPv4 address (a dual-stack socket bound to one).
func Listeners(addrs []netip.Addr, port uint16) ([]netstate.Listener, error) {
	var out []netstate.Listener
	for _, fam := range []uint8{unix.AF_INET, unix.AF_INET6} {
		if !slices.ContainsFunc(addrs, func(a netip.Addr) bool { return a.Is4() == (fam == unix.AF_INET) }) {
			continue
		}
		udp, err := RetryDump("list udp sockets", func() ([]*netlink.Socket, error) { return netlink.SocketDiagUDP(fam) })
		if err != nil {
			return nil, err
		}
		tcp, err := RetryDump("list tcp sockets", func() ([]*netlink.Socket, error) { return netlink.SocketDiagTCP(fam) })
		if err != nil {
			return nil, err
		}
		for _, s := range udp {
			out = appendListener(out, addrs, port, s, "udp")
		}
		for _, s := range tcp {
			if s.State == tcpListen {
				out = appendListener(out, addrs, port, s, "tcp")
			}
		}
	}
	return out, nil
}

func appendListener(out []netstate.Listener, addrs []netip.Addr, port uint16, s *netlink.Socket, proto string) []netstate.Listener {
	if s.ID.SourcePort != port {
		return out
	}
	a, ok := netip.AddrFromSlice(s.ID.Source)
	if !ok {
		return out
	}
	a = a.Unmap()
	if !slices.Contains(addrs, a) {
		return out
	}
	return append(out, netstate.Listener{Addr: a, Proto: proto, Inode: s.INode, UID: s.UID})
}
