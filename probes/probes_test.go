package probes

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/internal/policy"
)

// contractIDs are the ids of docs/contract.md's "Check ids" table, in its order.
func contractIDs(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("../docs/contract.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(data), "\n## Check ids\n")
	if !ok {
		t.Fatal(`docs/contract.md has no "Check ids" section`)
	}
	table, _, _ = strings.Cut(table, "\n## ")
	var ids []string
	for _, line := range strings.Split(table, "\n") {
		if rest, ok := strings.CutPrefix(line, "| `"); ok {
			id, _, _ := strings.Cut(rest, "`")
			ids = append(ids, id)
		}
	}
	return ids
}

func TestEveryIDOnceInOrder(t *testing.T) {
	if diff := cmp.Diff(contractIDs(t), IDs); diff != "" {
		t.Errorf("check ids differ from docs/contract.md \"Check ids\" (-contract +All()):\n%s", diff)
	}
	// A node with nothing on it: every check still answers, with a valid status.
	s := node.Observe(nodefs.NewReader(t.TempDir()), config.Default(), time.Now())
	rep := Run(context.Background(), &Env{Snapshot: s, Config: config.Default(), Plan: policy.Compute(s, config.Default())}, All())
	if len(rep.Checks) != len(IDs) {
		t.Fatalf("%d results for %d ids", len(rep.Checks), len(IDs))
	}
	for i, c := range rep.Checks {
		if c.ID != IDs[i] {
			t.Errorf("result %d is %s, want %s", i, c.ID, IDs[i])
		}
		switch c.Status {
		case OK, Problem, Unknown, Skipped:
		default:
			t.Errorf("%s: status %q", c.ID, c.Status)
		}
		if c.Message == "" {
			t.Errorf("%s: empty message", c.ID)
		}
	}
	// An empty node has no resolv.conf and no upstream: that is a problem, not ok.
	if rep.Status != Problem || rep.ExitCode() != 1 {
		t.Errorf("empty node: status %s exit %d, want problem 1", rep.Status, rep.ExitCode())
	}
}

func TestFoldAndExitCode(t *testing.T) {
	tests := []struct {
		statuses []Status
		want     Status
		code     int
	}{
		{[]Status{OK, Skipped}, OK, 0},
		{[]Status{OK, Unknown, Skipped}, Unknown, 2},
		{[]Status{Unknown, Problem, OK}, Problem, 1},
		{nil, OK, 0},
	}
	for _, tc := range tests {
		var rs []Result
		for _, s := range tc.statuses {
			rs = append(rs, Result{Status: s})
		}
		rep := Report{Status: Fold(rs), Checks: rs}
		if rep.Status != tc.want || rep.ExitCode() != tc.code {
			t.Errorf("%v: %s exit %d, want %s exit %d", tc.statuses, rep.Status, rep.ExitCode(), tc.want, tc.code)
		}
	}
}

func TestNPD(t *testing.T) {
	long := strings.Repeat("very long message ", 20)
	tests := []struct {
		name string
		rep  Report
		want string
	}{
		{"ok", Report{Status: OK, Checks: []Result{{ID: "a", Status: OK}}}, "ok"},
		{"first problem", Report{Status: Problem, Checks: []Result{{ID: "resolvconf.loop", Status: Problem, Message: "/etc/resolv.conf lists 169.254.25.10"}}},
			"resolvconf.loop: /etc/resolv.conf lists 169.254.25.10"},
		{"counted", Report{Status: Problem, Checks: []Result{{ID: "x", Status: Unknown, Message: "u"}, {ID: "a", Status: Problem, Message: "m"}, {ID: "b", Status: Problem, Message: "n"}}},
			"a: m (+1 more)"},
		{"unknown", Report{Status: Unknown, Checks: []Result{{ID: "a", Status: Unknown, Message: "cannot read"}}}, "a: cannot read"},
	}
	for _, tc := range tests {
		if got := tc.rep.NPD(); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	rep := Report{Status: Problem, Checks: []Result{{ID: "kubelet.resolvconf", Status: Problem, Message: long + "\n" + long}, {ID: "b", Status: Problem, Message: "x"}}}
	got := rep.NPD()
	if len(got) > NPDMaxLen || strings.Contains(got, "\n") || !strings.HasSuffix(got, "(+1 more)") || !strings.HasPrefix(got, "kubelet.resolvconf: very long") {
		t.Errorf("long NPD line %q (%d chars)", got, len(got))
	}
	// Multi-byte text is cut on a rune boundary.
	rep = Report{Status: Problem, Checks: []Result{{ID: "a", Status: Problem, Message: strings.Repeat("ü", 100)}}}
	if got := rep.NPD(); len(got) > NPDMaxLen || !strings.HasSuffix(got, "...") || !json.Valid([]byte(`"`+got+`"`)) {
		t.Errorf("unicode NPD line %q", got)
	}
}

// envFor is the Env of `nodedns check --root` over a snapshot built in a test: the plan derived from
// it and cfg, no live host.
func envFor(s *node.Snapshot, cfg config.Config) *Env {
	return &Env{Snapshot: s, Config: cfg, Plan: policy.Compute(s, cfg)}
}

// checkResult fails unless r has status want, its message holds every fragment of msg and none of
// notMsg, and its hint holds every fragment of hint.
func checkResult(t *testing.T, r Result, want Status, msg, notMsg, hint []string) {
	t.Helper()
	if r.Status != want {
		t.Errorf("status %s, want %s: %q (hint %q)", r.Status, want, r.Message, r.Hint)
	}
	for _, s := range msg {
		if !strings.Contains(r.Message, s) {
			t.Errorf("message %q does not say %q", r.Message, s)
		}
	}
	for _, s := range notMsg {
		if strings.Contains(r.Message, s) {
			t.Errorf("message %q says %q", r.Message, s)
		}
	}
	for _, s := range hint {
		if !strings.Contains(r.Hint, s) {
			t.Errorf("hint %q does not say %q", r.Hint, s)
		}
	}
}

// resolvedStubResolv is /etc/resolv.conf as a symlink to systemd-resolved's stub file: resolved is
// the node's resolver.
func resolvedStubResolv(t *testing.T) node.ResolvFile {
	t.Helper()
	rf := readResolvForTest(t, "nameserver 127.0.0.53\noptions edns0 trust-ad\n")
	rf.Symlink, rf.LinkTarget, rf.Target = true, "../run/systemd/resolve/stub-resolv.conf", node.ResolvedStubConf
	return rf
}
