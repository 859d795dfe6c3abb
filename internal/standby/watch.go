package standby

import (
	"errors"
	"net/netip"
	"slices"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Listener is one socket bound to port 53 of a cache address.
type Listener struct {
	Addr  netip.Addr
	Proto string // "udp" or "tcp"
	Inode uint64
}

// Listeners lists the UDP sockets and listening TCP sockets bound to port 53 of any of addrs, in
// this network namespace, over sock_diag netlink (inet_diag): no /proc table is read or parsed.
func Listeners(addrs []netip.Addr) ([]Listener, error) {
	var out []Listener
	var errs []error
	for _, fam := range []uint8{unix.AF_INET, unix.AF_INET6} {
		if !slices.ContainsFunc(addrs, func(a netip.Addr) bool { return a.Is4() == (fam == unix.AF_INET) }) {
			continue
		}
		udp, err := netlink.SocketDiagUDP(fam)
		if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
			errs = append(errs, err)
		}
		tcp, err := netlink.SocketDiagTCP(fam)
		if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
			errs = append(errs, err)
		}
		for _, s := range udp {
			out = appendListener(out, addrs, s, "udp")
		}
		for _, s := range tcp {
			if s.State == 10 { // TCP_LISTEN
				out = appendListener(out, addrs, s, "tcp")
			}
		}
	}
	return out, errors.Join(errs...)
}

func appendListener(out []Listener, addrs []netip.Addr, s *netlink.Socket, proto string) []Listener {
	if s.ID.SourcePort != 53 {
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
	return append(out, Listener{Addr: a, Proto: proto, Inode: uint64(s.INode)})
}

// exitWatch tells when one process exits, through a pidfd polled in a goroutine: nothing wakes until
// the process exits or the watch is closed.
type exitWatch struct {
	PID    int
	pidfd  int
	stop   [2]int // a pipe: writing to it ends the poll
	once   sync.Once
	Exited chan struct{}
}

// watchExit opens a pidfd for pid and starts waiting for its exit.
func watchExit(pid int) (*exitWatch, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, err
	}
	w := &exitWatch{PID: pid, pidfd: fd, Exited: make(chan struct{})}
	if err := unix.Pipe2(w.stop[:], unix.O_CLOEXEC); err != nil {
		unix.Close(fd)
		return nil, err
	}
	go w.wait()
	return w, nil
}

func (w *exitWatch) wait() {
	defer unix.Close(w.stop[0])
	defer unix.Close(w.pidfd)
	fds := []unix.PollFd{{Fd: int32(w.pidfd), Events: unix.POLLIN}, {Fd: int32(w.stop[0]), Events: unix.POLLIN}}
	for {
		_, err := unix.Poll(fds, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || fds[1].Revents != 0 {
			return
		}
		if fds[0].Revents != 0 {
			close(w.Exited)
			return
		}
	}
}

// Close ends the watch.
func (w *exitWatch) Close() {
	w.once.Do(func() {
		_, _ = unix.Write(w.stop[1], []byte{0})
		unix.Close(w.stop[1])
	})
}
