package policy_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/kubelet"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/internal/policy"
)

// TestKubeletRestartOwed (docs/contract.md "kubelet.manage"): once kubelet.manage changed kubelet's
// config, the restart is owed until a kubelet that started after the change runs: a pending step
// (an action with kubelet.restart); a later kubelet clears nodedns's record. While a process that
// calls itself kubelet cannot be verified (nodedns without ptrace access to it), nodedns would not
// see a restart either: the restart stays a pending step, kubelet.restart or not, or the daemon
// would restart kubelet on every pass.
func TestKubeletRestartOwed(t *testing.T) {
	cfg := config.Default()
	cfg.Kubelet.Manage = true
	changed := time.Date(2026, 11, 27, 4, 0, 0, 0, time.UTC)
	observe := func(started time.Time, unverified bool) *node.Snapshot {
		s := node.Observe(nodefs.NewReader("../../cmd/nodedns/testdata/kubelet/kubeadm-healthy"), cfg, changed)
		if s.KubeletManage == nil || s.KubeletManage.Path != kubelet.KubeadmConfig {
			t.Fatalf("kubelet.manage would not edit %s: %+v", kubelet.KubeadmConfig, s.KubeletManage)
		}
		// As after apply: kubelet's config points at nodedns's file, the record is there.
		s.KubeletManage = nil
		s.KubeletRestart = &node.KubeletRestart{Unit: kubelet.Unit, File: kubelet.KubeadmConfig, Changed: changed}
		s.KubeletStarted, s.KubeletUnverified = started, unverified
		return s
	}
	for _, tc := range []struct {
		name       string
		started    time.Time
		restart    bool
		unverified bool
		want       string // pending, action, cleared
	}{
		{"under --root: no process", time.Time{}, false, false, "pending"},
		{"kubelet started before the change", changed.Add(-time.Hour), false, false, "pending"},
		{"kubelet started before the change, kubelet.restart", changed.Add(-time.Hour), true, false, "action"},
		{"kubelet started after the change", changed.Add(time.Minute), false, false, "cleared"},
		{"kubelet started after the change, kubelet.restart", changed.Add(time.Minute), true, false, "cleared"},
		{"no kubelet running, kubelet.restart", time.Time{}, true, false, "action"},
		{"a kubelet nodedns cannot verify, kubelet.restart", time.Time{}, true, true, "pending"},
		{"root's kubelet seen beside one it cannot verify, kubelet.restart", changed.Add(-time.Hour), true, true, "action"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg
			c.Kubelet.Restart = tc.restart
			p := policy.Compute(observe(tc.started, tc.unverified), c)
			pend := p.PendingFor(policy.PendingKubelet, kubelet.Unit)
			var acts []policy.Action
			for _, a := range p.Actions {
				if _, ok := a.(policy.RestartKubelet); ok {
					acts = append(acts, a)
				}
			}
			rc := restartChanges(p)
			switch tc.want {
			case "pending":
				if len(pend) != 1 || pend[0].Step != "`systemctl restart kubelet.service`" || len(acts) != 0 || len(rc) != 0 {
					t.Errorf("want the pending restart: pending %v, actions %v, record changes %d", pend, acts, len(rc))
				}
				if !tc.started.IsZero() && !strings.Contains(pend[0].Why, "started at 2026-11-27T03:00:00Z, before nodedns changed") {
					t.Errorf("the pending step does not say why: %q", pend[0].Why)
				}
				if tc.unverified && !strings.Contains(pend[0].Why, "nodedns cannot verify the running kubelet") {
					t.Errorf("the pending step does not say nodedns cannot see the restart: %q", pend[0].Why)
				}
			case "action":
				if len(acts) != 1 || acts[0].Target() != kubelet.Unit || len(pend) != 0 {
					t.Errorf("want the restart action: pending %v, actions %v", pend, acts)
				}
			case "cleared":
				if len(rc) != 1 || rc[0].Op != policy.OpRemove || len(pend) != 0 || len(acts) != 0 {
					t.Errorf("want the record removed and nothing owed: pending %v, actions %v, record changes %+v", pend, acts, rc)
				}
			}
		})
	}
}

