package demo

import (
	"strings"
	"testing"

	"github.com/nodedns/nodedns/internal/testutil/nstest"
)

// TestDemo runs what `make demo` runs (the real nodedns binary, CoreDNS, dnsmasq and
// systemd-resolved in sandboxes) and asserts its figures: before nodedns, incident 002's cache exits
// 1 with the loop plugin's FATAL and incident 001's failing pod lookups leak to the LAN resolver;
// with `nodedns run`, both caches are up with no loop and answer an outside name, and nothing leaks;
// `nodedns restore` gives each node back as it was.
func TestDemo(t *testing.T) {
	nstest.Require(t)
	var out strings.Builder
	incs := Run(t, Options{Out: &out})
	t.Logf("demo output:\n%s", out.String())
	if len(incs) != 2 {
		t.Fatalf("%d incidents, want 2", len(incs))
	}
	for _, b := range Check(incs) {
		t.Error(b)
	}
	for _, inc := range incs {
		if inc.ID == "001" && inc.Before.Leaked < Lookups {
			// Every failing lookup asks the LAN resolver at least once for its name with the DHCP
			// domain appended (the cache caches nothing across distinct names).
			t.Errorf("incident 001: %d leaked queries for %d failing lookups, want at least one each", inc.Before.Leaked, Lookups)
		}
		if !inc.RestoredExact {
			t.Errorf("incident %s: nodedns restore did not give back the starting file", inc.ID)
		}
	}
	for _, s := range []string{"without nodedns", "with nodedns run", "plugin/loop: Loop (169.254.25.10:", "queries leaked to the LAN"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("the demo's output does not say %q", s)
		}
	}
}
