package probes

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/miekg/dns"
)

// Exchanger sends one DNS query and returns the answer.
type Exchanger interface {
	Exchange(ctx context.Context, m *dns.Msg, network string, server netip.AddrPort) (*dns.Msg, error)
}

// DNSClient is the real Exchanger: miekg/dns over UDP or TCP with a per-query timeout.
type DNSClient struct{ Timeout time.Duration }

// Exchange implements Exchanger.
func (c DNSClient) Exchange(ctx context.Context, m *dns.Msg, network string, server netip.AddrPort) (*dns.Msg, error) {
	cl := &dns.Client{Net: network, Timeout: c.Timeout, UDPSize: dns.DefaultMsgSize}
	r, _, err := cl.ExchangeContext(ctx, m, server.String())
	if err != nil {
		return nil, fmt.Errorf("query %s %s over %s at %s: %w", m.Question[0].Name, dns.TypeToString[m.Question[0].Qtype], network, server, err)
	}
	return r, nil
}

// answer is one probe's outcome.
type answer struct {
	server  netip.Addr
	network string
	name    string
	qtype   uint16
	msg     *dns.Msg
	err     error
}

func (a answer) String() string {
	q := fmt.Sprintf("%s %s over %s at %s", a.name, dns.TypeToString[a.qtype], a.network, a.server)
	if a.err != nil {
		return q + ": " + shortErr(a.err)
	}
	return q + ": " + dns.RcodeToString[a.msg.Rcode]
}

// refused reports a "nothing listens there" error (ICMP port unreachable on UDP, RST on TCP).
func (a answer) refused() bool { return errors.Is(a.err, syscall.ECONNREFUSED) }

func shortErr(err error) string {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case isTimeout(err):
		return "timed out"
	}
	return err.Error()
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &t) && t.Timeout()
}

// query runs the queries in parallel: probe queries are independent and each may take the whole
// timeout, so a sequence would multiply it.
func (l *Live) query(ctx context.Context, qs []answer) []answer {
	var wg sync.WaitGroup
	for i := range qs {
		wg.Add(1)
		go func(q *answer) {
			defer wg.Done()
			m := new(dns.Msg)
			m.SetQuestion(dns.Fqdn(q.name), q.qtype)
			m.RecursionDesired = true
			q.msg, q.err = l.DNS.Exchange(ctx, m, q.network, netip.AddrPortFrom(q.server, l.DNSPort))
		}(&qs[i])
	}
	wg.Wait()
	return qs
}

// cacheProbe is what the cache answered on its probeable addresses.
type cacheProbe struct {
	probed   []netip.Addr
	skipped  []netip.Addr // not on the interface or without a local route: judged elsewhere
	answers  []answer
	answered bool // some query got a response from the cache
}

func clusterName(env *Env) string {
	return "kubernetes.default.svc." + env.Plan.Facts.ClusterDomain + "."
}

// probeCache queries the cluster name (and the configured external name) on every cache address that
// is on the interface and routed locally, over UDP and TCP, once per report.
func (env *Env) probeCache(ctx context.Context) *cacheProbe {
	l := env.Host
	l.dnsOnce.Do(func() {
		var qs []answer
		for _, st := range env.cacheAddrs() {
			if !st.Probable {
				l.dns.skipped = append(l.dns.skipped, st.Addr)
				continue
			}
			l.dns.probed = append(l.dns.probed, st.Addr)
			names := []string{clusterName(env)}
			if n := env.Config.Probes.ExternalName; n != "" {
				names = append(names, dns.Fqdn(n))
			}
			for _, n := range names {
				for _, network := range []string{"udp", "tcp"} {
					qs = append(qs, answer{server: st.Addr, network: network, name: n, qtype: dns.TypeA})
				}
			}
		}
		l.dns.answers = l.query(ctx, qs)
		for _, a := range l.dns.answers {
			l.dns.answered = l.dns.answered || a.err == nil
		}
	})
	return &l.dns
}

type nodelocalDNS struct{}

func (nodelocalDNS) ID() string { return "nodelocaldns.dns" }

func (nodelocalDNS) Run(ctx context.Context, env *Env) Result {
	if env.Host == nil {
		return liveSkipped()
	}
	p := env.probeCache(ctx)
	if len(p.probed) == 0 {
		return Result{Status: Unknown, Message: fmt.Sprintf("no cache address (%s) is on %s with a local route: nothing to probe (see nodelocaldns.interface and nodelocaldns.routes)", addrList(p.skipped), env.Config.NodeLocalDNS.Interface)}
	}
	var failed, refused, ok []string
	var servfail []string
	for _, a := range p.answers {
		switch {
		case a.err == nil && a.msg.Rcode == dns.RcodeServerFailure:
			servfail = append(servfail, a.String())
		case a.err == nil:
			ok = append(ok, a.String())
		case a.refused():
			refused = append(refused, a.String())
		default:
			failed = append(failed, a.String())
		}
	}
	timeout := env.Config.Probes.Timeout
	switch {
	case len(refused) > 0 && len(failed) == 0 && len(ok)+len(servfail) == 0:
		return Result{Status: Problem, Message: fmt.Sprintf("nothing listens on %s port 53: %s", addrList(p.probed), strings.Join(refused, "; ")),
			Hint: "the cache is not running: check the node-local-dns pod on this node (kubectl -n kube-system logs ds/nodelocaldns)"}
	case len(failed)+len(refused) > 0:
		// Seed 000: the interface, address and route are fine, yet packets to the link-local address
		// vanish (Cilium 1.16 with BPF host routing and bpf.masquerade).
		return Result{Status: Problem, Message: fmt.Sprintf("the cache does not answer within %s although %s carries %s: %s", timeout, env.Config.NodeLocalDNS.Interface, addrList(p.probed), strings.Join(append(failed, refused...), "; ")),
			Hint: "packets to the link-local address are dropped or diverted before the cache: with Cilium, set bpf.hostLegacyRouting=true or use a LocalRedirectPolicy for node-local-dns; check the cache pod's logs and `nodedns check` on a healthy node"}
	}
	msg := "the cache answers on " + addrList(p.probed) + " over udp and tcp (" + strings.Join(ok, "; ")
	if len(servfail) > 0 {
		msg += "; SERVFAIL: " + strings.Join(servfail, "; ")
	}
	msg += ")"
	if len(p.skipped) > 0 {
		msg += "; not probed (not on the interface or no local route): " + addrList(p.skipped)
	}
	return Result{Status: OK, Message: msg}
}
