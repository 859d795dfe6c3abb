package standby

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"
)

// Defaults of a Forwarder.
const (
	DefaultTimeout     = 2 * time.Second
	DefaultMaxInFlight = 1000
)

// Forwarder answers on the cache addresses while the cache is gone: UDP and TCP on port 53 of each
// address, bound with SO_REUSEPORT so the cache can bind beside it when it comes back.
type Forwarder struct {
	Targets Targets
	// Port is 53 but for tests.
	Port int
	// Timeout bounds one query to one target; MaxInFlight bounds the queries being forwarded at
	// once (beyond it the answer is SERVFAIL at once).
	Timeout     time.Duration
	MaxInFlight int
	// UpstreamPort is where targets listen (53 but for tests).
	UpstreamPort int
	// OnQuery, when set, is told each answer's rcode (for metrics).
	OnQuery func(rcode int)
	// Wrap, when set, is given each address's UDP socket and TCP listener once bound, before they
	// serve, and returns what the servers read (the standby's steering: steer.go).
	Wrap func(a netip.Addr, pc net.PacketConn, l net.Listener) (net.PacketConn, net.Listener)
	// Bound, when set, gives sockets already bound to an address (bound the moment the cache's
	// process exited: watch.go), served instead of binding new ones; nil ones are bound here.
	Bound func(a netip.Addr) (net.PacketConn, net.Listener)

	servers []*dns.Server
	inodes  map[uint64]bool
	sem     chan struct{}
	queries atomic.Int64
	udp     *dns.Client
	tcp     *dns.Client
}

// ErrNotLocal is returned by Start when an address is on no local interface (EADDRNOTAVAIL).
var ErrNotLocal = errors.New("address not on a local interface")

// Start binds every address (UDP and TCP) and serves until Stop. An address that cannot be bound
// fails the whole start: the sockets already bound are closed.
func (f *Forwarder) Start(addrs []netip.Addr) error {
	if f.Port == 0 {
		f.Port = 53
	}
	if f.UpstreamPort == 0 {
		f.UpstreamPort = 53
	}
	if f.Timeout == 0 {
		f.Timeout = DefaultTimeout
	}
	if f.MaxInFlight == 0 {
		f.MaxInFlight = DefaultMaxInFlight
	}
	f.sem = make(chan struct{}, f.MaxInFlight)
	f.inodes = map[uint64]bool{}
	f.udp = &dns.Client{Net: "udp", Timeout: f.Timeout, UDPSize: dns.MaxMsgSize}
	f.tcp = &dns.Client{Net: "tcp", Timeout: f.Timeout}
	lc := listenConfig()
	for _, a := range addrs {
		hp := netip.AddrPortFrom(a, uint16(f.Port)).String()
		var pc net.PacketConn
		var l net.Listener
		if f.Bound != nil {
			pc, l = f.Bound(a)
		}
		var err error
		if pc == nil {
			if pc, err = lc.ListenPacket(context.Background(), "udp", hp); err != nil {
				if l != nil {
					l.Close()
				}
				f.Stop()
				return bindErr(a, err)
			}
		}
		if l == nil {
			if l, err = lc.Listen(context.Background(), "tcp", hp); err != nil {
				pc.Close()
				f.Stop()
				return bindErr(a, err)
			}
		}
		f.inodes[inode(pc.(syscall.Conn))] = true
		f.inodes[inode(l.(syscall.Conn))] = true
		if f.Wrap != nil {
			pc, l = f.Wrap(a, pc, l)
		}
		for _, s := range []*dns.Server{
			{PacketConn: pc, Handler: dns.HandlerFunc(f.serve), UDPSize: dns.MaxMsgSize},
			{Listener: l, Handler: dns.HandlerFunc(f.serve), ReadTimeout: f.Timeout, WriteTimeout: f.Timeout},
		} {
			started := make(chan struct{})
			s.NotifyStartedFunc = func() { close(started) }
			f.servers = append(f.servers, s)
			go func() { _ = s.ActivateAndServe() }()
			<-started
		}
	}
	return nil
}

