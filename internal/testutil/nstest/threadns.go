package nstest

import (
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// ThreadNetns puts the calling test goroutine, locked to its thread, into a network namespace of
// its own until the test ends: lo up, with addrs on it (no DAD). Every socket, netlink request and
// command the goroutine starts is there; goroutines it starts are not (a socket it opened stays
// there wherever it is read). For tests of code that acts on "this" network namespace (netlink,
// nf_tables, reuseport groups) without a sandbox's processes.
func ThreadNetns(t testing.TB, addrs ...netip.Prefix) {
	t.Helper()
	Require(t)
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	ns, err := netns.New()
	if err != nil {
		t.Fatalf("new netns: %v", err)
	}
	t.Cleanup(func() {
		ns.Close()
		if err := netns.Set(orig); err == nil {
			runtime.UnlockOSThread() // else the thread ends with the goroutine
		}
		orig.Close()
	})
	lo, err := netlink.LinkByName("lo")
	if err == nil {
		err = netlink.LinkSetUp(lo)
	}
	for _, p := range addrs {
		if err == nil {
			err = netlink.AddrAdd(lo, &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}, Flags: unix.IFA_F_NODAD})
		}
	}
	if err != nil {
		t.Fatalf("set up the netns: %v", err)
	}
	// A new namespace's first IPv6 connection on lo can take a SYN retransmission (seen here: the
	// first of 50 connects to an fd00:: address took over 200 ms, the rest none): connect to each
	// address until one is quick, so a test's own first packets are not the ones that wait.
	for _, p := range addrs {
		l, err := net.Listen("tcp", netip.AddrPortFrom(p.Addr(), 0).String())
		if err != nil {
			t.Fatalf("warm up %s: %v", p.Addr(), err)
		}
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		deadline := time.Now().Add(5 * time.Second)
		for {
			c, err := net.DialTimeout("tcp", l.Addr().String(), 100*time.Millisecond)
			if err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("warm up %s: %v", p.Addr(), err)
			}
		}
		l.Close()
	}
}
