package standby

import (
	"errors"
	"net/netip"
	"sync"

	"github.com/nodedns/nodedns/internal/hostnet"
	"golang.org/x/sys/unix"
)

// Listener is one socket bound to port 53 of a cache address.
type Listener struct {
	Addr  netip.Addr
	Proto string // "udp" or "tcp"
	Inode uint64
}

// Listeners lists the UDP sockets and listening TCP sockets bound to port 53 of any of addrs, in
// this network namespace, over sock_diag netlink (hostnet.Listeners): no /proc table is read or
// parsed.
func Listeners(addrs []netip.Addr) ([]Listener, error) {
	ls, err := hostnet.Listeners(addrs, 53)
	if err != nil {
		return nil, err
	}
	out := make([]Listener, len(ls))
	for i, l := range ls {
		out[i] = Listener{Addr: l.Addr, Proto: l.Proto, Inode: uint64(l.Inode)}
	}
	return out, nil
}

// exitWatch tells when one of some processes exits, through pidfds polled in a goroutine: nothing
// wakes until a process exits or the watch is closed.
type exitWatch struct {
	PIDs   []int
	pidfds []int
	stop   [2]int // a pipe: writing to it ends the poll
	once   sync.Once
	Exited chan struct{}
}

// watchExit opens a pidfd for each pid (those already gone are left out) and starts waiting for
// the first exit.
func watchExit(pids ...int) (*exitWatch, error) {
	w := &exitWatch{Exited: make(chan struct{})}
	var errs []error
	for _, pid := range pids {
		fd, err := unix.PidfdOpen(pid, 0) // a pidfd is close-on-exec
		if err != nil {
			errs = append(errs, err)
			continue
		}
		w.PIDs, w.pidfds = append(w.PIDs, pid), append(w.pidfds, fd)
	}
	if len(w.pidfds) == 0 {
		return nil, errors.Join(append(errs, errors.New("no process to watch"))...)
	}
	if err := unix.Pipe2(w.stop[:], unix.O_CLOEXEC); err != nil {
		for _, fd := range w.pidfds {
			unix.Close(fd)
		}
		return nil, err
	}
	go w.wait()
	return w, nil
}

func (w *exitWatch) wait() {
	defer unix.Close(w.stop[0])
	defer func() {
		for _, fd := range w.pidfds {
			unix.Close(fd)
		}
	}()
	fds := []unix.PollFd{{Fd: int32(w.stop[0]), Events: unix.POLLIN}}
	for _, fd := range w.pidfds {
		fds = append(fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
	}
	for {
		_, err := unix.Poll(fds, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || fds[0].Revents != 0 {
			return
		}
		for _, f := range fds[1:] {
			if f.Revents != 0 {
				close(w.Exited)
				return
			}
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
