package podnet

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"
	"github.com/nodedns/nodedns/probes/podprobe"
)

// serveDNS answers every query on addr (udp and tcp) with an A record, until the test ends.
func serveDNS(t *testing.T, addr string) {
	t.Helper()
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: net.IPv4(10, 233, 0, 1)})
		_ = w.WriteMsg(m)
	})
	for _, network := range []string{"udp", "tcp"} {
		started := make(chan struct{})
		srv := &dns.Server{Addr: addr, Net: network, Handler: h, NotifyStartedFunc: func() { close(started) }}
		errc := make(chan error, 1)
		go func() { errc <- srv.ListenAndServe() }()
		select {
		case <-started:
		case err := <-errc:
			t.Fatalf("serve %s on %s: %v", network, addr, err)
		}
		t.Cleanup(func() { _ = srv.Shutdown() })
	}
}

// silent binds addr over udp and tcp and never answers: a TCP connection is accepted by the
// kernel's backlog, a datagram is queued, and nothing comes back.
func silent(t *testing.T, addr string) {
	t.Helper()
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close(); l.Close() })
}

// freePort finds a port free on 127.0.0.1 over both protocols (the other loopback addresses share
// the port number).
func freePort(t *testing.T) uint16 {
	t.Helper()
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		pc, err := net.ListenPacket("udp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		pc.Close()
		return uint16(port)
	}
	t.Fatal("no free port")
	return 0
}

type outcome struct {
	Addr, Net string
	Outcome   podprobe.Outcome
	Rcode     int
}

func outcomes(rs []podprobe.Result) []outcome {
	var out []outcome
	for _, r := range rs {
		out = append(out, outcome{r.Addr.String(), r.Net, r.Outcome, r.Rcode})
	}
	return out
}

// TestProbeHost runs one round from this process's own namespace (no privilege needed): an answering
// server over IPv4 and IPv6, a silent one and an address where nothing listens give answered,
// timeout and refused over both protocols, in the targets' order, udp before tcp.
func TestProbeHost(t *testing.T) {
	port := freePort(t)
	p := strconv.Itoa(int(port))
	serveDNS(t, "127.0.0.1:"+p)
	serveDNS(t, "[::1]:"+p)
	silent(t, "127.0.0.2:"+p)
	q := podprobe.Query{
		Name:    "kubernetes.default.svc.cluster.local",
		Targets: []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1"), netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3")},
		Port:    port,
		Timeout: 300 * time.Millisecond,
	}
	rep := Probe(context.Background(), nil, q)
	if rep.HostErr != nil {
		t.Fatal(rep.HostErr)
	}
	want := []outcome{
		{"127.0.0.1", "udp", podprobe.Answered, dns.RcodeSuccess}, {"127.0.0.1", "tcp", podprobe.Answered, dns.RcodeSuccess},
		{"::1", "udp", podprobe.Answered, dns.RcodeSuccess}, {"::1", "tcp", podprobe.Answered, dns.RcodeSuccess},
		{"127.0.0.2", "udp", podprobe.Timeout, 0}, {"127.0.0.2", "tcp", podprobe.Timeout, 0},
		{"127.0.0.3", "udp", podprobe.Refused, 0}, {"127.0.0.3", "tcp", podprobe.Refused, 0},
	}
	if d := cmp.Diff(want, outcomes(rep.Host)); d != "" {
		t.Errorf("host outcomes (-want +got):\n%s", d)
	}
	for _, r := range rep.Host {
		if (r.Outcome == podprobe.Answered) != (r.Err == nil) {
			t.Errorf("%s: error %v", r, r.Err)
		}
	}
	if len(rep.Pods) != 0 || len(rep.Failures()) != 0 {
		t.Errorf("pods %v failures %v", rep.Pods, rep.Failures())
	}
}

// TestProbeCancelled: a caller that gives up gets errors, not timeouts (a timeout is a verdict on
// the path, a cancellation is not).
func TestProbeCancelled(t *testing.T) {
	port := freePort(t)
	silent(t, "127.0.0.2:"+strconv.Itoa(int(port)))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	rep := Probe(ctx, nil, podprobe.Query{Name: "x.", Targets: []netip.Addr{netip.MustParseAddr("127.0.0.2")}, Port: port, Timeout: time.Minute})
	if len(rep.Host) != 2 {
		t.Fatalf("host results %v", rep.Host)
	}
	for _, r := range rep.Host {
		if r.Outcome != podprobe.Error || !errors.Is(r.Err, context.Canceled) {
			t.Errorf("%s: %v, want an error wrapping context.Canceled", r, r.Err)
		}
	}
}

// TestProbeGonePod: a pod whose namespace file is gone, or now names another namespace, is not
// probed (PodResult.Err) and is no failure.
func TestProbeGonePod(t *testing.T) {
	self, err := statNS("/proc/self/ns/net")
	if err != nil {
		t.Skip(err)
	}
	pods := []podprobe.Pod{
		{Name: "gone", NetNS: "/nonexistent/ns/net", ID: podprobe.NSID{Dev: 1, Ino: 2}},
		{Name: "reused", NetNS: "/proc/self/ns/net", ID: podprobe.NSID{Dev: self.Dev, Ino: self.Ino + 1}},
	}
	rep := Probe(context.Background(), pods, podprobe.Query{Name: "x.", Targets: []netip.Addr{netip.MustParseAddr("127.0.0.1")}, Port: 9, Timeout: 100 * time.Millisecond})
	for _, p := range rep.Pods {
		if p.Err == nil || len(p.Results) != 0 {
			t.Errorf("%s: err %v results %v", p.Pod.Name, p.Err, p.Results)
		}
	}
	if !errors.Is(rep.Pods[1].Err, errStaleNS) {
		t.Errorf("reused: %v, want errStaleNS", rep.Pods[1].Err)
	}
	if f := rep.Failures(); len(f) != 0 {
		t.Errorf("failures %v", f)
	}
}
