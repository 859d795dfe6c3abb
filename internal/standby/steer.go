package standby

// steer.go: which socket of a reuseport group gets a packet (docs/contract.md "Standby", "A hung
// cache"). CoreDNS (node-cache) binds its listeners with SO_REUSEPORT; the standby binds beside it,
// so the kernel keeps one group per address, port and protocol and, without a program, spreads
// packets over the group by a hash of the 4-tuple. A classic BPF program attached to the group by any
// member (SO_ATTACH_REUSEPORT_CBPF) returns the index of the socket that gets the packet; an index
// out of range falls back to the hash (net/core/sock_reuseport.c, reuseport_select_sock and
// run_bpf_filter, Linux 6.x). Indices are the order of binding; when a member closes, the last moves
// into its place (reuseport_detach_sock). The standby therefore finds its own index by sending
// marker packets from sockets whose source port the program maps to an index, and finds it again
// whenever the group changes.
//
// Measured on Linux 6.18 (standby's steer tests): the program sees the packet past the transport
// header (the UDP header; the TCP header of a SYN), so it reads the source address and port relative
// to the network header (SKF_NET_OFF); one program steers every new datagram and every new TCP
// connection at once, in both directions, for IPv4 and IPv6.

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// skfNetOff is SKF_NET_OFF (include/uapi/linux/filter.h): a load at skfNetOff+n reads byte n of
// the network header, wherever the program's own data begins.
const skfNetOff = -0x100000

// netOff is the program offset of byte n of the network header.
func netOff(n int) uint32 { return uint32(int32(skfNetOff + n)) }

// noIndex is returned for "no socket in particular": out of range, so the kernel falls back to its
// hash (run_bpf_filter returns NULL for index >= the group's size).
const noIndex = 0xffffffff

// groupProgram is the program the standby attaches to a group on addr: a packet from addr itself
// (only a local socket bound to the cache address sends from it) whose source port is a key of to
// goes to the socket at to[port]; every other packet to the socket at def.
func groupProgram(addr netip.Addr, def uint32, to map[uint16]uint32) ([]bpf.RawInstruction, error) {
	ports := make([]uint16, 0, len(to))
	for p := range to {
		ports = append(ports, p)
	}
	slices.Sort(ports)
	var prog []bpf.Instruction
	// The source address, word by word; a mismatch jumps to the default, placed after the port
	// tests. Skips are filled in once the program's length is known.
	var addrJumps []int
	b := addr.AsSlice()
	srcOff, portLoad := netOff(12), bpf.Instruction(nil)
	if addr.Is6() {
		srcOff = netOff(8)
		// No extension headers: the transport header follows the fixed 40 bytes (a local sender
		// adds none to a datagram or SYN to a local address).
		portLoad = bpf.LoadAbsolute{Off: netOff(40), Size: 2}
	} else {
		// X = the IPv4 header's length (IHL*4), then the port at X.
		prog = append(prog, bpf.LoadMemShift{Off: netOff(0)})
		portLoad = bpf.LoadIndirect{Off: netOff(0), Size: 2}
	}
	for i := 0; i < len(b); i += 4 {
		prog = append(prog, bpf.LoadAbsolute{Off: srcOff + uint32(i), Size: 4})
		addrJumps = append(addrJumps, len(prog))
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: uint32(b[i])<<24 | uint32(b[i+1])<<16 | uint32(b[i+2])<<8 | uint32(b[i+3])})
	}
	prog = append(prog, portLoad)
	k := len(ports)
	for _, p := range ports {
		// From the test at position q, SkipTrue k lands on its own return, after the default.
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(p), SkipTrue: uint8(k)})
	}
	def0 := len(prog)
	prog = append(prog, bpf.RetConstant{Val: def})
	for _, p := range ports {
		prog = append(prog, bpf.RetConstant{Val: to[p]})
	}
	if len(prog) > 255 || k > 200 {
		return nil, fmt.Errorf("reuseport program: %d marker ports is too many", k)
	}
	for _, j := range addrJumps {
		ji := prog[j].(bpf.JumpIf)
		ji.SkipTrue = uint8(def0 - j - 1)
		prog[j] = ji
	}
	return bpf.Assemble(prog)
}

// attachProgram attaches prog to the reuseport group of the socket c belongs to.
func attachProgram(c syscall.RawConn, prog []bpf.RawInstruction) error {
	var serr error
	err := c.Control(func(fd uintptr) { serr = attachFD(int(fd), prog) })
	if err != nil {
		return fmt.Errorf("attach a reuseport program (SO_ATTACH_REUSEPORT_CBPF): %w", err)
	}
	return serr
}

