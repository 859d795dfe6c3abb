package standby

// health.go: is the cache answering? (docs/contract.md "Standby", "A hung cache"). A process can
// hold its listeners and answer nothing (stopped, deadlocked, starved): the kernel keeps queueing
// queries on its socket and pods time out. The prober asks the cache a question every few tens of
// milliseconds from a socket bound to the cache address; the standby's reuseport program always
// sends that socket's packets to the cache's own socket, also while every other query goes to the
// standby, so the standby learns the cache answers again before it gives pods back.
//
// The question is a bare DNS header with no question (QDCOUNT 0): miekg/dns, which CoreDNS and so
// node-cache serve with, answers it FORMERR at once from its accept function (server.go
// defaultMsgAcceptFunc), before any plugin runs: nothing is forwarded, cached or logged.

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of the prober: a question every 25 ms; the cache hangs when none has been answered for
// 100 ms (four rounds). With pods' lookups timing out after 250 ms or more, the standby takes over
// before a retry, and the longest time pods go without an answer stays near 100 ms.
const (
	DefaultProbeEvery = 25 * time.Millisecond
	DefaultHungAfter  = 100 * time.Millisecond
	// answeredStreak is how many answers in a row make a cache that answers again.
	answeredStreak = 3
)

// prober asks the cache on one address whether it answers.
type prober struct {
	addr             netip.Addr
	port             uint16 // the cache's port (53 but for tests)
	every, hungAfter time.Duration
	notify           func() // told when the cache starts or stops answering

	// from is the prober's own port: the group's program sends what comes from it to the cache.
	from atomic.Uint32

	mu           sync.Mutex
	conn         *net.UDPConn
	id           uint16
	pendingSince time.Time // the first question since the last answer; zero while answered
	lastAnswer   time.Time
	streak       int
	hung         bool
}

func newProber(addr netip.Addr, port int, every, hungAfter time.Duration, notify func()) *prober {
	return &prober{addr: addr, port: uint16(port), every: every, hungAfter: hungAfter, notify: notify}
}

// run asks until ctx ends.
func (p *prober) run(ctx context.Context) {
	t := time.NewTicker(p.every)
	defer t.Stop()
	defer func() {
		p.mu.Lock()
		if p.conn != nil {
			p.conn.Close()
		}
		p.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.ask()
		}
	}
}

// ask sends one question (binding the prober's socket first when the address is there) and judges
// whether the cache hangs.
func (p *prober) ask() {
	p.mu.Lock()
	if p.conn == nil {
		c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(p.addr, 0)))
		if err == nil {
			p.conn = c
			p.from.Store(uint32(c.LocalAddr().(*net.UDPAddr).Port))
			go p.read(c)
		}
	}
	now := time.Now()
	if p.conn != nil {
		p.id++
		q := make([]byte, 12)
		binary.BigEndian.PutUint16(q[0:], p.id)
		// A failed send (the address gone) is a question nobody answers.
		_, _ = p.conn.WriteToUDPAddrPort(q, netip.AddrPortFrom(p.addr, p.port))
	}
	if p.pendingSince.IsZero() {
		p.pendingSince = now
	} else {
		p.streak = 0 // the last question is still unanswered
	}
	changed := false
	if hung := !p.pendingSince.IsZero() && now.Sub(p.pendingSince) >= p.hungAfter; hung != p.hung {
		p.hung, changed = hung, true
	}
	p.mu.Unlock()
	if changed && p.notify != nil {
		p.notify()
	}
}

// read takes the cache's answers.
func (p *prober) read(c *net.UDPConn) {
	b := make([]byte, 512)
	for {
		n, from, err := c.ReadFromUDPAddrPort(b)
		if err != nil {
			return
		}
		if n < 12 || from.Addr().Unmap() != p.addr || from.Port() != p.port || b[2]&0x80 == 0 {
			continue
		}
		p.mu.Lock()
		p.pendingSince = time.Time{}
		p.lastAnswer = time.Now()
		p.streak++
		changed := false
		if p.hung || p.streak == answeredStreak {
			p.hung, changed = false, true
		}
		p.mu.Unlock()
		if changed && p.notify != nil {
			p.notify()
		}
	}
}

// isHung reports whether the cache has answered nothing for hungAfter.
func (p *prober) isHung() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hung
}

// answers reports whether the cache answered the last answeredStreak questions, the last one
// lately.
func (p *prober) answers() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.streak >= answeredStreak && p.pendingSince.IsZero() && time.Since(p.lastAnswer) < 2*p.every+p.hungAfter
}

// port is the prober's own source port (0 until it could bind).
func (p *prober) fromPort() uint16 { return uint16(p.from.Load()) }
