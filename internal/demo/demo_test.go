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
// `nodedns restore` gives each node back as it was. In the rolling update (node-cache modelled, its
// replacement ReplaceAfter the SIGTERM), without nodedns node-cache's teardown deletes its interface
// and rules and the pod loses lookups for seconds; with the standby at least 99% are answered with
// no gap over 200 ms (plus the machine's load, measured by a control resolver), nodedns put back the
// interface and rules, and the replacement took them over (Check).
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("the demo runs real daemons: not in -short")
	}
	nstest.Require(t)
	var out strings.Builder
	res := Run(t, Options{Out: &out})
	t.Logf("demo output:\n%s", out.String())
	if len(res.Incidents) != 2 {
		t.Fatalf("%d incidents, want 2", len(res.Incidents))
	}
	for _, b := range Check(res) {
		t.Error(b)
	}
	u := res.Update
	t.Logf("rolling update: without nodedns %s; with the standby %s (control %s); put back %s %v after %q",
		u.Without, u.With, u.Control, u.PutBack, u.Took, u.Gone)
	// A full window at the resolver's 100 lookups a second, each time: the figures are over the
	// whole UpdateWindow, not a part of it.
	for _, w := range []nstest.Window{u.Without, u.With} {
		if w.Rate < 50 {
			t.Errorf("rolling update: %s; want 50 lookups a second or more over the window", w)
		}
	}
	for _, inc := range res.Incidents {
		if inc.ID == "001" && inc.Before.Leaked < Lookups {
			// Every failing lookup asks the LAN resolver at least once for its name with the DHCP
			// domain appended (the cache caches nothing across distinct names).
			t.Errorf("incident 001: %d leaked queries for %d failing lookups, want at least one each", inc.Before.Leaked, Lookups)
		}
		if !inc.RestoredExact {
			t.Errorf("incident %s: nodedns restore did not give back the starting file", inc.ID)
		}
	}
	for _, s := range []string{"without nodedns", "with nodedns run", "plugin/loop: Loop (169.254.25.10:", "queries leaked to the LAN",
		"node-local-dns rolling update: ", "nodedns run put back interface nodelocaldns"} {
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

var digits, spaces = regexp.MustCompile(`[0-9]+`), regexp.MustCompile(` +`)

// digitsAside is a line with every run of digits one N and every run of spaces one space: a count
// one digit longer (999 or 1001 lookups) shifts the columns after it.
func digitsAside(l string) string {
	return spaces.ReplaceAllString(digits.ReplaceAllString(strings.TrimRight(l, " "), "N"), " ")
}

// requireREADMEExcerpt fails when a line of README's demo block is not a line of the real output,
// every run of digits aside (ports, counts and times vary).
func requireREADMEExcerpt(t *testing.T, out string) {
	t.Helper()
	have := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		have[digitsAside(l)] = true
	}
	for _, l := range readmeExcerpt(t) {
		if !have[digitsAside(l)] {
			t.Errorf("README's demo output shows a line the real output lacks:\n%s\nreal output:\n%s", l, out)
		}
	}
}

// TestDemoDiesWithItsTest: TestDemo's test binary, killed with SIGKILL part-way, runs none of its
// cleanups and still leaves nothing on this machine within a bounded wait: no process of it
// (CoreDNS, dnsmasq, dbus-daemon, resolved, dhclient, nodedns run, the node-cache model, the pod,
// the sandboxes' inits), none of its network namespaces, no mount. It is killed twice: in incident
// 002 (nodedns run and the node-local cache up in its node), and in the rolling update (nodedns run
// beside the node-cache model, the pod's resolvers' threads in the pod's network namespace).
func TestDemoDiesWithItsTest(t *testing.T) {
	if testing.Short() {
		t.Skip("the demo runs real daemons: not in -short")
	}
	nstest.Require(t)
	nstest.CoreDNS(t)
	for _, tc := range []struct {
		name, cache string // cache: what the node-local cache's command line names
	}{
		{"incident 002", "Corefile-nodelocaldns"},
		{"rolling update", "Corefile-node-cache"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			child := nstest.StartChildTest(t, "TestDemo")
			var fp nstest.Footprint
			child.WaitFor(t, 10*time.Minute, "nodedns run and the node-local cache in the demo's node ("+tc.name+")", func() bool {
				var err error
				if fp, err = nstest.TakeFootprint(child.Marker); err != nil {
					t.Fatal(err)
				}
				var run, cache bool
				for _, cmd := range fp.Procs {
					run = run || strings.Contains(cmd, "nodedns") && strings.HasSuffix(cmd, " run")
					cache = cache || strings.Contains(cmd, "coredns") && strings.Contains(cmd, tc.cache)
				}
				return run && cache
			})
			child.KillLeavesNothing(t, fp, 30*time.Second)
		})
	}
}
