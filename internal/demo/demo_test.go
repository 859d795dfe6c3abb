package demo

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/testutil/nstest"
)

// TestDemo runs what `make demo` runs (the real nodedns binary, CoreDNS, dnsmasq and
// systemd-resolved in sandboxes) and asserts its figures: before nodedns, incident 002's cache exits
// 1 with the loop plugin's FATAL and incident 001's failing pod lookups leak to the LAN resolver;
// with `nodedns run`, both caches are up with no loop and answer an outside name, and nothing leaks;
// `nodedns restore` gives each node back as it was.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("the demo runs real daemons: not in -short")
	}
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
	requireREADMEExcerpt(t, out.String())
}

// TestREADMEDemoExcerpt checks that README's demo block is there and shaped as the demo prints
// (its lines are checked against a real run by TestDemo).
func TestREADMEDemoExcerpt(t *testing.T) {
	lines := readmeExcerpt(t)
	if len(lines) < 5 || !strings.HasPrefix(lines[0], "Incident 002:") {
		t.Fatalf("README's demo block does not start with incident 002: %q", lines)
	}
}

// readmeExcerpt returns the lines of README's demo output block.
func readmeExcerpt(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "<!-- demo output:")
	if !ok {
		t.Fatal("README has no demo output block")
	}
	_, rest, _ = strings.Cut(rest, "```\n")
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("README's demo output block is not closed")
	}
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

var digits = regexp.MustCompile(`[0-9]+`)

// requireREADMEExcerpt fails when a line of README's demo block is not a line of the real output,
// every run of digits aside (ports, counts and times vary).
func requireREADMEExcerpt(t *testing.T, out string) {
	t.Helper()
	have := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		have[digits.ReplaceAllString(strings.TrimRight(l, " "), "N")] = true
	}
	for _, l := range readmeExcerpt(t) {
		if !have[digits.ReplaceAllString(strings.TrimRight(l, " "), "N")] {
			t.Errorf("README's demo output shows a line the real output lacks:\n%s\nreal output:\n%s", l, out)
		}
	}
}

// TestDemoDiesWithItsTest: TestDemo's test binary, killed with SIGKILL part-way (nodedns run and
// the node-local cache up in its node), runs none of its cleanups and still leaves nothing on this
// machine within a bounded wait: no process of it (CoreDNS, dnsmasq, dbus-daemon, resolved,
// dhclient, nodedns run, the sandboxes' inits), none of its network namespaces, no mount.
func TestDemoDiesWithItsTest(t *testing.T) {
	if testing.Short() {
		t.Skip("the demo runs real daemons: not in -short")
	}
	nstest.Require(t)
	nstest.CoreDNS(t)
	child := nstest.StartChildTest(t, "TestDemo")
	var fp nstest.Footprint
	child.WaitFor(t, 10*time.Minute, "nodedns run and the node-local cache in the demo's node", func() bool {
		var err error
		if fp, err = nstest.TakeFootprint(child.Marker); err != nil {
			t.Fatal(err)
		}
		var run, cache bool
		for _, cmd := range fp.Procs {
			run = run || strings.Contains(cmd, "nodedns") && strings.HasSuffix(cmd, " run")
			cache = cache || strings.Contains(cmd, "coredns") && strings.Contains(cmd, "Corefile-nodelocaldns")
		}
		return run && cache
	})
	child.KillLeavesNothing(t, fp, 30*time.Second)
}
