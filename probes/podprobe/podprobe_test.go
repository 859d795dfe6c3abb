package podprobe

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"
)

func TestFailures(t *testing.T) {
	a4, a6 := netip.MustParseAddr("169.254.25.10"), netip.MustParseAddr("fd00:25::10")
	res := func(a netip.Addr, n string, o Outcome) Result { return Result{Addr: a, Net: n, Outcome: o} }
	rep := Report{
		// The host is answered on everything but TCP to the IPv6 address.
		Host: []Result{res(a4, "udp", Answered), res(a4, "tcp", Answered), res(a6, "udp", Answered), res(a6, "tcp", Timeout)},
		Pods: []PodResult{
			{Pod: Pod{Name: "ok"}, Results: []Result{res(a4, "udp", Answered), res(a4, "tcp", Answered), res(a6, "udp", Answered), res(a6, "tcp", Answered)}},
			{Pod: Pod{Name: "cut"}, Results: []Result{res(a4, "udp", Timeout), res(a4, "tcp", Timeout), res(a6, "udp", Refused), res(a6, "tcp", Timeout)}},
			{Pod: Pod{Name: "same-as-host"}, Results: []Result{res(a4, "udp", Answered), res(a4, "tcp", Answered), res(a6, "udp", Answered), res(a6, "tcp", Timeout)}},
			{Pod: Pod{Name: "gone"}, Err: errors.New("enter namespace: no such file or directory")},
		},
	}
	want := []PodResult{{Pod: Pod{Name: "cut"}, Results: []Result{res(a4, "udp", Timeout), res(a4, "tcp", Timeout), res(a6, "udp", Refused)}}}
	if d := cmp.Diff(want, rep.Failures(), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); d != "" {
		t.Errorf("Failures (-want +got):\n%s", d)
	}
}

func TestResultString(t *testing.T) {
	a := netip.MustParseAddr("fd00:25::10")
	for _, tt := range []struct {
		r    Result
		want string
	}{
		{Result{Addr: a, Net: "udp", Outcome: Answered, Rcode: dns.RcodeNameError}, "fd00:25::10 over udp: answered NXDOMAIN"},
		{Result{Addr: a, Net: "tcp", Outcome: Timeout, Err: errors.New("i/o timeout")}, "fd00:25::10 over tcp: timeout"},
		{Result{Addr: a, Net: "tcp", Outcome: Error, Err: errors.New("network is unreachable")}, "fd00:25::10 over tcp: error (network is unreachable)"},
	} {
		if got := tt.r.String(); got != tt.want {
			t.Errorf("%q, want %q", got, tt.want)
		}
	}
}
