package standby

// catch.go: the standby's sockets bound the moment the cache's process dies (docs/contract.md
// "Standby", "A crash"), by the exit watch's goroutine, before the run loop wakes.

import (
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

type caughtConns struct {
	pc net.PacketConn
	l  net.Listener
	at time.Time
}

// armed are sockets made ready for the moment the cache's process exits: created with SO_REUSEPORT
// while it runs, bound (and the TCP one listening) by the exit watch's goroutine as soon as it sees
// the exit. Measured (a SIGKILLed process holding a UDP socket, a sender every 20 µs): with the
// sockets created beforehand, no datagram met a closed port in 14 of 20 kills and one did in the
// other 6; creating and binding them in the run loop after the exit left pods' queries refused for
// about a millisecond, which in a crash loop was most of what was lost.
type armed struct {
	addr     netip.Addr
	udp, tcp int
}

// arm makes the sockets for addrs.
func arm(addrs []netip.Addr) []armed {
	var out []armed
	for _, a := range addrs {
		fam := unix.AF_INET
		if a.Is6() {
			fam = unix.AF_INET6
		}
		x := armed{addr: a, udp: -1, tcp: -1}
		for _, p := range []struct {
			typ int
			fd  *int
		}{{unix.SOCK_DGRAM, &x.udp}, {unix.SOCK_STREAM, &x.tcp}} {
			fd, err := unix.Socket(fam, p.typ|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				continue
			}
			if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
				unix.Close(fd)
				continue
			}
			*p.fd = fd
		}
		out = append(out, x)
	}
	return out
}

func addrsOf(as []armed) []netip.Addr {
	out := make([]netip.Addr, len(as))
	for i, x := range as {
		out[i] = x.addr
	}
	return out
}

func disarm(as []armed) {
	for _, x := range as {
		for _, fd := range []int{x.udp, x.tcp} {
			if fd >= 0 {
				unix.Close(fd)
			}
		}
	}
}

// catch binds the armed sockets (it runs in the exit watch's goroutine) once: at the first thread's
// exit (early), or at the process's. Those of an address the standby already covers, or holds
// sockets caught earlier on, are closed.
// Every socket is bound (the TCP one listening) before any is handed to Go's poller: the binding is
// what ends the moment queries meet a closed port.
//
// Bound early, the standby's sockets join the group beside the dying cache's, which the kernel
// numbered first (0..k-1: it bound them, and the standby left the group when it gave back); a
// program returning 0 keeps every packet on the cache's first socket while it is open, and once the
// cache's sockets close, the last member (the standby) takes place 0 and every packet. Measured in a
// crash loop: with the binding at the process's exit, queries met a closed port for 0.1 to 0.8 ms
// at every kill (CoreDNS's memory is freed before its files close, and the exit is told after both).
func (s *Standby) catch(c *catchOnce, port int, early bool) {
	as := c.take()
	var bound []armed
	for _, x := range as {
		s.mu.Lock()
		_, caught := s.caught[x.addr]
		covered := s.fwd[x.addr] != nil || caught // an earlier catch's sockets are there already
		s.mu.Unlock()
		sa := sockaddr(netip.AddrPortFrom(x.addr, uint16(port)))
		if covered || x.udp < 0 || unix.Bind(x.udp, sa) != nil {
			disarm([]armed{x})
			continue
		}
		if x.tcp >= 0 && (unix.Bind(x.tcp, sa) != nil || unix.Listen(x.tcp, unix.SOMAXCONN) != nil) {
			unix.Close(x.tcp)
			x.tcp = -1
		}
		bound = append(bound, x)
	}
	if early {
		for _, x := range bound {
			for _, fd := range []int{x.udp, x.tcp} {
				if prog, err := groupProgram(x.addr, 0, nil); err == nil && fd >= 0 {
					_ = attachFD(fd, prog)
				}
			}
		}
	} else if len(bound) > 0 {
		// A socket of the dead cache can still be in the group: the standby, just bound last,
		// takes every new packet and connection until the run loop finds its place (steer).
		if ls, err := Listeners(addrsOf(bound)); err == nil {
			for _, x := range bound {
				for _, p := range []struct {
					proto string
					fd    int
				}{{"udp", x.udp}, {"tcp", x.tcp}} {
					n := 0
					for _, l := range ls {
						if l.Addr == x.addr && l.Proto == p.proto {
							n++
						}
					}
					if p.fd >= 0 && n > 1 {
						if prog, err := groupProgram(x.addr, uint32(n-1), nil); err == nil {
							_ = attachFD(p.fd, prog)
						}
					}
				}
			}
		}
	}
	for _, x := range bound {
		c := caughtConns{at: time.Now()}
		// net.File* take a copy of the descriptor; closing the os.File closes the original.
		f := os.NewFile(uintptr(x.udp), "udp")
		c.pc, _ = net.FilePacketConn(f)
		f.Close()
		if x.tcp >= 0 {
			f := os.NewFile(uintptr(x.tcp), "tcp")
			c.l, _ = net.FileListener(f)
			f.Close()
		}
		if c.pc == nil {
			if c.l != nil {
				c.l.Close()
			}
			continue
		}
		s.mu.Lock()
		if s.caught == nil {
			s.caught = map[netip.Addr]caughtConns{}
		}
		s.caught[x.addr] = c
		s.mu.Unlock()
	}
}

// catchOnce hands the armed sockets to the first catch.
type catchOnce struct {
	mu sync.Mutex
	as []armed
}

func (c *catchOnce) take() []armed {
	c.mu.Lock()
	defer c.mu.Unlock()
	as := c.as
	c.as = nil
	return as
}

// earlyGrace is how long sockets bound at a thread's exit wait for the process's: a process that
// lives on lost a thread for another reason (a Go program ending a locked thread), and the sockets
// go.
const earlyGrace = 3 * time.Second

// caughtInodes are the inodes of the sockets caught and not yet served: the standby's own.
func (s *Standby) caughtInodes() map[uint64]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[uint64]bool{}
	for _, c := range s.caught {
		out[inode(c.pc.(syscall.Conn))] = true
		if c.l != nil {
			out[inode(c.l.(syscall.Conn))] = true
		}
	}
	return out
}

// caughtAddrs are the addresses with sockets caught and not yet served.
func (s *Standby) caughtAddrs() map[netip.Addr]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[netip.Addr]bool{}
	for a := range s.caught {
		out[a] = true
	}
	return out
}

// takeCaught is the forwarder's Bound: the sockets caught on a, if any.
func (s *Standby) takeCaught(a netip.Addr) (net.PacketConn, net.Listener) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.caught[a]
	if !ok {
		return nil, nil
	}
	delete(s.caught, a)
	return c.pc, c.l
}

// dropCaught closes what was caught and not served: on an address the standby covers now, one it
// could not stand in on, or, while a cache serves it, once a watched process's exit was told
// (exited) or earlyGrace after the catch (its process did not exit). The program goes first.
func (s *Standby) dropCaught(serving map[netip.Addr]bool, exited bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for a, c := range s.caught {
		if s.fwd[a] == nil && serving[a] && !exited && time.Since(c.at) < earlyGrace {
			continue // bound at a thread's exit: the process's exit follows
		}
		for _, x := range []any{c.pc, c.l} {
			if sc, ok := x.(syscall.Conn); ok {
				if rc, err := sc.SyscallConn(); err == nil {
					_ = detachProgram(rc)
				}
			}
		}
		c.pc.Close()
		if c.l != nil {
			c.l.Close()
		}
		delete(s.caught, a)
	}
}