// TestKubeletManageProcessOnly: a --resolv-conf only the running kubelet has (started by hand or by
// another supervisor) is blocked: changing the files would not change it.
func TestKubeletManageProcessOnly(t *testing.T) {
	cfg := config.Default()
	cfg.Kubelet.Manage = true
	s := node.Observe(nodefs.NewReader("../../cmd/nodedns/testdata/kubelet/kubeadm-healthy"), cfg, time.Now())
	s.Kubelet.ResolvConf, s.Kubelet.ResolvConfFrom = "/etc/resolv.conf", "--resolv-conf of the running kubelet, pid 42"
	s.Kubelet.ResolvOrigin = kubelet.Origin{Kind: kubelet.OriginProcess}
	p := policy.Compute(s, cfg)
	bs := p.BlockedFor(kubelet.Unit)
	if len(bs) != 1 || !strings.Contains(bs[0].Reason, "which none of the files nodedns edits gives it") {
		t.Errorf("blocked: %+v", p.Blocked)
	}
	for _, c := range p.Changes {
		if c.Path == kubelet.KubeadmConfig || c.Path == node.KubeletRestartFile {
			t.Errorf("the plan changes %s", c.Path)
		}
	}
}

// TestKubeletRestartSameSecond (docs/contract.md "kubelet.manage"): the record's time of change and
// kubelet's start time are compared at one resolution, the clock tick (10 ms) of kubelet's start
// time, rounded so that the comparison errs towards "still owed". A kubelet that started 400 ms
// before apply, in the same second, still reads its old resolv.conf: the restart stays owed.
//
// Before: apply recorded the change cut to the whole second (04:00:00 for 04:00:00.900), so that
// kubelet (04:00:00.500) counted as started after it and the next apply removed the record: the
// restart was never done.
func TestKubeletRestartSameSecond(t *testing.T) {
	cfg := config.Default()
	cfg.Kubelet.Manage = true
	now := time.Date(2026, 11, 27, 4, 0, 0, 900_000_000, time.UTC)
	s := node.Observe(nodefs.NewReader("../../cmd/nodedns/testdata/kubelet/kubeadm-healthy"), cfg, now)
	if s.KubeletManage == nil {
		t.Fatal("kubelet.manage would not edit kubelet's config")
	}
	rec := plannedRecord(t, policy.Compute(s, cfg))
	if rec.Changed.Before(now) {
		t.Fatalf("the record says the change was at %s, before it was planned (%s)", rec.Changed.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano))
	}
	for _, tc := range []struct {
		started time.Time
		owed    bool
	}{
		{now.Add(-400 * time.Millisecond), true},
		{now.Add(-10 * time.Millisecond), true},
		{now.Add(10 * time.Millisecond), false},
		{now.Add(time.Second), false},
	} {
		s.KubeletManage, s.KubeletRestart, s.KubeletStarted = nil, &rec, tc.started
		p := policy.Compute(s, cfg)
		owed := len(p.PendingFor(policy.PendingKubelet, kubelet.Unit)) == 1
		if owed != tc.owed {
			t.Errorf("a kubelet started at %s, the change at %s: owed %v, want %v (plan changes %+v)", tc.started.Format("15:04:05.000"), now.Format("15:04:05.000"), owed, tc.owed, p.Changes)
		}
	}
}

