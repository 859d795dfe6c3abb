package standby

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// upstream is a real DNS server on a loopback address, answering as a cluster DNS or a LAN
// resolver would: name -> A answer, a big answer truncated over UDP, the EDNS0 buffer it saw, and
// slow.example. held unanswered until release.
type upstream struct {
	addr    netip.Addr
	answer  string       // the A record it hands out
	queries atomic.Int64 // counted as each query arrives, before it is answered
	hold    chan struct{}
	release func()
}

func startUpstream(t *testing.T, addr netip.Addr, port int, answer string) *upstream {
	t.Helper()
	u := &upstream{addr: addr, answer: answer, hold: make(chan struct{})}
	u.release = sync.OnceFunc(func() { close(u.hold) })
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		u.queries.Add(1)
		m := new(dns.Msg)
		m.SetReply(r)
		q := r.Question[0]
		_, tcp := w.RemoteAddr().(*net.TCPAddr)
		switch q.Name {
		case "slow.example.":
			<-u.hold
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30}, A: net.ParseIP(answer)})
		case "big.example.":
			if !tcp {
				m.Truncated = true
				break
			}
			for i := range 40 {
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30}, A: net.IPv4(192, 0, 2, byte(i+1))})
			}
		case "edns.example.":
			size := "none"
			if o := r.IsEdns0(); o != nil {
				size = fmt.Sprint(o.UDPSize())
			}
			m.Answer = append(m.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 30}, Txt: []string{size}})
		default:
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30}, A: net.ParseIP(answer)})
		}
		if o := r.IsEdns0(); o != nil {
			m.SetEdns0(o.UDPSize(), false)
		}
		_ = w.WriteMsg(m)
	})
	for _, n := range []string{"udp", "tcp"} {
		s := &dns.Server{Addr: netip.AddrPortFrom(addr, uint16(port)).String(), Net: n, Handler: h}
		started := make(chan struct{})
		s.NotifyStartedFunc = func() { close(started) }
		go func() { _ = s.ListenAndServe() }()
		<-started
		t.Cleanup(func() { _ = s.Shutdown() })
	}
	t.Cleanup(u.release) // before the servers shut down
	return u
}

// freePort finds a port free for UDP and TCP on every address.
func freePort(t *testing.T, as ...netip.Addr) int {
	t.Helper()
	for range 50 {
		pc, err := net.ListenPacket("udp", netip.AddrPortFrom(as[0], 0).String())
		if err != nil {
			t.Fatal(err)
		}
		port := pc.LocalAddr().(*net.UDPAddr).Port
		pc.Close()
		ok := true
		for _, a := range as {
			for _, n := range []string{"udp", "tcp"} {
				hp := netip.AddrPortFrom(a, uint16(port)).String()
				if n == "udp" {
					c, err := net.ListenPacket(n, hp)
					if err != nil {
						ok = false
						continue
					}
					c.Close()
				} else {
					l, err := net.Listen(n, hp)
					if err != nil {
						ok = false
						continue
					}
					l.Close()
				}
			}
		}
		if ok {
			return port
		}
	}
	t.Fatal("no free port")
	return 0
}

var (
	listenAddr  = netip.MustParseAddr("127.0.0.1")
	clusterAddr = netip.MustParseAddr("127.0.0.2")
	lanAddr     = netip.MustParseAddr("127.0.0.3")
)

type rig struct {
	f            *Forwarder
	cluster, lan *upstream
	server       string
	mu           sync.Mutex
	rcodes       map[int]int
}

// newRig starts a forwarder (500 ms timeout, 64 queries in flight, unless an option changes it) to a
// cluster DNS and a LAN resolver.
func newRig(t *testing.T, tg Targets, opts ...func(*Forwarder)) *rig {
	t.Helper()
	up := freePort(t, clusterAddr, lanAddr)
	r := &rig{rcodes: map[int]int{}}
	r.cluster = startUpstream(t, clusterAddr, up, "10.233.0.1")
	r.lan = startUpstream(t, lanAddr, up, "192.0.2.80")
	port := freePort(t, listenAddr)
	r.f = &Forwarder{Targets: tg, Port: port, UpstreamPort: up, Timeout: 500 * time.Millisecond, MaxInFlight: 64,
		OnQuery: func(rc int) { r.mu.Lock(); r.rcodes[rc]++; r.mu.Unlock() }}
	for _, o := range opts {
		o(r.f)
	}
	if err := r.f.Start([]netip.Addr{listenAddr}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.f.Stop)
	r.server = netip.AddrPortFrom(listenAddr, uint16(port)).String()
	return r
}

