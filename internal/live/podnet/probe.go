package podnet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/miekg/dns"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Outcome is what one query got.
type Outcome int

const (
	// Answered: a DNS response came back (whatever its rcode: the packet reached a server).
	Answered Outcome = iota
	// Timeout: nothing came back within the round's timeout (a drop: incident 000's BPF program, incident
	// 004's blackhole route: a silent drop on the input path, seen as a timeout on kernel 6.18).
	Timeout
	// Refused: the connection was refused (ICMP port unreachable on UDP, a RST on TCP): the address
	// is reached but nothing listens on the port.
	Refused
	// Error: the query could not be sent or failed otherwise (no route from the pod, the namespace
	// gone, a malformed reply).
	Error
)

func (o Outcome) String() string {
	switch o {
	case Answered:
		return "answered"
	case Timeout:
		return "timeout"
	case Refused:
		return "refused"
	case Error:
		return "error"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Result is one query: one target address over one protocol, from one namespace.
type Result struct {
	Addr    netip.Addr
	Net     string // "udp" or "tcp"
	Outcome Outcome
	// Rcode is the response's rcode when Outcome is Answered.
	Rcode int
	// Err says why when Outcome is not Answered.
	Err error
	// RTT is the time from sending the query to its outcome.
	RTT time.Duration
}

func (r Result) String() string {
	s := fmt.Sprintf("%s over %s: %s", r.Addr, r.Net, r.Outcome)
	switch {
	case r.Outcome == Answered:
		s += " " + dns.RcodeToString[r.Rcode]
	case r.Outcome == Error && r.Err != nil:
		s += " (" + r.Err.Error() + ")"
	}
	return s
}

// PodResult is what one pod namespace got.
type PodResult struct {
	Pod Pod
	// Err is set when no query could be sent from the namespace at all (it is gone, or cannot be
	// entered); Results is then empty. Such a pod is not a DNS failure.
	Err error
	// Results has one entry per target and protocol, in Query.Targets order, udp before tcp.
	Results []Result
}

// Report is one probe round.
type Report struct {
	// Host is what the host's own namespace got, for comparison (same order as PodResult.Results);
	// HostErr is set when the host's queries could not be sent at all.
	Host    []Result
	HostErr error
	Pods    []PodResult
	// Elapsed is the round's wall time.
	Elapsed time.Duration
}

// DefaultTimeout is a round's timeout when Query.Timeout is zero (docs/contract.md's probes.timeout).
const DefaultTimeout = 2 * time.Second

// Query is one probe round's question.
type Query struct {
	// Name is asked (type Type, default A) of every target, e.g. kubernetes.default.svc.cluster.local.
	Name string
	Type uint16
	// Targets are the addresses to ask (cache addresses, or the cluster DNS addresses in lrp mode),
	// IPv4 and IPv6 alike; Port defaults to 53.
	Targets []netip.Addr
	Port    uint16
	// Timeout bounds the whole round, not each query: every pod's queries run at once, so a
	// round with 40 pods that all time out takes one Timeout, not 40. Default 2s (probes.timeout).
	Timeout time.Duration
	// Host is as Options.Host: "" asks from this process's own network namespace.
	Host string
}

// Probe asks every target over UDP and TCP from each pod's namespace and from the host's, all at
// once, within one timeout. It probes every pod it is given: the caller picks at most
// probes.maxPods of them (Find sorts them by name, so the pick is stable). Nothing is created inside
// a pod's namespace but the query sockets, which close when the round ends.
func Probe(ctx context.Context, pods []Pod, q Query) Report {
	start := time.Now()
	if q.Type == 0 {
		q.Type = dns.TypeA
	}
	if q.Port == 0 {
		q.Port = 53
	}
	if q.Timeout <= 0 {
		q.Timeout = DefaultTimeout
	}
	ctx, cancel := context.WithDeadline(ctx, start.Add(q.Timeout))
	defer cancel()
	rep := Report{Pods: make([]PodResult, len(pods))}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var ns netns.NsHandle = netns.None()
		if q.Host != "" {
			h, err := openNS(filepath.Join(q.Host, "ns/net"), NSID{})
			if err != nil {
				rep.HostErr = err
				return
			}
			defer h.Close()
			ns = h
		}
		rep.Host, rep.HostErr = probeFrom(ctx, ns, q)
	}()
	for i, p := range pods {
		rep.Pods[i].Pod = p
		wg.Add(1)
		go func() {
			defer wg.Done()
			ns, err := openNS(p.NetNS, p.ID)
			if err != nil {
				rep.Pods[i].Err = err
				return
			}
			defer ns.Close()
			rep.Pods[i].Results, rep.Pods[i].Err = probeFrom(ctx, ns, q)
		}()
	}
	wg.Wait()
	rep.Elapsed = time.Since(start)
	return rep
}

// Failures returns the pods that were not answered where the host was: for each, the results of the
// queries the host got an answer to and the pod did not. Pods that could not be probed at all
// (PodResult.Err) are not failures; neither is a query the host was not answered on either
// (nodelocaldns.dns reports that one).
func (r Report) Failures() []PodResult {
	hostOK := map[[2]string]bool{}
	for _, h := range r.Host {
		if h.Outcome == Answered {
			hostOK[[2]string{h.Addr.String(), h.Net}] = true
		}
	}
	var out []PodResult
	for _, p := range r.Pods {
		var bad []Result
		for _, res := range p.Results {
			if res.Outcome != Answered && hostOK[[2]string{res.Addr.String(), res.Net}] {
				bad = append(bad, res)
			}
		}
		if len(bad) > 0 {
			out = append(out, PodResult{Pod: p.Pod, Results: bad})
		}
	}
	return out
}

// probeFrom makes the round's sockets inside ns (netns.None(): this thread's own namespace) and runs
// the queries over them from this process's threads.
func probeFrom(ctx context.Context, ns netns.NsHandle, q Query) ([]Result, error) {
	type spec struct {
		addr    netip.Addr
		network string
	}
	var specs []spec
	for _, a := range q.Targets {
		for _, n := range []string{"udp", "tcp"} {
			specs = append(specs, spec{a.Unmap(), n})
		}
	}
	fds := make([]int, len(specs))
	for i := range fds {
		fds[i] = -1
	}
	mk := func() error {
		for i, s := range specs {
			fd, err := unix.Socket(family(s.addr), sockType(s.network)|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("create a %s socket: %w", s.network, err)
			}
			fds[i] = fd
		}
		return nil
	}
	var err error
	if ns.IsOpen() {
		err = inNS(ns, unix.CLONE_NEWNET, mk)
	} else {
		err = mk()
	}
	if err != nil {
		for _, fd := range fds {
			if fd >= 0 {
				unix.Close(fd)
			}
		}
		return nil, err
	}
	out := make([]Result, len(specs))
	var wg sync.WaitGroup
	for i, s := range specs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = exchange(ctx, fds[i], s.network, netip.AddrPortFrom(s.addr, q.Port), q.Name, q.Type)
		}()
	}
	wg.Wait()
	return out, nil
}