// TestKubeletRestartOnce (docs/contract.md "kubelet.manage"): with kubelet.restart, nodedns
// restarts the unit that starts kubelet at most once per record: the record says when it did, and
// when no kubelet that started after the change runs on a later pass (none runs at all, or the old
// one still does), the restart is a pending step that says nodedns already restarted the unit, not
// another restart.
//
// Before: the record did not say, and with no kubelet running every pass (the daemon's included)
// restarted the unit again.
func TestKubeletRestartOnce(t *testing.T) {
	cfg := config.Default()
	cfg.Kubelet.Manage, cfg.Kubelet.Restart = true, true
	now := time.Date(2026, 11, 27, 4, 0, 0, 0, time.UTC)
	s := node.Observe(nodefs.NewReader("../../cmd/nodedns/testdata/kubelet/kubeadm-healthy"), cfg, now)
	s.KubeletScanned = true // the live node: the restart is carried out
	restarts := func(p policy.Plan) int {
		n := 0
		for _, a := range p.Actions {
			if _, ok := a.(policy.RestartKubelet); ok {
				n++
			}
		}
		return n
	}
	// The change and its restart in one pass: the record says the restart is done.
	p := policy.Compute(s, cfg)
	rec := plannedRecord(t, p)
	if restarts(p) != 1 || rec.Restarted.IsZero() {
		t.Fatalf("apply's first pass: %d restarts, record %+v; want one restart, recorded", restarts(p), rec)
	}
	for _, started := range []time.Time{{}, now.Add(-time.Hour)} {
		s.KubeletManage, s.KubeletRestart, s.KubeletStarted = nil, &rec, started
		s.Now = now.Add(time.Minute)
		p := policy.Compute(s, cfg)
		pend := p.PendingFor(policy.PendingKubelet, kubelet.Unit)
		if restarts(p) != 0 || len(pend) != 1 || !strings.Contains(pend[0].Why, "nodedns restarted kubelet.service at 2026-11-27T04:00:00") {
			t.Errorf("kubelet started %v: %d restarts, pending %+v; want no second restart and the pending step saying nodedns restarted it", started, restarts(p), pend)
		}
		for _, c := range p.Changes {
			if c.Path == node.KubeletRestartFile {
				t.Errorf("the record changes again: %+v", c)
			}
		}
	}
	// A record from before the restart was recorded (an older nodedns, or kubelet.restart turned
	// on since): one restart, and the record says so.
	old := rec
	old.Restarted = time.Time{}
	s.KubeletRestart, s.KubeletStarted = &old, time.Time{}
	p = policy.Compute(s, cfg)
	if again := plannedRecord(t, p); restarts(p) != 1 || again.Restarted.IsZero() || !again.Changed.Equal(old.Changed) {
		t.Errorf("a record without a restart: %d restarts, record %+v; want one restart, recorded with the same time of change", restarts(p), again)
	}
	// Under --root no restart is carried out (the action stays pending): none is recorded.
	s.KubeletScanned = false
	p = policy.Compute(s, cfg)
	if rc := restartChanges(p); restarts(p) != 1 || len(rc) != 0 {
		t.Errorf("under --root: %d restarts, record changes %+v; want the restart action and the record left as it is", restarts(p), rc)
	}
}

// plannedRecord is the kubelet restart record p writes.
func plannedRecord(t *testing.T, p policy.Plan) node.KubeletRestart {
	t.Helper()
	for _, c := range p.Changes {
		if c.Path == node.KubeletRestartFile && c.Op == policy.OpWrite {
			r, err := node.ParseKubeletRestart(c.After)
			if err != nil {
				t.Fatal(err)
			}
			return *r
		}
	}
	t.Fatalf("the plan writes no restart record: %+v", p.Changes)
	return node.KubeletRestart{}
}

// restartChanges are p's changes of the kubelet restart record.
func restartChanges(p policy.Plan) []policy.Change {
	var out []policy.Change
	for _, c := range p.Changes {
		if c.Path == node.KubeletRestartFile {
			out = append(out, c)
		}
	}
	return out
}

// TestKubeletRestartOnlyKubeletUnits (docs/contract.md "kubelet.manage"): whatever unit a record
// names, the restart is of a unit that starts kubelet: a record naming sshd.service (written by an
// older nodedns, or by whoever could write it) makes the plan restart kubelet.service.
func TestKubeletRestartOnlyKubeletUnits(t *testing.T) {
	cfg := config.Default()
	cfg.Kubelet.Manage, cfg.Kubelet.Restart = true, true
	now := time.Date(2026, 11, 27, 4, 0, 0, 0, time.UTC)
	s := node.Observe(nodefs.NewReader("../../cmd/nodedns/testdata/kubelet/kubeadm-healthy"), cfg, now)
	s.KubeletManage, s.KubeletScanned = nil, true
	s.KubeletRestart = &node.KubeletRestart{Unit: "sshd.service", File: kubelet.KubeadmConfig, Changed: now}
	p := policy.Compute(s, cfg)
	for _, a := range p.Actions {
		if _, ok := a.(policy.RestartKubelet); ok && a.Target() != kubelet.Unit {
			t.Errorf("the plan restarts %s", a.Target())
		}
	}
	if len(p.Actions) == 0 {
		t.Error("no restart planned")
	}
}