// Stop closes every socket after the queries being answered are answered.
func (f *Forwarder) Stop() {
	var wg sync.WaitGroup
	for _, s := range f.servers {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), f.Timeout+time.Second)
			defer cancel()
			_ = s.ShutdownContext(ctx)
		})
	}
	wg.Wait()
	f.servers = nil
}

// Own reports whether a socket inode is one of the forwarder's own.
func (f *Forwarder) Own(ino uint64) bool { return f.inodes[ino] }

// Queries is how many queries the forwarder has answered.
func (f *Forwarder) Queries() int64 { return f.queries.Load() }

func bindErr(a netip.Addr, err error) error {
	if errors.Is(err, syscall.EADDRNOTAVAIL) {
		return fmt.Errorf("bind %s: %w", a, ErrNotLocal)
	}
	return fmt.Errorf("bind %s port 53: %w", a, err)
}

// reusePort sets SO_REUSEPORT, which CoreDNS (node-cache) sets on its own listeners: the standby and
// the cache can then hold the address at the same time, during a handover.
func reusePort(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	})
	if err != nil {
		return err
	}
	return serr
}

func inode(c syscall.Conn) uint64 {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0
	}
	var st unix.Stat_t
	_ = rc.Control(func(fd uintptr) { _ = unix.Fstat(int(fd), &st) })
	return st.Ino
}

// serve forwards one query. The answer keeps the query's ID; the query goes on as the client sent
// it (its EDNS0 OPT record and buffer size included), over the client's transport, so a truncated
// UDP answer reaches the client truncated and it retries over TCP.
//
// The query is counted (Queries, OnQuery) before its answer is written: whoever holds the answer
// reads a count that already includes it, so a client that asks and then reads the count (the
// state file, the metrics) never sees fewer queries than it was answered.
func (f *Forwarder) serve(w dns.ResponseWriter, req *dns.Msg) {
	resp := f.answer(w, req)
	wire, err := resp.Pack()
	if err != nil {
		// A target's answer this side cannot pack goes out as SERVFAIL, and is counted so.
		resp = failure(req, dns.RcodeServerFailure)
		if wire, err = resp.Pack(); err != nil {
			return
		}
	}
	f.queries.Add(1)
	if f.OnQuery != nil {
		f.OnQuery(resp.Rcode)
	}
	_, _ = w.Write(wire)
}

// answer is the reply to req: the first target's that is neither SERVFAIL nor REFUSED (else the
// last target's), or a reply of its own when no target answers or the query is refused here.
func (f *Forwarder) answer(w dns.ResponseWriter, req *dns.Msg) *dns.Msg {
	if len(req.Question) != 1 || req.Opcode != dns.OpcodeQuery {
		return failure(req, dns.RcodeNotImplemented)
	}
	select {
	case f.sem <- struct{}{}:
		defer func() { <-f.sem }()
	default:
		return failure(req, dns.RcodeServerFailure)
	}
	targets := f.Targets.Upstream
	if f.isClusterName(req.Question[0].Name) {
		targets = f.Targets.Cluster
	}
	c := f.udp
	if _, ok := w.RemoteAddr().(*net.TCPAddr); ok {
		c = f.tcp
	}
	for _, t := range targets {
		resp, _, err := c.Exchange(req, netip.AddrPortFrom(t, uint16(f.UpstreamPort)).String())
		if err != nil || resp == nil {
			continue
		}
		resp.Id = req.Id
		if resp.Rcode == dns.RcodeServerFailure || resp.Rcode == dns.RcodeRefused {
			// Another target may do better; the last one's answer stands.
			if t != targets[len(targets)-1] {
				continue
			}
		}
		return resp
	}
	return failure(req, dns.RcodeServerFailure)
}

func (f *Forwarder) isClusterName(name string) bool {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	for _, z := range f.Targets.Zones {
		if name == z || strings.HasSuffix(name, "."+z) {
			return true
		}
	}
	return false
}

// failure is a reply to req with rcode and, when the query had an EDNS0 OPT record, one of the
// same buffer size.
func failure(req *dns.Msg, rcode int) *dns.Msg {
	m := new(dns.Msg)
	m.SetRcode(req, rcode)
	if opt := req.IsEdns0(); opt != nil {
		m.SetEdns0(opt.UDPSize(), opt.Do())
	}
	return m
}
