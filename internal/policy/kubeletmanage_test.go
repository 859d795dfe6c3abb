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
	restartChanges := func(p policy.Plan) []policy.Change {
		var out []policy.Change
		for _, c := range p.Changes {
			if c.Path == node.KubeletRestartFile {
				out = append(out, c)
			}
		}
		return out
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
