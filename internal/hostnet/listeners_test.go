package hostnet_test

import (
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"testing"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/nodedns/nodedns/internal/hostnet"
	"github.com/nodedns/nodedns/internal/hostnet/netstate"
	"github.com/nodedns/nodedns/internal/testutil/nstest"
)

// TestListenersLive lists, over sock_diag in a sandbox's network namespace, the sockets bound to port
// 53 of the cache addresses: a UDP socket and a listening TCP one on 169.254.25.10, a UDP socket on
// fd00:25::10 made while the thread's file system uid was nobody's (its owner, as the kernel says),
// each with the inode its file descriptor links to; a TCP socket bound there but not listening, a
// socket on another address and one on another port are left out.
func TestListenersLive(t *testing.T) {
	sb := nstest.New(t)
	sb.Run(t, "ip link add nodelocaldns type bridge && ip addr add 169.254.25.10/32 dev nodelocaldns && ip addr add 169.254.20.10/32 dev nodelocaldns"+
		" && ip addr add fd00:25::10/128 dev nodelocaldns nodad && ip link set nodelocaldns up")
	ns, err := netns.GetFromPath(fmt.Sprintf("/proc/%d/ns/net", sb.PID))
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	// One thread does everything in the sandbox's namespace and is never handed back.
	type result struct {
		got  []netstate.Listener
		want []netstate.Listener
		err  error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // not unlocked: the thread ends with the goroutine
		var r result
		defer func() { done <- r }()
		if r.err = netns.Set(ns); r.err != nil {
			return
		}
		sock := func(fam, typ int, addr string, port int, listen bool, fsuid int) (uint32, error) {
			if fsuid >= 0 {
				unix.Setfsuid(fsuid)
				defer unix.Setfsuid(0)
			}
			fd, err := unix.Socket(fam, typ|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return 0, err
			}
			t.Cleanup(func() { unix.Close(fd) })
			a := netip.MustParseAddr(addr)
			var sa unix.Sockaddr = &unix.SockaddrInet6{Port: port, Addr: a.As16()}
			if a.Is4() {
				sa = &unix.SockaddrInet4{Port: port, Addr: a.As4()}
			}
			if err := unix.Bind(fd, sa); err != nil {
				return 0, err
			}
			if listen {
				if err := unix.Listen(fd, 8); err != nil {
					return 0, err
				}
			}
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil {
				return 0, err
			}
			return uint32(st.Ino), nil
		}
		for _, s := range []struct {
			fam, typ int
			addr     string
			port     int
			listen   bool
			uid      int
			want     string // "udp", "tcp" or "" (left out)
		}{
			{unix.AF_INET, unix.SOCK_DGRAM, "169.254.25.10", 53, false, -1, "udp"},
			{unix.AF_INET, unix.SOCK_STREAM, "169.254.25.10", 53, true, -1, "tcp"},
			{unix.AF_INET6, unix.SOCK_DGRAM, "fd00:25::10", 53, false, 65534, "udp"},
			{unix.AF_INET6, unix.SOCK_STREAM, "fd00:25::10", 53, false, -1, ""},
			{unix.AF_INET, unix.SOCK_DGRAM, "169.254.20.10", 53, false, -1, ""},
			{unix.AF_INET, unix.SOCK_DGRAM, "169.254.25.10", 5353, false, -1, ""},
		} {
			ino, err := sock(s.fam, s.typ, s.addr, s.port, s.listen, s.uid)
			if err != nil {
				r.err = fmt.Errorf("socket on %s:%d: %w", s.addr, s.port, err)
				return
			}
			if s.want != "" {
				uid := uint32(0)
				if s.uid >= 0 {
					uid = uint32(s.uid)
				}
				r.want = append(r.want, netstate.Listener{Addr: netip.MustParseAddr(s.addr), Proto: s.want, Inode: ino, UID: uid})
			}
		}
		r.got, r.err = hostnet.Listeners([]netip.Addr{netip.MustParseAddr("169.254.25.10"), netip.MustParseAddr("fd00:25::10")}, 53)
	}()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	order := func(a, b netstate.Listener) int { return int(a.Inode) - int(b.Inode) }
	slices.SortFunc(r.got, order)
	slices.SortFunc(r.want, order)
	if !slices.Equal(r.got, r.want) {
		t.Errorf("Listeners:\n got %+v\nwant %+v", r.got, r.want)
	}
}
