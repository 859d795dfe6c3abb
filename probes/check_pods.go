package probes

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/nodedns/nodedns/probes/podprobe"
)

// nodelocalPods is nodelocaldns.pods: the cache asked from where pods stand. A query from the host
// need not take the pods' datapath (docs/incidents.md, incident 000: Cilium's BPF host routing drops
// pod traffic to the node-local address while the host is answered; incident 004: an ip rule sends
// one pod interface's traffic around the local table), so the same question is sent from inside up
// to probes.maxPods pod network namespaces, all at once within one probes.timeout, and compared with
// the host's answers of the same round. Nothing is created or changed inside a pod's namespace but
// the query sockets (podnet).
type nodelocalPods struct{}

func (nodelocalPods) ID() string { return "nodelocaldns.pods" }

// podAccessHint says what nodedns needs to see and enter the pods' namespaces.
const podAccessHint = "run nodedns as root in the host's PID namespace (the packaged unit does; a container needs hostPID: true, CAP_SYS_ADMIN to enter the namespaces and CAP_SYS_PTRACE to read other users' /proc entries)"

func (nodelocalPods) Run(ctx context.Context, env *Env) Result {
	l := env.Host
	if l == nil {
		return liveSkipped()
	}
	maxPods := env.Config.Probes.MaxPods
	if maxPods <= 0 {
		return Result{Status: Skipped, Message: "probes.maxPods is 0: the cache is not asked from inside pods"}
	}
	if l.Pods == nil || l.ProbePods == nil {
		return Result{Status: Skipped, Message: "pod network namespaces are not looked for here"}
	}
	pods, err := env.podNamespaces(ctx)
	if err != nil {
		return Result{Status: Unknown, Message: "the pod network namespaces cannot be listed: " + err.Error(), Hint: podAccessHint}
	}
	if len(pods) == 0 {
		msg := "no pod network namespace on this node yet (kubepods cgroups, /run/netns)"
		if l.HostPIDNS != nil && !l.HostPIDNS() {
			// Not a verdict on the node: a container without hostPID sees only its own processes.
			msg += "; nodedns runs in a PID namespace of its own, where only its own processes are visible"
		}
		return Result{Status: Skipped, Message: msg}
	}

	p := env.probeCache(ctx)
	what := "the cache"
	if !p.mode.Interface() {
		what = "the cluster DNS"
	}
	targets := p.answeredOn()
	if len(targets) == 0 {
		return Result{Status: Unknown, Message: fmt.Sprintf("%s does not answer the host either (see nodelocaldns.dns): whether the %d pod network namespaces reach it cannot be told", what, len(pods))}
	}
	probed := pickPods(pods, maxPods)
	rep := l.ProbePods(ctx, probed, podprobe.Query{Name: clusterName(env), Targets: targets, Timeout: env.Config.Probes.Timeout})
	if rep.HostErr != nil {
		return Result{Status: Unknown, Message: "the host's comparison queries could not be sent: " + rep.HostErr.Error()}
	}

	var entered []string
	var notEntered []string
	var firstErr error
	for _, pr := range rep.Pods {
		if pr.Err != nil {
			notEntered = append(notEntered, pr.Pod.Name)
			if firstErr == nil {
				firstErr = pr.Err
			}
			continue
		}
		entered = append(entered, pr.Pod.Name)
	}
	if len(entered) == 0 {
		return Result{Status: Unknown, Message: fmt.Sprintf("no pod network namespace could be entered (%s): %v", strings.Join(notEntered, ", "), firstErr), Hint: podAccessHint}
	}
	of := fmt.Sprintf("%d pod network namespaces", len(entered))
	if len(pods) > len(probed) {
		of += fmt.Sprintf(" (%d of %d, probes.maxPods, every kind of host-side interface among them)", len(probed), len(pods))
	}
	if len(notEntered) > 0 {
		of += fmt.Sprintf("; %s could not be entered (gone meanwhile?): %v", strings.Join(notEntered, ", "), firstErr)
	}

	failures := rep.Failures()
	if len(failures) == 0 {
		names := strings.Join(entered, ", ")
		if len(entered) > maxNamed {
			names = fmt.Sprintf("%s and %d more", strings.Join(entered[:maxNamed], ", "), len(entered)-maxNamed)
		}
		return Result{Status: OK, Message: fmt.Sprintf("%s answers %s on %s over udp and tcp, as it answers the host: %s (%s)",
			what, names, addrList(targets), of, rep.Elapsed.Round(1e6))}
	}
	var labels, each []string
	for _, f := range failures {
		labels = append(labels, podLabel(f.Pod))
		each = append(each, f.Pod.Name+": "+failedQueries(f.Results, len(targets)))
	}
	verb := "gets"
	if len(failures) > 1 {
		verb = "get"
	}
	// The pods come first: node-problem-detector keeps only the first 80 characters.
	msg := fmt.Sprintf("%s %s no answer from %s on %s, which answers the host (%d of %d pods): %s; probed from %s",
		strings.Join(labels, ", "), verb, what, addrList(targets), len(failures), len(entered), strings.Join(each, "; "), of)
	return Result{Status: Problem, Message: msg, Hint: podsHint(env, p.mode.Interface(), failures, targets)}
}

// maxNamed bounds how many answered pods an ok message names.
const maxNamed = 8

