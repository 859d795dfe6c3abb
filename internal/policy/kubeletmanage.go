package policy

import (
	"fmt"
	"path"
	"slices"
	"time"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/kubelet"
	"github.com/nodedns/nodedns/internal/node"
)

// kubeletManage is kubelet.manage (docs/contract.md "kubelet.manage"): the one place whose value
// wins for kubelet's resolv.conf is pointed at nodedns's file (node.Snapshot.KubeletManage, decided
// by package kubelet from the node's files), as a normal change, with nodedns's record that kubelet
// must restart; then the restart: an action with kubelet.restart, else a pending step, until a
// kubelet started after the change is seen (live node; under --root it stays pending).
func (p *Plan) kubeletManage(s *node.Snapshot, cfg config.Config) {
	if !cfg.Kubelet.Manage || s.KubeletFiles.Err != nil {
		return
	}
	unit := restartUnit(s.KubeletFiles)
	if e := s.KubeletManage; e != nil {
		switch {
		case e.Blocked != "":
			p.block(e.Target, "%s", e.Blocked)
			return
		case p.planned(cfg.Kubelet.ResolvConf) && len(p.BlockedFor(cfg.Kubelet.ResolvConf)) > 0:
			p.block(e.Path, "nodedns's file %s is not written (%s): kubelet is not pointed at it", cfg.Kubelet.ResolvConf, p.BlockedFor(cfg.Kubelet.ResolvConf)[0].Reason)
			return
		case processOnly(s):
			p.block(unit, "the running kubelet sets --resolv-conf=%s (%s), which none of the files nodedns edits gives it (an ExecStart= flag, or a start by hand or by another supervisor): changing those files would not change it; point it at %s where it is started", s.Kubelet.ResolvConf, s.Kubelet.ResolvConfFrom, cfg.Kubelet.ResolvConf)
			return
		}
		n := len(p.Changes)
		p.write(e.Path, e.Path, e.Before, e.After, e.Mode, "kubelet.manage: "+e.Reason)
		if len(p.Changes) == n {
			return
		}
		rec := node.KubeletRestart{Unit: unit, File: e.Path, Changed: ceilTick(s.Now)}
		var before []byte
		if s.KubeletRestart != nil {
			before = (*s.KubeletRestart).Render()
		}
		if cfg.Kubelet.Restart {
			// The restart comes with the change, in this pass: on the live node the record says it
			// is done, so no later pass restarts the unit again for it (under --root the action
			// stays pending, and is not recorded as done).
			if s.KubeletScanned {
				rec.Restarted = rec.Changed
			}
			p.Actions = append(p.Actions, RestartKubelet{Unit: unit, Reason: fmt.Sprintf("kubelet reads %s only when it starts (kubelet.restart)", e.Path)})
		}
		p.Changes = append(p.Changes, Change{Path: node.KubeletRestartFile, Target: node.KubeletRestartFile, Op: OpWrite, Before: before, After: rec.Render(), Mode: 0o644,
			Reason: "kubelet.manage: record that " + unit + " must restart to read " + e.Path})
		return
	}
	rec := s.KubeletRestart
	if rec == nil {
		return
	}
	if !s.KubeletStarted.IsZero() && !s.KubeletStarted.Before(rec.Changed) {
		p.Changes = append(p.Changes, Change{Path: node.KubeletRestartFile, Target: node.KubeletRestartFile, Op: OpRemove, Before: rec.Render(),
			Reason: fmt.Sprintf("kubelet.manage: kubelet restarted at %s, after nodedns changed %s", stamp(s.KubeletStarted), rec.File)})
		return
	}
	if slices.Contains(kubelet.Units, rec.Unit) {
		// The record's unit only when it is one that starts kubelet: a record never makes nodedns
		// restart another unit (docs/contract.md "kubelet.manage").
		unit = rec.Unit
	}
	why := fmt.Sprintf("nodedns pointed %s at %s; kubelet reads it only when it starts", orKubelet(rec.File), cfg.Kubelet.ResolvConf)
	if !s.KubeletStarted.IsZero() {
		why = fmt.Sprintf("the running kubelet started at %s, before nodedns changed %s (%s): it still reads its old resolv.conf", stamp(s.KubeletStarted), orKubelet(rec.File), stamp(rec.Changed))
	}
	switch {
	case s.KubeletStarted.IsZero() && s.KubeletUnverified:
		// A process calls itself kubelet but nodedns cannot tell whether it is root's (it lacks
		// ptrace access to it): it could not see a restart either, and would restart kubelet on
		// every pass. The restart is left to the operator.
		why += "; nodedns cannot verify the running kubelet (see kubelet.resolvconf: the packaged unit needs /usr/share/nodedns/systemd/kubelet-manage.conf, and kubelet started by a unit of systemd's), so it cannot see kubelet restart and does not restart it itself"
	case cfg.Kubelet.Restart && !rec.Restarted.IsZero():
		// At most one restart per record: the unit was restarted and still no kubelet that started
		// after the change runs (none at all, or the old one): another restart would come on every
		// pass, the daemon's included. Left to the operator.
		running := "no kubelet runs"
		if !s.KubeletStarted.IsZero() {
			running = "the kubelet that runs started before the change"
		}
		why += fmt.Sprintf("; nodedns restarted %s at %s (kubelet.restart) and %s: it restarts a unit once per change, see `systemctl status %s`", unit, stamp(rec.Restarted), running, unit)
	case cfg.Kubelet.Restart:
		if s.KubeletScanned {
			restarted := *rec
			restarted.Restarted = ceilTick(s.Now)
			p.Changes = append(p.Changes, Change{Path: node.KubeletRestartFile, Target: node.KubeletRestartFile, Op: OpWrite, Before: rec.Render(), After: restarted.Render(), Mode: 0o644,
				Reason: "kubelet.manage: record that nodedns restarts " + unit})
		}
		p.Actions = append(p.Actions, RestartKubelet{Unit: unit, Reason: why})
		return
	}
	p.Pending = append(p.Pending, Pending{Target: unit, Step: "`systemctl restart " + unit + "`", About: []string{PendingKubelet}, Why: why})
}