func family(a netip.Addr) int {
	if a.Is4() {
		return unix.AF_INET
	}
	return unix.AF_INET6
}

func sockType(network string) int {
	if network == "tcp" {
		return unix.SOCK_STREAM
	}
	return unix.SOCK_DGRAM
}

func sockaddr(ap netip.AddrPort) unix.Sockaddr {
	if ap.Addr().Is4() {
		return &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	}
	return &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
}

// exchange sends one query over fd (a non-blocking socket, already in its namespace, owned and
// closed here) and waits for the answer until ctx's deadline.
func exchange(ctx context.Context, fd int, network string, server netip.AddrPort, name string, qtype uint16) Result {
	res := Result{Addr: server.Addr(), Net: network}
	start := time.Now()
	fail := func(err error) Result {
		res.RTT = time.Since(start)
		res.Outcome, res.Err = classify(ctx, err)
		return res
	}
	// connect works from any thread: routing follows the socket's namespace. A TCP connect returns
	// EINPROGRESS; the poller then waits for it with the first write.
	if err := unix.Connect(fd, sockaddr(server)); err != nil && !errors.Is(err, unix.EINPROGRESS) {
		unix.Close(fd)
		return fail(fmt.Errorf("connect to %s: %w", server, err))
	}
	f := os.NewFile(uintptr(fd), network+" "+server.String())
	c, err := net.FileConn(f) // a dup registered with the runtime's poller
	f.Close()
	if err != nil {
		return fail(fmt.Errorf("use the %s socket: %w", network, err))
	}
	defer c.Close()
	deadline, _ := ctx.Deadline()
	_ = c.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	m.RecursionDesired = true
	co := &dns.Conn{Conn: c, UDPSize: dns.DefaultMsgSize}
	if err := co.WriteMsg(m); err != nil {
		return fail(fmt.Errorf("send to %s: %w", server, err))
	}
	for {
		r, err := co.ReadMsg()
		if err != nil {
			return fail(fmt.Errorf("read from %s: %w", server, err))
		}
		// A stray datagram (an answer to an earlier query from the same port) is skipped; on TCP the
		// stream carries only this query's answer.
		if network == "udp" && (r.Id != m.Id || len(r.Question) != 1 || r.Question[0] != m.Question[0]) {
			continue
		}
		res.RTT = time.Since(start)
		res.Outcome, res.Rcode = Answered, r.Rcode
		return res
	}
}

// classify turns an I/O error into an outcome. A deadline is a timeout; a cancelled context (the
// caller gave up) is an error, not a verdict on the path.
func classify(ctx context.Context, err error) (Outcome, error) {
	var ne net.Error
	switch {
	case errors.Is(err, unix.ECONNREFUSED):
		return Refused, err
	case errors.Is(ctx.Err(), context.Canceled):
		return Error, fmt.Errorf("%w: %w", context.Canceled, err)
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return Timeout, err
	}
	return Error, err
}
