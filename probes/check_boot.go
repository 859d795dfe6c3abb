package probes

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/nodedns/nodedns/node"
)

type bootPersistence struct{}

func (bootPersistence) ID() string { return "boot.persistence" }

func (bootPersistence) Run(ctx context.Context, env *Env) Result {
	s := env.Snapshot
	u := s.Unit
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
		if !slices.Contains(u.Before, "kubelet.service") {
			problems = append(problems, u.Path+" is not ordered Before=kubelet.service")
			hints = append(hints, "reinstall the packaged unit (it has Before=kubelet.service)")
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
	// After a reboot, what the cache needed at the last good boot must come back (probes/boot.go).
	var live bootLive
	if env.Host != nil {
		live = env.checkBaseline(ctx)
		problems = append(problems, live.problems...)
		hints = append(hints, live.hints...)
	}
	if len(problems) > 0 {
		return Result{Status: Problem, Message: strings.Join(problems, "; "), Hint: strings.Join(uniq(hints), "; ")}
	}
	msg := u.Path + " is enabled (" + strings.Join(u.WantedBy, ", ") + ") and ordered before kubelet.service"
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
