package probes

import (
	"context"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/hostnet/netstate"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/policy"
	"github.com/nodedns/nodedns/resolvconf"
)

var cache = netip.MustParseAddr("169.254.25.10")

func localRuleAt(prio int) netstate.Rule {
	return netstate.Rule{Family: 4, Priority: prio, Table: netstate.TableLocal}
}

// fakeNet is a NetReader for the unprivileged tests: netlink needs a network namespace of our own
// (the privileged tests in live_test.go read the real one).
type fakeNet struct {
	link   *netstate.Link
	routes []netstate.Route
	rules  []netstate.Rule
}

func (f fakeNet) Link(string) (*netstate.Link, error) { return f.link, nil }
func (f fakeNet) LocalRoutes(fam int) ([]netstate.Route, error) {
	if fam == 6 {
		return nil, nil
	}
	return f.routes, nil
}
func (f fakeNet) Rules(fam int) ([]netstate.Rule, error) {
	if fam == 6 {
		return nil, nil
	}
	return f.rules, nil
}

// noProcesses gives h the /proc seams of a node where no DNS server runs; the tests that need the
// cache's process give it themselves (cacheProcessOf).
func noProcesses(h *Host) *Host {
	h.FindCache = func([]netip.Addr) *CacheProcess { return nil }
	h.FindDNSServers = func() []*CacheProcess { return nil }
	h.ProcStat = func(int) ([]byte, error) { return nil, fs.ErrNotExist }
	return h
}

type memState struct{ data []byte }

func (m *memState) Load() ([]byte, error) {
	if m.data == nil {
		return nil, fmt.Errorf("load: %w", fs.ErrNotExist)
	}
	return m.data, nil
}
func (m *memState) Save(d []byte) error { m.data = d; return nil }

// redirect sends every query to one real miekg/dns server on loopback, whatever the address asked:
// the checks ask 169.254.25.10:53, which an unprivileged test cannot own.
type redirect struct{ to string }

func (r redirect) Exchange(ctx context.Context, m *dns.Msg, network string, _ netip.AddrPort) (*dns.Msg, error) {
	c := &dns.Client{Net: network, Timeout: 500 * time.Millisecond}
	resp, _, err := c.ExchangeContext(ctx, m, r.to)
	return resp, err
}

// dnsServer runs a real DNS server (UDP and TCP) on loopback answering with h.
func dnsServer(t *testing.T, h dns.HandlerFunc) string {
	t.Helper()
	// The kernel picks a free UDP port; the same TCP port may be another process's (the tests of
	// other packages run beside these), so take another pair until both are free.
	var pc net.PacketConn
	var l net.Listener
	for try := 0; ; try++ {
		var err error
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		if l, err = net.Listen("tcp", pc.LocalAddr().String()); err == nil {
			break
		}
		pc.Close()
		if try == 20 {
			t.Fatal(err)
		}
	}
	udp := &dns.Server{PacketConn: pc, Handler: h}
	tcp := &dns.Server{Listener: l, Handler: h}
	go func() { _ = udp.ActivateAndServe() }()
	go func() { _ = tcp.ActivateAndServe() }()
	t.Cleanup(func() { _ = udp.Shutdown(); _ = tcp.Shutdown() })
	return pc.LocalAddr().String()
}

func testEnv(t *testing.T, h dns.HandlerFunc, search string) (*Env, *memState) {
	t.Helper()
	cfg := config.Default()
	s := &node.Snapshot{Now: time.Now()}
	s.ResolvConf = readResolvForTest(t, "nameserver 10.0.0.2\nsearch "+search+"\n")
	p := policy.Compute(s, cfg)
	st := &memState{}
	host := noProcesses(&Host{
		Net: fakeNet{
			link:   &netstate.Link{Name: "nodelocaldns", Index: 7, Type: "bridge", OperState: "unknown", Addrs: []netip.Prefix{netip.MustParsePrefix("169.254.25.10/32")}},
			routes: []netstate.Route{{Dst: netip.MustParsePrefix("169.254.25.10/32"), LinkIndex: 7}},
			rules:  []netstate.Rule{localRuleAt(0)},
		},
		Firewall: func(context.Context) []Backend { return nil },
		DNS:      redirect{dnsServer(t, h)},
		DNSPort:  53,
		BootID:   func() (string, error) { return "boot-1", nil },
		Uptime:   func() (time.Duration, error) { return time.Hour, nil },
		State:    st,
		Random:   func() string { return "r4nd0m" },
	})
	return &Env{Snapshot: s, Config: cfg, Plan: p, Live: true, Host: host}, st
}

func readResolvForTest(t *testing.T, data string) node.ResolvFile {
	t.Helper()
	f, err := resolvconf.Parse([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	return node.ResolvFile{Path: "/etc/resolv.conf", Target: "/etc/resolv.conf", Exists: true, Data: []byte(data), File: f}
}
