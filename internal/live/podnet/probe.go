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
	"github.com/nodedns/nodedns/probes/podprobe"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Probe asks every target over UDP and TCP from each pod's namespace and from the host's, all at
// once, within one timeout. It probes every pod it is given: the caller picks at most
// probes.maxPods of them (Find sorts them by name, so the pick is stable). Nothing is created inside
// a pod's namespace but the query sockets, which close when the round ends.
func Probe(ctx context.Context, pods []podprobe.Pod, q podprobe.Query) podprobe.Report {
	start := time.Now()
	if q.Type == 0 {
		q.Type = dns.TypeA
	}
	if q.Port == 0 {
		q.Port = 53
	}
	if q.Timeout <= 0 {
		q.Timeout = podprobe.DefaultTimeout
	}
	ctx, cancel := context.WithDeadline(ctx, start.Add(q.Timeout))
	defer cancel()
	rep := podprobe.Report{Pods: make([]podprobe.PodResult, len(pods))}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var ns netns.NsHandle = netns.None()
		if q.Host != "" {
			h, err := openNS(filepath.Join(q.Host, "ns/net"), podprobe.NSID{})
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

// probeFrom makes the round's sockets inside ns (netns.None(): this thread's own namespace) and runs
// the queries over them from this process's threads.
func probeFrom(ctx context.Context, ns netns.NsHandle, q podprobe.Query) ([]podprobe.Result, error) {
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
	out := make([]podprobe.Result, len(specs))
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
func exchange(ctx context.Context, fd int, network string, server netip.AddrPort, name string, qtype uint16) podprobe.Result {
	res := podprobe.Result{Addr: server.Addr(), Net: network}
	start := time.Now()
	fail := func(err error) podprobe.Result {
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
		res.Outcome, res.Rcode = podprobe.Answered, r.Rcode
		return res
	}
}

// classify turns an I/O error into an outcome. A deadline is a timeout; a cancelled context (the
// caller gave up) is an error, not a verdict on the path.
func classify(ctx context.Context, err error) (podprobe.Outcome, error) {
	var ne net.Error
	switch {
	case errors.Is(err, unix.ECONNREFUSED):
		return podprobe.Refused, err
	case errors.Is(ctx.Err(), context.Canceled):
		return podprobe.Error, fmt.Errorf("%w: %w", context.Canceled, err)
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return podprobe.Timeout, err
	}
	return podprobe.Error, err
}