func ask(t *testing.T, server, net, name string, qtype uint16, edns uint16) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	if edns > 0 {
		m.SetEdns0(edns, false)
	}
	c := &dns.Client{Net: net, Timeout: 3 * time.Second}
	r, _, err := c.Exchange(m, server)
	if err != nil {
		t.Fatalf("%s %s over %s: %v", name, dns.TypeToString[qtype], net, err)
	}
	if r.Id != m.Id {
		t.Fatalf("answer ID %d, query ID %d", r.Id, m.Id)
	}
	return r
}

func targets() Targets {
	return Targets{Zones: []string{"cluster.local", "in-addr.arpa", "ip6.arpa"}, Cluster: []netip.Addr{clusterAddr}, Upstream: []netip.Addr{lanAddr}}
}

func TestForwarderSplitsAsTheCorefile(t *testing.T) {
	r := newRig(t, targets())
	for _, c := range []struct{ name, net, want string }{
		{"kubernetes.default.svc.cluster.local.", "udp", "10.233.0.1"},
		{"kubernetes.default.svc.CLUSTER.local.", "tcp", "10.233.0.1"},
		{"example.com.", "udp", "192.0.2.80"},
		{"example.com.", "tcp", "192.0.2.80"},
		{"cluster.local.example.com.", "udp", "192.0.2.80"},
	} {
		a := ask(t, r.server, c.net, c.name, dns.TypeA, 0)
		if len(a.Answer) != 1 || a.Answer[0].(*dns.A).A.String() != c.want {
			t.Errorf("%s over %s: %v, want %s", c.name, c.net, a.Answer, c.want)
		}
	}
	a := ask(t, r.server, "udp", "1.0.233.10.in-addr.arpa.", dns.TypePTR, 0)
	if r.cluster.queries.Load() != 3 || a.Rcode != dns.RcodeSuccess {
		t.Errorf("reverse zone not sent to the cluster DNS: cluster saw %d queries, rcode %d", r.cluster.queries.Load(), a.Rcode)
	}
}

func TestForwarderKeepsEDNS0AndTruncation(t *testing.T) {
	r := newRig(t, targets())
	a := ask(t, r.server, "udp", "edns.example.", dns.TypeTXT, 1232)
	if len(a.Answer) != 1 || a.Answer[0].(*dns.TXT).Txt[0] != "1232" || a.IsEdns0() == nil {
		t.Errorf("EDNS0 buffer not passed on: %v (OPT %v)", a.Answer, a.IsEdns0())
	}
	a = ask(t, r.server, "udp", "edns.example.", dns.TypeTXT, 0)
	if a.Answer[0].(*dns.TXT).Txt[0] != "none" {
		t.Errorf("an OPT record was added to a query without one: %v", a.Answer)
	}
	a = ask(t, r.server, "udp", "big.example.", dns.TypeA, 0)
	if !a.Truncated {
		t.Errorf("a truncated upstream answer lost its TC bit over UDP: %v", a)
	}
	a = ask(t, r.server, "tcp", "big.example.", dns.TypeA, 0)
	if a.Truncated || len(a.Answer) != 40 {
		t.Errorf("the TCP retry got %d answers (TC %v), want 40", len(a.Answer), a.Truncated)
	}
}

func TestForwarderServfailWhenTheUpstreamFails(t *testing.T) {
	tg := targets()
	tg.Upstream = []netip.Addr{netip.MustParseAddr("127.0.0.4")} // nothing listens there
	r := newRig(t, tg)
	start := time.Now()
	a := ask(t, r.server, "udp", "example.com.", dns.TypeA, 0)
	if a.Rcode != dns.RcodeServerFailure {
		t.Errorf("dead upstream: rcode %s, want SERVFAIL", dns.RcodeToString[a.Rcode])
	}
	a = ask(t, r.server, "udp", "slow.example.", dns.TypeA, 0)
	if a.Rcode != dns.RcodeServerFailure {
		t.Errorf("dead upstream: rcode %s, want SERVFAIL", dns.RcodeToString[a.Rcode])
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("SERVFAIL took %v, beyond the forwarder's timeout", d)
	}
	// Each query is counted before its answer is written: the count is settled once ask returns.
	r.mu.Lock()
	n := r.rcodes[dns.RcodeServerFailure]
	r.mu.Unlock()
	if n != 2 || r.f.Queries() != 2 {
		t.Errorf("SERVFAILs counted: %d (queries %d), want 2", n, r.f.Queries())
	}
}

