package probes

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"
	"github.com/nodedns/nodedns/internal/hostnet/netstate"
)

// TestBaseline walks the reboot baseline through a boot: recorded from a passing report, unchanged
// on the same boot, a problem for a missing item after a reboot once the grace period is over, and
// unknown within it.
func TestBaseline(t *testing.T) {
	env, st := testEnv(t, func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetRcode(r, dns.RcodeNameError)
		_ = w.WriteMsg(m)
	}, "example.com")
	ctx := context.Background()
	if got := env.checkBaseline(ctx); len(got.problems) > 0 || !strings.Contains(got.note, "no reboot baseline yet") {
		t.Fatalf("no state: %+v", got)
	}
	if err := SaveBaseline(ctx, env, Report{Status: Problem}); err != nil || st.data != nil {
		t.Fatalf("saved from a failing report: %v %s", err, st.data)
	}
	if err := SaveBaseline(ctx, env, Report{Status: OK}); err != nil || st.data == nil {
		t.Fatalf("not saved from a passing report: %v", err)
	}
	b, err := ParseBaseline(st.data)
	if err != nil {
		t.Fatal(err)
	}
	want := Baseline{Version: 1, BootID: "boot-1", Written: b.Written, Interface: "nodelocaldns", LinkType: "bridge",
		Addresses: []string{"169.254.25.10/32"}, Routes: []string{"local 169.254.25.10/32 dev nodelocaldns table local"}, Rules: []string{}}
	if diff := cmp.Diff(want, b); diff != "" {
		t.Errorf("baseline (-want +got):\n%s", diff)
	}
	if got := env.checkBaseline(ctx); !strings.Contains(got.note, "of this boot") {
		t.Errorf("same boot: %+v", got)
	}

	// Reboot: a new boot id, and the address did not come back.
	reboot := func(up time.Duration) *Env {
		e2, _ := testEnv(t, func(dns.ResponseWriter, *dns.Msg) {}, "example.com")
		e2.Host.State = st
		e2.Host.BootID = func() (string, error) { return "boot-2", nil }
		e2.Host.Uptime = func() (time.Duration, error) { return up, nil }
		e2.Host.Net = fakeNet{link: &netstate.Link{Name: "nodelocaldns", Index: 3, Type: "bridge"}}
		return e2
	}
	got := reboot(time.Hour).checkBaseline(ctx)
	if len(got.problems) != 1 || !strings.Contains(got.problems[0], "169.254.25.10/32") || !strings.Contains(got.problems[0], "after the 2m0s grace period") {
		t.Errorf("after the grace period: %+v", got)
	}
	got = reboot(30 * time.Second).checkBaseline(ctx)
	if len(got.problems) > 0 || !got.unknown || !strings.Contains(got.note, "within the 2m0s grace period") {
		t.Errorf("within the grace period: %+v", got)
	}
	st.data = []byte("{not json")
	if got := reboot(time.Hour).checkBaseline(ctx); !got.unknown || len(got.problems) > 0 {
		t.Errorf("corrupt state: %+v", got)
	}
}
