package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestStandbySeries(t *testing.T) {
	r := NewRecorder(SourceRun, "1.2.3")
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "nodedns_standby") {
		t.Errorf("standby series without a standby:\n%s", b.String())
	}
	r.StandbyEnabled()
	r.StandbyTakeover(12 * time.Millisecond)
	r.StandbyActive(true)
	for range 3 {
		r.StandbyQuery(dns.RcodeSuccess)
	}
	r.StandbyQuery(dns.RcodeServerFailure)
	r.StandbyTakeover(8 * time.Millisecond)
	b.Reset()
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"nodedns_standby_active 1\n",
		`nodedns_standby_queries_total{rcode="NOERROR"} 3` + "\n",
		`nodedns_standby_queries_total{rcode="SERVFAIL"} 1` + "\n",
		"nodedns_standby_takeovers_total 2\n",
		"nodedns_standby_takeover_delay_seconds 0.008\n",
		"nodedns_standby_takeover_delay_seconds_total 0.020\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("missing %q in:\n%s", want, b.String())
		}
	}
}