// KubeletTick is the resolution of kubelet's start time (/proc/PID/stat's starttime is in clock
// ticks, USER_HZ 100): the record's time of change is rounded up to it, so that a kubelet counts
// as started after the change only when its start time is not before that (docs/contract.md
// "kubelet.manage"): whatever rounding there is errs towards a restart still owed.
const KubeletTick = 10 * time.Millisecond

// ceilTick is t in UTC, rounded up to KubeletTick.
func ceilTick(t time.Time) time.Time {
	c := t.UTC().Truncate(KubeletTick)
	if c.Before(t) {
		c = c.Add(KubeletTick)
	}
	return c
}

// stamp is t in UTC, to the hundredth of a second when it has a fraction.
func stamp(t time.Time) string {
	if t.Nanosecond() == 0 {
		return t.UTC().Format("2006-01-02T15:04:05Z")
	}
	return t.UTC().Format("2006-01-02T15:04:05.00Z")
}

// processOnly: on the live node the running kubelet (or k3s) has a --resolv-conf that its files do
// not give it.
func processOnly(s *node.Snapshot) bool {
	return s.Kubelet.ResolvOrigin.Kind == kubelet.OriginProcess && s.Kubelet.ResolvConf != s.KubeletFiles.ResolvConf &&
		(s.KubeletFiles.ResolvOrigin.Kind == "" || s.KubeletFiles.ResolvOrigin.Kind == kubelet.OriginRancherChoice)
}

// restartUnit is the unit that starts kubelet, for the restart.
func restartUnit(k kubelet.Config) string {
	switch {
	case k.Unit != "":
		return k.Unit
	case k.Shape == kubelet.ShapeRKE2:
		return "rke2-server.service"
	case k.Shape == kubelet.ShapeK3s:
		return "k3s.service"
	}
	return kubelet.Unit
}

func orKubelet(p string) string {
	if p == "" {
		return "kubelet's config"
	}
	return path.Clean(p)
}
