package probes

import (
	"slices"
	"strings"

	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/policy"
	"github.com/nodedns/nodedns/netplan"
	"github.com/nodedns/nodedns/systemd"
)

// planHint is the hint of a problem whose fix lives in targets, in the plan's own words
// (docs/contract.md "Check and plan agree"): "run `nodedns apply`" only when the plan changes or acts
// on one of them; the reason when it blocks one; the pending step when apply has done its part;
// else fallback (a step that is the operator's).
func planHint(env *Env, about, fallback string, targets ...string) string {
	p := env.Plan
	if bs := p.BlockedFor(targets...); len(bs) > 0 {
		return "nodedns leaves " + bs[0].Target + " as it is: " + bs[0].Reason
	}
	if p.Planned(targets...) {
		return hintApply
	}
	if ps := p.PendingFor(about, targets...); len(ps) > 0 {
		return pendingHint(ps)
	}
	return fallback
}

// pendingHint names what is still pending after apply and how to complete it.
func pendingHint(ps []policy.Pending) string {
	var steps []string
	for _, pd := range ps {
		s := "pending: " + pd.Step
		if !strings.HasPrefix(pd.Step, pd.Target) {
			s = "pending on " + pd.Target + ": " + pd.Step
		}
		if !slices.Contains(steps, s) {
			steps = append(steps, s)
		}
	}
	return strings.Join(steps, "; ")
}

// resolvedTargets are the targets through which nodedns changes what systemd-resolved serves: its
// drop-in and restart, per-link settings, and networkd's configuration for the links it manages.
func resolvedTargets(s *node.Snapshot) []string {
	ts := []string{node.ResolvedDropIn, systemd.ResolvedUnit, netplan.NodednsFile}
	for _, l := range s.Links {
		ts = append(ts, policy.Link{Index: l.IfIndex, Name: l.IfName}.String())
	}
	for _, n := range s.Networkd {
		ts = append(ts, node.NetworkdDropIn(n.Path))
	}
	return append(ts, policy.DelegateTargets(s)...)
}

// applyHint is planHint with the check's own words for what apply does (applied) when the plan
// changes one of the targets.
func applyHint(env *Env, about, applied, fallback string, targets ...string) string {
	if h := planHint(env, about, fallback, targets...); h != hintApply {
		return h
	}
	return applied
}
