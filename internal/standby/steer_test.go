package standby

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/testutil/nstest"
)

// member is one socket of a reuseport group in the test, counting what reaches it.
type member struct {
	pc   net.PacketConn
	l    net.Listener
	got  atomic.Int64
	conn syscall.RawConn
}

func join(t *testing.T, proto string, ap netip.AddrPort, wrap *group) *member {
	t.Helper()
	// The cache's listener is MPTCP, as CoreDNS built with Go 1.24+ has it (its TCP subflow shares
	// the group); the standby's is plain TCP, as the forwarder listens.
	lc := net.ListenConfig{Control: reusePort}
	if wrap != nil {
		lc = listenConfig()
	}
	m := &member{}
	if proto == "udp" {
		pc, err := lc.ListenPacket(context.Background(), "udp", ap.String())
		if err != nil {
			t.Fatal(err)
		}
		m.pc = pc
		m.conn, _ = pc.(syscall.Conn).SyscallConn()
		var r net.PacketConn = pc
		if wrap != nil {
			wrap.conn = m.conn
			r = ownPacketConn{PacketConn: pc, g: wrap}
		}
		go func() {
			b := make([]byte, 512)
			for {
				if _, _, err := r.ReadFrom(b); err != nil {
					return
				}
				m.got.Add(1)
			}
		}()
		return m
	}
	l, err := lc.Listen(context.Background(), "tcp", ap.String())
	if err != nil {
		t.Fatal(err)
	}
	m.l = l
	m.conn, _ = l.(syscall.Conn).SyscallConn()
	var r net.Listener = l
	if wrap != nil {
		wrap.conn = m.conn
		r = ownListener{Listener: l, g: wrap}
	}
	go func() {
		for {
			c, err := r.Accept()
			if err != nil {
				return
			}
			m.got.Add(1)
			c.Close()
		}
	}()
	return m
}

func (m *member) close() {
	if m.pc != nil {
		m.pc.Close()
	}
	if m.l != nil {
		m.l.Close()
	}
}

// send makes n new flows to ap from the pod address (a new socket each: a new source port, so the
// kernel's hash alone would spread them) and waits until they have all arrived somewhere.
func send(t *testing.T, proto string, from netip.Addr, ap netip.AddrPort, n int, ms ...*member) {
	t.Helper()
	var before int64
	for _, m := range ms {
		before += m.got.Load()
	}
	d := net.Dialer{LocalAddr: &net.UDPAddr{IP: from.AsSlice()}}
	if proto == "tcp" {
		d.LocalAddr = &net.TCPAddr{IP: from.AsSlice()}
	}
	for range n {
		c, err := d.Dial(proto, ap.String())
		if err != nil {
			t.Fatal(err)
		}
		if proto == "udp" {
			if _, err := c.Write([]byte("x")); err != nil {
				t.Fatal(err)
			}
		}
		c.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		var now int64
		for _, m := range ms {
			now += m.got.Load()
		}
		if now-before >= int64(n) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%d %s flows sent, not all arrived", n, proto)
}

// settle waits until the member has had n packets or connections (the markers find sent it).
func settle(t *testing.T, m *member, n int64) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for m.got.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("the cache's marker did not arrive (%d of %d)", m.got.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func counts(ms ...*member) []int64 {
	out := make([]int64, len(ms))
	for i, m := range ms {
		out[i] = m.got.Load()
	}
	return out
}

// TestSteerReuseportGroup: on this kernel a program attached by the standby's socket sends every
// new datagram (UDP) and every new connection (TCP) to the socket it names, for IPv4 and IPv6: the
// standby finds its own index with markers, takes every new flow, gives every one back, and finds
// its index again after the group changed (the cache's socket closed, a new one bound: the last
// member moves into the hole).
func TestSteerReuseportGroup(t *testing.T) {
	cache4, pod4 := netip.MustParseAddr("169.254.25.10"), netip.MustParseAddr("10.0.0.1")
	cache6, pod6 := netip.MustParseAddr("fd00:25::10"), netip.MustParseAddr("fd00:1::1")
	for _, c := range []struct{ cache, pod netip.Addr }{{cache4, pod4}, {cache6, pod6}} {
		for _, proto := range []string{"udp", "tcp"} {
			t.Run(fmt.Sprintf("%s/%s", proto, c.cache), func(t *testing.T) {
				nstest.ThreadNetns(t, netip.PrefixFrom(c.cache, c.cache.BitLen()), netip.PrefixFrom(c.pod, c.pod.BitLen()))
				ap := netip.AddrPortFrom(c.cache, 5353)
				cache := join(t, proto, ap, nil)
				defer func() { cache.close() }()
				g := newGroup(proto, c.cache, nil)
				sb := join(t, proto, ap, g)
				defer sb.close()
				if err := g.find(2); err != nil {
					t.Fatal(err)
				}
				if g.self != 1 || g.toCache != 0 {
					t.Fatalf("standby bound second: self %d, cache %d; want 1 and 0", g.self, g.toCache)
				}
				// The markers were dropped by the standby's socket, not counted; the cache's
				// reached it.
				settle(t, cache, 1)
				if sb.got.Load() != 0 {
					t.Errorf("a marker reached the standby's server: %d", sb.got.Load())
				}
				base := counts(cache, sb)
				if err := g.steerTo(true); err != nil {
					t.Fatal(err)
				}
				send(t, proto, c.pod, ap, 50, cache, sb)
				if got := counts(cache, sb); got[0] != base[0] || got[1] != base[1]+50 {
					t.Errorf("steered to the standby: cache %d, standby %d new flows; want 0 and 50", got[0]-base[0], got[1]-base[1])
				}
				base = counts(cache, sb)
				if err := g.steerTo(false); err != nil {
					t.Fatal(err)
				}
				send(t, proto, c.pod, ap, 50, cache, sb)
				if got := counts(cache, sb); got[0] != base[0]+50 || got[1] != base[1] {
					t.Errorf("given back: cache %d, standby %d new flows; want 50 and 0", got[0]-base[0], got[1]-base[1])
				}
				// The cache's socket closes and a new one binds: the standby moved to index 0,
				// the new cache is at 1.
				cache.close()
				cache = join(t, proto, ap, nil)
				if err := g.find(2); err != nil {
					t.Fatal(err)
				}
				if g.self != 0 || g.toCache != 1 {
					t.Fatalf("after the cache re-bound: self %d, cache %d; want 0 and 1", g.self, g.toCache)
				}
				settle(t, cache, 1)
				base = counts(cache, sb)
				if err := g.steerTo(true); err != nil {
					t.Fatal(err)
				}
				send(t, proto, c.pod, ap, 50, cache, sb)
				if got := counts(cache, sb); got[0] != base[0] || got[1] != base[1]+50 {
					t.Errorf("steered to the standby again: cache %d, standby %d new flows; want 0 and 50", got[0]-base[0], got[1]-base[1])
				}
				if err := g.detach(); err != nil {
					t.Fatal(err)
				}
				if err := g.detach(); err != nil {
					t.Errorf("a second detach: %v", err)
				}
			})
		}
	}
}