// cniPrefixes are the host-side interface names CNIs give pod veths (Cilium lxc…, AWS VPC CNI eni…
// and branch-ENI vlan…, Calico cali…, generic veth…, GKE gke…, Azure azv…): pods behind different
// kinds take different datapaths (docs/incidents.md, incident 004 cuts off the vlan… pods only).
var cniPrefixes = []string{"lxc", "vlan", "eni", "cali", "veth", "gke", "azv", "tap", "cni"}

// ifKind is the kind of a host-side interface: its CNI prefix, else its first three characters.
func ifKind(name string) string {
	for _, p := range cniPrefixes {
		if strings.HasPrefix(name, p) {
			return p
		}
	}
	return name[:min(len(name), 3)]
}

// pickPods picks at most max pods to probe, stable from run to run: round-robin over the kinds of
// host-side interface, each kind in name order, so that with more pods than probes.maxPods every
// datapath present is still asked from (a few branch-ENI pods among hundreds of others).
func pickPods(pods []podprobe.Pod, max int) []podprobe.Pod {
	if len(pods) <= max {
		return pods
	}
	var kinds []string
	byKind := map[string][]podprobe.Pod{}
	for _, p := range pods {
		k := ifKind(p.HostIf)
		if _, ok := byKind[k]; !ok {
			kinds = append(kinds, k)
		}
		byKind[k] = append(byKind[k], p)
	}
	var out []podprobe.Pod
	for i := 0; len(out) < max; i++ {
		for _, k := range kinds {
			if i < len(byKind[k]) && len(out) < max {
				out = append(out, byKind[k][i])
			}
		}
	}
	slices.SortStableFunc(out, func(a, b podprobe.Pod) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// failedQueries describes a pod's failed queries: one outcome for all when every query to every
// target failed alike, else each query.
func failedQueries(rs []podprobe.Result, targets int) string {
	same := len(rs) == 2*targets
	var addrs []netip.Addr
	for _, r := range rs {
		same = same && r.Outcome == rs[0].Outcome && r.Outcome != podprobe.Error
		if !slices.Contains(addrs, r.Addr) {
			addrs = append(addrs, r.Addr)
		}
	}
	if same {
		return fmt.Sprintf("%s on %s over udp and tcp", rs[0].Outcome, addrList(addrs))
	}
	var out []string
	for _, r := range rs {
		out = append(out, r.String())
	}
	return strings.Join(out, ", ")
}

// podLabel names a pod with the host-side interface its traffic arrives on.
func podLabel(p podprobe.Pod) string {
	if p.HostIf == "" {
		return p.Name + " (host-side interface not found)"
	}
	return p.Name + " (host side " + p.HostIf + ")"
}

// podsHint names the likely cause of pods cut off from a cache the host reaches
// (docs/contract.md "Check ids", nodelocaldns.pods): a policy rule ahead of the local table that
// catches a failing pod's interface (incident 004), else Cilium when its interfaces are on the node
// (incident 000), else the CNI's datapath in general.
func podsHint(env *Env, iface bool, failures []podprobe.PodResult, targets []netip.Addr) string {
	nv := env.Host.netState(env.Config.NodeLocalDNS.Interface)
	bypass, _ := RuleBypasses(nv.rules, targets)
	var rules []string
	for _, f := range failures {
		for _, b := range bypass {
			if b.Rule.IIF == "" || b.Rule.IIF != f.Pod.HostIf {
				continue
			}
			r := fmt.Sprintf("`%s` sends what %s sends to %s around the local table", ruleString(b.Rule), f.Pod.Name, b.Addr)
			if !slices.Contains(rules, r) {
				rules = append(rules, r)
			}
		}
	}
	if len(rules) > 0 {
		return strings.Join(rules, "; ") + " (AWS VPC CNI security groups for pods: set POD_SECURITY_GROUP_ENFORCING_MODE=standard on the aws-node daemonset and restart those pods, docs/incidents.md incident 004; see nodelocaldns.routes for the rule that puts the local table first)"
	}
	cilium, err := env.Host.Net.Link("cilium_host")
	switch {
	case err == nil && cilium != nil && !iface:
		return "Cilium does not redirect these pods' queries for the cluster DNS address to the cache: check the LocalRedirectPolicy (cilium-dbg lrp list) and that the node-local-dns pod on this node is ready"
	case err == nil && cilium != nil:
		return "Cilium's datapath drops pod traffic to the node-local address while the host's own queries pass (BPF host routing, cilium#36761, docs/incidents.md incident 000): set bpf.hostLegacyRouting=true and restart the Cilium agent, or run node-local-dns in the pod network behind a LocalRedirectPolicy (nodeLocalDNS.mode: lrp)"
	}
	return "the CNI's datapath drops or diverts these pods' traffic to " + addrList(targets) + " before it reaches the cache (network policies, BPF programs or netfilter rules on their host-side interfaces): trace a query from one of them (tcpdump on its host-side interface)"
}

// podsBehind names the pods whose host-side interface is ifname (nodelocaldns.routes: the pods a
// rule on that interface cuts off).
func podsBehind(ctx context.Context, env *Env, ifname string) []string {
	if env.Host.Pods == nil || env.Config.Probes.MaxPods <= 0 {
		return nil
	}
	pods, _ := env.podNamespaces(ctx)
	var out []string
	for _, p := range pods {
		if p.HostIf == ifname {
			out = append(out, p.Name)
		}
	}
	return out
}