// attachFD attaches prog to the reuseport group of the socket fd.
func attachFD(fd int, prog []bpf.RawInstruction) error {
	filter := make([]unix.SockFilter, len(prog))
	for i, in := range prog {
		filter[i] = unix.SockFilter{Code: in.Op, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_REUSEPORT_CBPF, &fprog); err != nil {
		return fmt.Errorf("attach a reuseport program (SO_ATTACH_REUSEPORT_CBPF): %w", err)
	}
	return nil
}

// detachProgram removes the group's program (SO_DETACH_REUSEPORT_BPF, Linux 5.8+): the kernel goes
// back to its hash. ENOENT (no program) is no error.
func detachProgram(c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_DETACH_REUSEPORT_BPF, 0)
	})
	if err == nil {
		err = serr
	}
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("detach the reuseport program (SO_DETACH_REUSEPORT_BPF): %w", err)
	}
	return nil
}

// listenConfig is how the standby binds its sockets: SO_REUSEPORT, as CoreDNS (node-cache) binds
// its own, so both hold the address during a hand-over; a plain TCP listener, since Go 1.24+ makes a
// listener MPTCP by default and an MPTCP socket refuses SO_ATTACH_REUSEPORT_CBPF (EOPNOTSUPP,
// measured on Linux 6.18).
func listenConfig() net.ListenConfig {
	lc := net.ListenConfig{Control: reusePort}
	lc.SetMultipathTCP(false)
	return lc
}

// queued is how many bytes wait in a UDP socket's receive queue (SIOCINQ).
func queued(c syscall.RawConn) int {
	n := 0
	_ = c.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ) })
	return n
}

// marker is a socket bound to the cache address (its port chosen by the kernel) from which one
// packet is sent to the group to learn where the program sends it.
type marker struct {
	fd   int
	port uint16
}

// newMarker binds a UDP or TCP socket to addr with a port of the kernel's choosing.
func newMarker(proto string, addr netip.Addr) (marker, error) {
	fam, typ := unix.AF_INET, unix.SOCK_DGRAM
	if addr.Is6() {
		fam = unix.AF_INET6
	}
	if proto == "tcp" {
		typ = unix.SOCK_STREAM
	}
	fd, err := unix.Socket(fam, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return marker{}, err
	}
	if err := unix.Bind(fd, sockaddr(netip.AddrPortFrom(addr, 0))); err != nil {
		unix.Close(fd)
		return marker{}, err
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		unix.Close(fd)
		return marker{}, err
	}
	m := marker{fd: fd}
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		m.port = uint16(sa.Port)
	case *unix.SockaddrInet6:
		m.port = uint16(sa.Port)
	}
	return m, nil
}

