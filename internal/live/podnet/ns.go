package podnet

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"github.com/nodedns/nodedns/probes/podprobe"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// statNS returns the identity of the namespace file at p (following the /proc magic link).
func statNS(p string) (podprobe.NSID, error) {
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return podprobe.NSID{}, fmt.Errorf("stat %s: %w", p, err)
	}
	return podprobe.NSID{Dev: st.Dev, Ino: st.Ino}, nil
}

// errStaleNS says a namespace file now names another namespace than the one found (its process
// exited and the PID was reused, or the bind mount was replaced): nothing is done in it.
var errStaleNS = errors.New("the namespace is no longer the one found")

// openNS opens the namespace file at p and checks that it is still want (when want is known).
func openNS(p string, want podprobe.NSID) (netns.NsHandle, error) {
	ns, err := netns.GetFromPath(p)
	if err != nil {
		return netns.None(), fmt.Errorf("open namespace %s: %w", p, err)
	}
	if want.IsZero() {
		return ns, nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(ns), &st); err != nil {
		ns.Close()
		return netns.None(), fmt.Errorf("stat namespace %s: %w", p, err)
	}
	if (podprobe.NSID{Dev: st.Dev, Ino: st.Ino}) != want {
		ns.Close()
		return netns.None(), fmt.Errorf("open namespace %s: %w", p, errStaleNS)
	}
	return ns, nil
}

// errThreadLost is returned when a thread could not go back to its own namespace; the runtime ends
// that thread (its goroutine exits while still locked to it), so the process never runs anything
// else in the foreign namespace.
var errThreadLost = errors.New("could not return to the host namespace: the thread was retired")

// inNS runs fn on a fresh OS thread that has entered the namespace ns of type nstype
// (unix.CLONE_NEWNET or unix.CLONE_NEWUTS), then brings the thread back to the namespace it came from
// before it runs any other goroutine. fn must only create things bound to the namespace (a socket, a
// netlink handle) or read it (uname): it must not block, since the thread is held for its duration.
// Sockets keep the namespace they were created in, so their I/O happens later from any thread.
//
// A new goroutine is used so that a caller already locked to its thread is never moved, and so that
// a thread that cannot go back dies with it (runtime.LockOSThread: a goroutine that exits locked
// takes its thread with it).
func inNS(ns netns.NsHandle, nstype int, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open(selfNSPath(nstype))
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open this thread's namespace: %w", err)
			return
		}
		defer self.Close()
		if err := unix.Setns(int(ns), nstype); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter namespace: %w", err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(self.Fd()), nstype); err != nil {
			// Stay locked: the runtime ends this thread when the goroutine returns.
			errc <- fmt.Errorf("%w: %v", errThreadLost, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// selfNSPath is the calling thread's own namespace file (not the process's: namespaces are per
// thread, and the main thread may be elsewhere).
func selfNSPath(nstype int) string {
	name := "net"
	if nstype == unix.CLONE_NEWUTS {
		name = "uts"
	}
	return "/proc/thread-self/ns/" + name
}

// hostnameOf reads the hostname of the UTS namespace at p (a process's /proc/PID/ns/uts).
func hostnameOf(p string) (string, error) {
	ns, err := openNS(p, podprobe.NSID{})
	if err != nil {
		return "", err
	}
	defer ns.Close()
	var u unix.Utsname
	if err := inNS(ns, unix.CLONE_NEWUTS, func() error { return unix.Uname(&u) }); err != nil {
		return "", fmt.Errorf("read the hostname of %s: %w", p, err)
	}
	return unix.ByteSliceToString(u.Nodename[:]), nil
}