func TestForwarderBoundsInFlight(t *testing.T) {
	tg := targets()
	tg.Upstream = []netip.Addr{lanAddr}
	// Two slots, held by two queries the LAN resolver keeps until released (the forwarder's timeout
	// is far beyond the test's length, so the slots stay taken however slow the machine): the third
	// concurrent query is refused without being forwarded.
	r := newRig(t, tg, func(f *Forwarder) { f.MaxInFlight = 2; f.Timeout = time.Minute })
	t.Cleanup(r.lan.release) // before the forwarder's Stop waits for the held queries
	held := make(chan *dns.Msg, 2)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			m := new(dns.Msg)
			m.SetQuestion("slow.example.", dns.TypeA)
			a, _, err := (&dns.Client{Timeout: time.Minute}).Exchange(m, r.server)
			if err != nil {
				t.Errorf("held query: %v", err)
			}
			held <- a
		})
	}
	// A query reaches the resolver only after taking its slot.
	for deadline := time.Now().Add(30 * time.Second); r.lan.queries.Load() < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the two held queries did not reach the LAN resolver (it saw %d)", r.lan.queries.Load())
		}
	}
	a := ask(t, r.server, "udp", "example.com.", dns.TypeA, 0)
	if a.Rcode != dns.RcodeServerFailure {
		t.Errorf("over the in-flight bound: rcode %s, want SERVFAIL", dns.RcodeToString[a.Rcode])
	}
	if n := r.lan.queries.Load(); n != 2 {
		t.Errorf("over the in-flight bound: the LAN resolver saw %d queries, want only the 2 held: the third was forwarded", n)
	}
	r.lan.release()
	wg.Wait()
	close(held)
	for a := range held {
		if a == nil || a.Rcode != dns.RcodeSuccess || len(a.Answer) != 1 {
			t.Errorf("a held query, once released: %v, want its answer", a)
		}
	}
}

// TestForwarderNeverQueriesItself: with the cache address (here, the forwarder's own) as the only
// cluster DNS and upstream, Choose leaves nothing, and a query is answered SERVFAIL with no query
// sent anywhere: the forwarder saw exactly the one query the client sent.
func TestForwarderNeverQueriesItself(t *testing.T) {
	port := freePort(t, listenAddr)
	tg := Choose(Inputs{CacheAddrs: []netip.Addr{listenAddr}, ClusterDNS: []netip.Addr{listenAddr}, Upstreams: []netip.Addr{listenAddr, netip.MustParseAddr("127.0.0.53")}})
	if tg.Usable() {
		t.Fatalf("loop targets chosen: %+v", tg)
	}
	f := &Forwarder{Targets: tg, Port: port, UpstreamPort: port, Timeout: 500 * time.Millisecond}
	if err := f.Start([]netip.Addr{listenAddr}); err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	server := netip.AddrPortFrom(listenAddr, uint16(port)).String()
	for _, name := range []string{"kubernetes.default.svc.cluster.local.", "example.com."} {
		if a := ask(t, server, "udp", name, dns.TypeA, 0); a.Rcode != dns.RcodeServerFailure {
			t.Errorf("%s: rcode %s, want SERVFAIL", name, dns.RcodeToString[a.Rcode])
		}
	}
	if n := f.Queries(); n != 2 {
		t.Errorf("the forwarder saw %d queries for 2 sent: it forwarded to itself", n)
	}
}

// TestBindsBesideAReusePortListener: the forwarder binds an address a SO_REUSEPORT socket (as
// CoreDNS opens) already holds, and a plain bind beside it fails as expected.
func TestBindsBesideAReusePortListener(t *testing.T) {
	port := freePort(t, listenAddr)
	lc := net.ListenConfig{Control: reusePort}
	hp := netip.AddrPortFrom(listenAddr, uint16(port)).String()
	pc, err := lc.ListenPacket(t.Context(), "udp", hp)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	l, err := lc.Listen(t.Context(), "tcp", hp)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	f := &Forwarder{Targets: targets(), Port: port}
	if err := f.Start([]netip.Addr{listenAddr}); err != nil {
		t.Fatalf("bind beside a SO_REUSEPORT listener: %v", err)
	}
	f.Stop()
	if c, err := net.ListenPacket("udp", hp); err == nil {
		c.Close()
		t.Errorf("a plain bind beside SO_REUSEPORT sockets succeeded: the test proves nothing")
	}
}
