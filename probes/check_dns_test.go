package probes

import (
	"context"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// TestSearchNXDomain runs dns.search-nxdomain against a real DNS server answering as seed 003's did.
func TestSearchNXDomain(t *testing.T) {
	tests := []struct {
		name   string
		rcode  int
		answer bool
		want   Status
		say    string
	}{
		{"NXDOMAIN", dns.RcodeNameError, false, OK, "get NXDOMAIN"},
		{"NODATA (seed 003)", dns.RcodeSuccess, false, Problem, "10.0.0.2 answers NODATA for r4nd0m.example.com. A"},
		{"wildcard", dns.RcodeSuccess, true, OK, "wildcard answer"},
		{"SERVFAIL", dns.RcodeServerFailure, false, Unknown, "SERVFAIL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env, _ := testEnv(t, func(w dns.ResponseWriter, r *dns.Msg) {
				m := new(dns.Msg)
				m.SetRcode(r, tc.rcode)
				if tc.answer {
					rr, _ := dns.NewRR(r.Question[0].Name + " 60 IN A 10.9.9.9")
					m.Answer = append(m.Answer, rr)
				}
				_ = w.WriteMsg(m)
			}, "example.com cluster.local")
			res := searchNXDomain{}.Run(context.Background(), env)
			if res.Status != tc.want || !strings.Contains(res.Message, tc.say) {
				t.Errorf("got %s %q, want %s saying %q", res.Status, res.Message, tc.want, tc.say)
			}
			if strings.Contains(res.Message, "cluster.local") {
				t.Errorf("the cluster domain was probed at the upstream: %s", res.Message)
			}
		})
	}
}
