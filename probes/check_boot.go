package probes

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/nodedns/nodedns/internal/kubelet"
	"github.com/nodedns/nodedns/internal/node"
)

type bootPersistence struct{}

func (bootPersistence) ID() string { return "boot.persistence" }

func (bootPersistence) Run(ctx context.Context, env *Env) Result {
	s := env.Snapshot
	u := s.Unit
	// nodedns must run before the unit that really starts kubelet (kubelet.service, or RKE2's and
	// k3s's own, which run kubelet themselves).
	kubeletUnit, kubeletWhy := s.Kubelet.Unit, "it starts kubelet"
	if kubeletUnit == "" {
		kubeletUnit, kubeletWhy = kubelet.Unit, "no unit that starts kubelet was found; kubelet's own"
	}
	var problems, hints []string
	switch {
	case u.Path == "":
		problems = append(problems, "the nodedns unit is not installed")
		hints = append(hints, "install the nodedns package")
	default:
		if !u.Enabled {
			problems = append(problems, u.Path+" is not enabled")
			hints = append(hints, "systemctl enable nodedns.service")
		}
		if !slices.Contains(u.Before, kubeletUnit) {
			problems = append(problems, u.Path+" is not ordered Before="+kubeletUnit+" ("+kubeletWhy+")")
			hints = append(hints, "reinstall the packaged unit (it has Before="+kubeletUnit+")")
		}
	}
	// A fix that lives only in /run is gone after a reboot while the loop source in /etc stays.
	if s.Resolved != nil && s.ResolvedPersistent != nil && s.ResolvedInUse() {
		var now, boot []netip.Addr
		for _, sv := range s.Resolved.DNS {
			now = append(now, sv.Addr)
		}
		for _, sv := range s.ResolvedPersistent.DNS {
			boot = append(boot, sv.Addr)
		}
		if len(loopAddrs(env, now, false)) == 0 {
			if bad := loopAddrs(env, boot, false); len(bad) > 0 {
				problems = append(problems, fmt.Sprintf("resolved's loop-free DNS lives only in /run: after a reboot it lists %s again", strings.Join(bad, ", ")))
				hints = append(hints, hintApply+" (writes "+node.ResolvedDropIn+")")
			}
		}
	}
	nmProblems, nmHints, nmNote := nmBootPersistence(env) // check_networkmanager.go
	problems, hints = append(problems, nmProblems...), append(hints, nmHints...)
	// After a reboot, what the cache needed at the last good boot must come back (checkBaseline).
	var live bootLive
	if env.Host != nil {
		live = env.checkBaseline(ctx)
		problems = append(problems, live.problems...)
		hints = append(hints, live.hints...)
	}
	if len(problems) > 0 {
		return Result{Status: Problem, Message: strings.Join(problems, "; "), Hint: strings.Join(uniq(hints), "; ")}
	}
	msg := u.Path + " is enabled (" + strings.Join(u.WantedBy, ", ") + ") and ordered before " + kubeletUnit
	if kubeletUnit != kubelet.Unit {
		msg += " (" + kubeletWhy + ")"
	}
	if nmNote != "" {
		msg += "; " + nmNote
	}
	switch {
	case env.Host == nil:
		msg += "; the reboot baseline is a live check"
	case live.unknown:
		return Result{Status: Unknown, Message: msg + "; " + live.note, Hint: "wait for the grace period (`nodedns check --wait`), or fix the state file"}
	default:
		msg += "; " + live.note
	}
	return Result{Status: OK, Message: msg}
}

// bootLive is the live part of boot.persistence.
type bootLive struct {
	problems, hints []string
	note            string
	unknown         bool
}

// checkBaseline compares the recorded baseline with the node after a reboot.
func (env *Env) checkBaseline(ctx context.Context) bootLive {
	l := env.Host
	data, err := l.State.Load()
	if errors.Is(err, fs.ErrNotExist) {
		return bootLive{note: "no reboot baseline yet (" + StatePath + " is written when every check passes)"}
	}
	if err != nil {
		return bootLive{note: "the reboot baseline cannot be read: " + err.Error(), unknown: true}
	}
	base, err := ParseBaseline(data)
	if err != nil {
		return bootLive{note: "the reboot baseline cannot be read: " + err.Error() + " (it is rewritten when every check passes)", unknown: true}
	}
	boot, err := l.BootID()
	if err != nil {
		return bootLive{note: err.Error(), unknown: true}
	}
	if boot == base.BootID {
		return bootLive{note: fmt.Sprintf("reboot baseline of this boot (%s: %s with %s)", base.Written.UTC().Format(time.RFC3339), base.Interface, strings.Join(base.Addresses, ", "))}
	}
	now := env.currentBaseline(ctx)
	var missing []string
	if base.Interface != "" && now.Interface == "" {
		missing = append(missing, "interface "+base.Interface)
	}
	for _, list := range []struct{ was, is []string }{{base.Addresses, now.Addresses}, {base.Routes, now.Routes}, {base.Rules, now.Rules}} {
		for _, x := range list.was {
			if !slices.Contains(list.is, x) {
				missing = append(missing, x)
			}
		}
	}
	if len(missing) == 0 {
		return bootLive{note: "everything recorded at the last boot came back after the reboot"}
	}
	up, err := l.Uptime()
	if err != nil {
		return bootLive{note: err.Error(), unknown: true}
	}
	grace := env.Config.Probes.BootGrace
	what := fmt.Sprintf("recorded at the last boot (%s) but missing since the reboot: %s", base.Written.UTC().Format(time.RFC3339), strings.Join(missing, "; "))
	if up < grace {
		return bootLive{note: fmt.Sprintf("rebooted %s ago, within the %s grace period; %s", up.Round(time.Second), grace, what), unknown: true}
	}
	return bootLive{
		problems: []string{fmt.Sprintf("%s after the %s grace period", what, grace)},
		hints: []string{"node-local-dns recreates them when its pod starts: check that it started after the reboot (kubelet running, image pullable: docs/incidents.md, incident 002); run `nodedns check --wait 120s` in preflight after a reboot; " +
			"if the change is intended, remove " + StatePath + " and the next passing check records the new baseline"},
	}
}
