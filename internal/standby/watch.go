package standby

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/nodedns/nodedns/internal/hostnet"
	"golang.org/x/sys/unix"
)

// Listener is one socket bound to port 53 of a cache address.
type Listener struct {
	Addr  netip.Addr
	Proto string // "udp" or "tcp"
	Inode uint64
	// UID is the user the socket belongs to: the kernel lets a socket join another's SO_REUSEPORT
	// group only when they are the same user's.
	UID uint32
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
		out[i] = Listener{Addr: l.Addr, Proto: l.Proto, Inode: uint64(l.Inode), UID: l.UID}
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
	// onExit runs in the watch's goroutine the moment an exit is seen, before Exited closes;
	// onThread when the first watched thread exits.
	onExit, onThread func()
	threadfds        []int
	// armed are the sockets onThread or onExit bind: closed when the watch ends if neither took
	// them.
	armed *catchOnce
	done  chan struct{} // the goroutine is done
}

// watchExit opens a pidfd for each pid (those already gone are left out) and starts waiting for
// the first exit; onExit, when not nil, runs the moment an exit is seen. With onThread it also
// watches every thread of the processes (pidfds with PIDFD_THREAD, Linux 6.9+; none where the
// kernel has no such pidfd) and runs onThread, once, when the first of them exits. A process killed
// (SIGKILL, the OOM killer) loses its threads one by one; its last thread frees its memory (for a
// Go cache, milliseconds) before its files, and so its sockets, close. The first thread's exit is
// the earliest word of that, while its sockets are still there. Neither takes ptrace access:
// /proc/PID/task lists any process's threads, and pidfd_open(2) asks only that the thread exist.
func watchExit(onExit, onThread func(), pids ...int) (*exitWatch, error) {
	w := &exitWatch{Exited: make(chan struct{}), onExit: onExit, onThread: onThread, done: make(chan struct{})}
	for _, pid := range pids {
		if onThread != nil {
			w.threadfds = append(w.threadfds, threadPidfds(pid)...)
		}
	}
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
		for _, fd := range w.threadfds {
			unix.Close(fd)
		}
		return nil, errors.Join(append(errs, errors.New("no process to watch"))...)
	}
	if err := unix.Pipe2(w.stop[:], unix.O_CLOEXEC); err != nil {
		for _, fd := range append(w.pidfds, w.threadfds...) {
			unix.Close(fd)
		}
		return nil, err
	}
	go w.wait()
	return w, nil
}

// threadPidfds opens a pidfd for each thread of pid (none where the kernel has no PIDFD_THREAD).
func threadPidfds(pid int) []int {
	var fds []int
	tasks, _ := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
	for _, d := range tasks {
		tid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if fd, err := unix.PidfdOpen(tid, unix.PIDFD_THREAD); err == nil {
			fds = append(fds, fd)
		}
	}
	return fds
}

func (w *exitWatch) wait() {
	defer close(w.done)
	defer unix.Close(w.stop[0])
	defer func() {
		for _, fd := range append(w.pidfds, w.threadfds...) {
			unix.Close(fd)
		}
	}()
	fds := []unix.PollFd{{Fd: int32(w.stop[0]), Events: unix.POLLIN}}
	for _, fd := range w.pidfds {
		fds = append(fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
	}
	procs := len(fds)
	for _, fd := range w.threadfds {
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
		// A thread gone: say so once, and watch the others no more (the process's exit follows).
		for _, f := range fds[procs:] {
			if f.Revents != 0 {
				fds = fds[:procs]
				if w.onThread != nil {
					w.onThread()
				}
				break
			}
		}
		for _, f := range fds[1:procs] {
			if f.Revents != 0 {
				if w.onExit != nil {
					w.onExit()
				}
				close(w.Exited)
				return
			}
		}
	}
}

// Close ends the watch (sockets armed for an exit that did not come are closed once the watch's
// goroutine is done).
func (w *exitWatch) Close() {
	w.once.Do(func() {
		_, _ = unix.Write(w.stop[1], []byte{0})
		unix.Close(w.stop[1])
		go func() {
			<-w.done
			if w.armed != nil {
				disarm(w.armed.take())
			}
		}()
	})
}
