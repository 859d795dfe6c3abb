package probes

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/nodedns/nodedns/internal/kubelet"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/policy"
)

type kubeletResolvConf struct{}

func (kubeletResolvConf) ID() string { return "kubelet.resolvconf" }

func (c kubeletResolvConf) Run(_ context.Context, env *Env) Result {
	r := c.run(env)
	for _, p := range env.Snapshot.ProblemsFrom(node.SourceManaged) {
		if p.Path != node.KubeletRestartFile || !env.Config.Kubelet.Manage {
			continue
		}
		// docs/contract.md "kubelet.manage": a record nodedns cannot believe (another user could
		// have written it) decides nothing, so whether a restart is owed is unknown.
		r.Message += "; nodedns's kubelet restart record is not believed: " + p.String()
		if r.Status == OK {
			r.Status, r.Hint = Unknown, "make "+node.KubeletRestartFile+" root's again as the message says (or remove it), then `nodedns apply`"
		}
	}
	if ig := env.Snapshot.KubeletIgnored; len(ig) > 0 {
		// docs/contract.md "Kubelet's config": a process that only calls itself kubelet decided
		// nothing; say so, so that whoever reads the verdict knows it was there.
		r.Message += "; " + strings.Join(ig, "; ")
	}
	return r
}

func (kubeletResolvConf) run(env *Env) Result {
	s := env.Snapshot
	k := s.Kubelet
	rf := s.KubeletResolv
	owed, owedHint := kubeletRestartOwed(env)
	running := ""
	if kf := s.KubeletFiles; owed && kf.Err == nil && kf.ResolvConf == env.Config.Kubelet.ResolvConf && k.ResolvConf != kf.ResolvConf {
		// docs/contract.md "kubelet.manage": judge the file kubelet reads once it restarts
		// (nodedns's), and say the running kubelet still reads another.
		running, k, rf = k.ResolvConf, kf, s.NodednsResolv
	}
	// Which file kubelet reads, and why (docs/contract.md "Kubelet's config").
	config := "kubelet's config " + k.Path + " (" + k.How + ")"
	switch {
	case k.Path == "":
		config = "no kubelet config (" + k.How + ")"
	case !k.Exists:
		config = "kubelet's config " + k.Path + " is missing (" + k.How + "): kubelet's defaults"
	}
	if k.Err != nil {
		// Invariant 5: nothing that depends on it (the loop addresses, the cluster domain) is
		// judged or changed.
		return Result{Status: Unknown, Message: fmt.Sprintf("kubelet's config %s (%s) cannot be used: %v: resolvConf, clusterDNS and clusterDomain are unknown, and nodedns changes nothing that depends on them", k.Path, k.How, k.Err),
			Hint: "fix " + k.Path + " (kubelet will not start with it either)"}
	}
	if k.ResolvConf == "" {
		return Result{Status: OK, Message: fmt.Sprintf("kubelet's resolvConf is empty: pods get no host resolv.conf; %s", config)}
	}
	where := fmt.Sprintf("kubelet's resolvConf %s", k.ResolvConf)
	if k.ResolvConfFrom != "" && k.ResolvConfFrom != k.Path {
		where += " (" + k.ResolvConfFrom + ")"
	}
	ours := k.ResolvConf == env.Config.Kubelet.ResolvConf
	pw, ps := kubelet.Point(k, env.Config.Kubelet.ResolvConf)
	pointHint := pw + ": " + ps + ", so that kubelet uses nodedns's loop-free file"
	if e := s.KubeletManage; env.Config.Kubelet.Manage && e != nil {
		// kubelet.manage: apply points kubelet at nodedns's file, or the plan says why not.
		pointHint = planHint(env, "", pointHint, e.Path, e.Target)
	}
	if owed && !ours {
		pointHint = owedHint // the files point at nodedns's file; the running kubelet does not yet
	}
	withConfig := func(r Result) Result {
		r.Message += "; " + config
		return r
	}
	switch {
	case !rf.Exists:
		hint := planHint(env, policy.PendingKubelet, "", env.Config.Kubelet.ResolvConf)
		if !ours {
			hint = pointHint
		}
		return withConfig(Result{Status: Problem, Message: where + " is missing: kubelet cannot start pods", Hint: hint})
	case rf.File == nil:
		return unreadable(rf)
	}
	var problems []string
	// kubelet hands the file to pods and to the cache's `forward . /etc/resolv.conf`: a loopback stub
	// there is the pod's own loopback, or loops back through resolved.
	if bad := loopAddrs(env, rf.File.Nameservers(), true); len(bad) > 0 {
		problems = append(problems, "lists "+strings.Join(bad, ", "))
	}
	if bad := dhcpDomains(env, rf.File.Search()); len(bad) > 0 {
		problems = append(problems, "searches DHCP domain "+strings.Join(bad, ", "))
	}
	if len(rf.File.Nameservers()) == 0 {
		problems = append(problems, "lists no nameserver")
	}
	if len(problems) > 0 {
		hint := planHint(env, policy.PendingKubelet, "", env.Config.Kubelet.ResolvConf)
		if !ours {
			hint = pointHint
		}
		return withConfig(Result{Status: Problem, Message: where + " " + strings.Join(problems, "; "), Hint: hint})
	}
	res := Result{Status: OK, Message: where + " is loop-free (" + describeResolv(rf) + ")"}
	if ours && owed {
		// docs/contract.md "kubelet.manage": the file kubelet reads after its restart is right, but
		// the running kubelet still reads the one it started with.
		res.Status, res.Hint = Problem, owedHint
		res.Message += "; but the running kubelet still reads the resolv.conf it started with until it restarts"
		if running != "" {
			res.Message = strings.Replace(res.Message, "the resolv.conf it started with", running, 1)
		}
		return withConfig(res)
	}
	if !ours {
		res.Hint = pointHint
	} else if env.Plan.Planned(env.Config.Kubelet.ResolvConf) {
		res.Message += "; out of date with the node's upstreams"
		res.Hint = hintApply
	}
	return withConfig(res)
}

// kubeletRestartOwed: kubelet.manage changed kubelet's config and kubelet has not been seen to
// restart since (nodedns's record is there and the plan does not clear it); the hint is the
// pending restart step, or apply when the plan restarts kubelet itself (kubelet.restart).
func kubeletRestartOwed(env *Env) (bool, string) {
	s, p := env.Snapshot, env.Plan
	if !env.Config.Kubelet.Manage || s.KubeletRestart == nil {
		return false, ""
	}
	for _, c := range p.Changes {
		if c.Path == node.KubeletRestartFile && c.Op == policy.OpRemove {
			return false, "" // seen restarted: apply clears the record
		}
	}
	for _, a := range p.Actions {
		if _, ok := a.(policy.RestartKubelet); ok {
			return true, hintApply
		}
	}
	var ps []policy.Pending
	for _, pd := range p.Pending {
		if slices.Contains(pd.About, policy.PendingKubelet) {
			ps = append(ps, pd)
		}
	}
	if len(ps) == 0 {
		return true, hintApply
	}
	return true, pendingHint(ps)
}