// send sends the marker packet to addr:port: a datagram (a DNS header, nothing a server acts on),
// or a TCP connection, reset at once (SO_LINGER 0: no TIME_WAIT on the marker's port).
func (m marker) send(proto string, to netip.AddrPort) error {
	if proto == "udp" {
		return unix.Sendto(m.fd, make([]byte, 12), 0, sockaddr(to))
	}
	// A local connect completes in the kernel (SYN, SYN-ACK, ACK on loopback) whichever listener
	// gets it, even one whose process is stopped; the timeout only guards a full backlog.
	tv := unix.NsecToTimeval(int64(200 * time.Millisecond))
	_ = unix.SetsockoptTimeval(m.fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
	_ = unix.SetsockoptLinger(m.fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
	return unix.Connect(m.fd, sockaddr(to))
}

func (m marker) close() { unix.Close(m.fd) }

func sockaddr(ap netip.AddrPort) unix.Sockaddr {
	if ap.Addr().Is4() {
		return &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	}
	return &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
}

// group is one reuseport group the standby has joined: its UDP socket, or its TCP listener, on one
// cache address, and where the group's program sends packets.
type group struct {
	proto string // "udp" or "tcp"
	addr  netip.Addr
	conn  syscall.RawConn
	// size is the group's size when its indices were last found; self is the standby's socket's
	// index, -1 when unknown.
	size, self int
	// toCache is the index the program gives the cache (never self), noIndex when the group has no
	// other member.
	toCache uint32
	// def is where every packet that is not a marker goes now: self while standing in, toCache
	// while giving back.
	def      uint32
	attached bool

	mu      sync.Mutex
	markers map[uint16]int // marker port -> the index it was sent for
	arrived chan uint16    // markers that reached the standby's own socket
	// health is the prober's port, steered to the cache (0: none yet).
	health func() uint16
}

func newGroup(proto string, addr netip.Addr, conn syscall.RawConn) *group {
	return &group{proto: proto, addr: addr, conn: conn, self: -1, toCache: noIndex, def: noIndex, arrived: make(chan uint16, 64)}
}

// own reports whether a packet from src was sent by the standby's own sockets (markers, health
// probes): the standby's server drops it, and a marker is recorded as arrived.
func (g *group) own(src netip.AddrPort) bool {
	if src.Addr().Unmap() != g.addr {
		return false
	}
	g.mu.Lock()
	_, isMarker := g.markers[src.Port()]
	g.mu.Unlock()
	health := g.healthPort() != 0 && src.Port() == g.healthPort()
	if isMarker {
		select {
		case g.arrived <- src.Port():
		default:
		}
	}
	return isMarker || health
}

// program attaches the group's program for the current def, toCache and health port, with the
// markers given (port -> index).
func (g *group) program(markers map[uint16]int) error {
	to := map[uint16]uint32{}
	for p, i := range markers {
		to[p] = uint32(i)
	}
	if p := g.healthPort(); p != 0 {
		to[p] = g.toCache
	}
	prog, err := groupProgram(g.addr, g.def, to)
	if err != nil {
		return err
	}
	if err := attachProgram(g.conn, prog); err != nil {
		return err
	}
	g.attached = true
	return nil
}

func (g *group) healthPort() uint16 {
	if g.health == nil {
		return 0
	}
	return g.health()
}

// find learns the standby's index in a group of size members: one marker per index, each sent
// through a program that maps its port to that index; the one that reaches the standby's socket
// names its index. A group of one needs no marker.
func (g *group) find(size int) error {
	g.size = size
	if size <= 1 {
		g.self, g.toCache = 0, noIndex
		return nil
	}
	var ms []marker
	defer func() {
		for _, m := range ms {
			m.close()
		}
		g.mu.Lock()
		g.markers = nil
		g.mu.Unlock()
	}()
	byPort := map[uint16]int{}
	for i := range size {
		m, err := newMarker(g.proto, g.addr)
		if err != nil {
			return fmt.Errorf("bind a marker socket on %s: %w", g.addr, err)
		}
		ms = append(ms, m)
		byPort[m.port] = i
	}
	for len(g.arrived) > 0 {
		<-g.arrived
	}
	g.mu.Lock()
	g.markers = byPort
	g.mu.Unlock()
	if err := g.program(byPort); err != nil {
		return err
	}
	to := netip.AddrPortFrom(g.addr, 53)
	if p := g.port(); p != 0 {
		to = netip.AddrPortFrom(g.addr, p)
	}
	for _, m := range ms {
		if err := m.send(g.proto, to); err != nil {
			return fmt.Errorf("send a %s marker to %s: %w", g.proto, to, err)
		}
	}
	deadline := time.After(500 * time.Millisecond)
	for {
		select {
		case p := <-g.arrived:
			i, ok := byPort[p]
			if !ok {
				continue
			}
			g.self = i
			g.toCache = noIndex
			for j := range size {
				if j != i {
					g.toCache = uint32(j)
					break
				}
			}
			return nil
		case <-deadline:
			g.self = -1
			return fmt.Errorf("no %s marker reached the standby's socket on %s: its place in the group is unknown", g.proto, g.addr)
		}
	}
}

// port is the group's port (53 but for tests), from the standby's own socket.
func (g *group) port() uint16 {
	var p uint16
	_ = g.conn.Control(func(fd uintptr) {
		sa, err := unix.Getsockname(int(fd))
		if err != nil {
			return
		}
		switch sa := sa.(type) {
		case *unix.SockaddrInet4:
			p = uint16(sa.Port)
		case *unix.SockaddrInet6:
			p = uint16(sa.Port)
		}
	})
	return p
}

// steerTo attaches the program sending everything but the health probes to self (standing in) or
// to the cache (giving back).
func (g *group) steerTo(self bool) error {
	if g.self < 0 {
		return fmt.Errorf("the standby's place in the %s group on %s is unknown", g.proto, g.addr)
	}
	if self {
		g.def = uint32(g.self)
	} else {
		g.def = g.toCache
	}
	return g.program(nil)
}

// detach removes the program: done before the standby's socket closes, so no program of a
// departed member steers the group.
func (g *group) detach() error {
	if !g.attached {
		return nil
	}
	g.attached = false
	return detachProgram(g.conn)
}

// drain waits until the UDP socket's receive queue is empty (twice, 5 ms apart) or timeout passes:
// what the kernel queued before the program sent new datagrams elsewhere is answered before the
// socket closes.
func (g *group) drain(timeout time.Duration) {
	if g.proto != "udp" {
		return
	}
	deadline := time.Now().Add(timeout)
	empty := 0
	for time.Now().Before(deadline) && empty < 2 {
		if queued(g.conn) == 0 {
			empty++
		} else {
			empty = 0
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ownPacketConn is the standby's UDP socket as its server reads it: datagrams from the standby's
// own marker and health sockets are dropped (and markers recorded), every other one passes.
type ownPacketConn struct {
	net.PacketConn
	g *group
}

func (c ownPacketConn) ReadFrom(b []byte) (int, net.Addr, error) {
	for {
		n, from, err := c.PacketConn.ReadFrom(b)
		if err == nil {
			if ua, ok := from.(*net.UDPAddr); ok && c.g.own(ua.AddrPort()) {
				continue
			}
		}
		return n, from, err
	}
}

// ownListener is the standby's TCP listener as its server accepts: connections from its own marker
// sockets are recorded and closed.
type ownListener struct {
	net.Listener
	g *group
}

func (l ownListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err == nil {
			if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok && l.g.own(ta.AddrPort()) {
				c.Close()
				continue
			}
		}
		return c, err
	}
}

// steering is the standby's programs on one address's UDP and TCP groups.
type steering struct {
	udp, tcp *group
	ok       bool
	members  string // the groups' membership when the standby's place was last found
	err      error
}

func (s *Standby) newSteering(a netip.Addr) *steering {
	st := &steering{udp: newGroup("udp", a, nil), tcp: newGroup("tcp", a, nil)}
	if p := s.probes[a]; p != nil {
		st.udp.health = p.fromPort
		st.tcp.health = func() uint16 { return 0 }
	}
	return st
}

// wrap is the forwarder's Wrap: the sockets' handles for the programs, and servers that drop the
// standby's own markers and probes.
func (st *steering) wrap(_ netip.Addr, pc net.PacketConn, l net.Listener) (net.PacketConn, net.Listener) {
	if c, ok := pc.(syscall.Conn); ok {
		st.udp.conn, _ = c.SyscallConn()
	}
	if c, ok := l.(syscall.Conn); ok {
		st.tcp.conn, _ = c.SyscallConn()
	}
	return ownPacketConn{PacketConn: pc, g: st.udp}, ownListener{Listener: l, g: st.tcp}
}

// steer finds the standby's place in both groups when their membership changed (or the prober's
// port did), and sends every new query and connection to the standby.
func (st *steering) steer(h *held, log *slog.Logger) {
	key := fmt.Sprint(h.members(), st.udp.healthPort())
	if st.members == key && st.ok {
		return
	}
	st.members = key
	var errs []error
	for _, g := range []struct {
		g    *group
		size int
	}{{st.udp, h.udpSize}, {st.tcp, h.tcpSize}} {
		if g.g.conn == nil {
			errs = append(errs, fmt.Errorf("no %s socket", g.g.proto))
			continue
		}
		if g.g.self < 0 && g.size > 0 {
			g.g.def = uint32(g.size - 1) // joined last: the best guess until the markers say
		}
		err := g.g.find(g.size)
		if err == nil {
			err = g.g.steerTo(true)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	wasOK, was := st.ok, st.err
	st.err = errors.Join(errs...)
	st.ok = st.err == nil
	if !st.ok {
		// Tried again at the next look (a new IPv6 address's first connection can wait for a SYN
		// retransmission); said once per distinct error.
		if was == nil || was.Error() != st.err.Error() {
			log.Warn("cannot steer the cache address's sockets; sharing them by the kernel's hash", "addr", st.udp.addr, "err", st.err)
		}
		st.detach(log)
	} else if !wasOK {
		log.Debug("steering", "addr", st.udp.addr, "how", st.describe())
	}
}

// toCache sends every new query and connection to the cache.
func (st *steering) toCache() error {
	return errors.Join(st.udp.steerTo(false), st.tcp.steerTo(false))
}

func (st *steering) detach(log *slog.Logger) {
	for _, g := range []*group{st.udp, st.tcp} {
		if err := g.detach(); err != nil {
			log.Warn("cannot detach the reuseport program", "addr", g.addr, "proto", g.proto, "err", err)
		}
	}
}

func (st *steering) describe() string {
	if !st.ok {
		if st.err != nil {
			return "shared by the kernel's hash: " + st.err.Error()
		}
		return "not yet steered"
	}
	return fmt.Sprintf("every new query to the standby (its UDP socket %d of %d, its TCP listener %d of %d), the health probes to the cache", st.udp.self, st.udp.size, st.tcp.self, st.tcp.size)
}
