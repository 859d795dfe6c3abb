package probes

import (
	"context"
	"fmt"
	"iter"
	"net/netip"
	"slices"
	"strings"

	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/internal/policy"
	"github.com/nodedns/nodedns/probes/podprobe"
)

// The cache's whole chain (docs/contract.md "Check ids", dns.loop): the node-local cache forwards the
// cluster domain and the reverse zones to the cluster DNS on purpose, so chainLoops leaves them out;
// but a CoreDNS pod of the cluster DNS (dnsPolicy Default: it gets kubelet's resolvConf as it was
// when the pod was made) that forwards those zones to a resolv.conf listing the cache sends them back:
// cache -> CoreDNS -> cache (docs/incidents.md "Incident 002: host_resolvconf points the node at the
// cache and a reboot loops": node-cache then dies with `Loop (...) detected for zone "in-addr.arpa."`).

// reverseZones are the reverse zones a node-local cache forwards to the cluster DNS.
var reverseZones = []string{"in-addr.arpa", "ip6.arpa"}

// ClusterForwards is what the cache sends to the cluster DNS: the cluster domain and reverse zones it
// forwards, and the addresses it forwards them to.
type ClusterForwards struct {
	Zones []string
	To    []netip.Addr
	// Assumed is true when the cache's Corefile could not be read (the cache is down or crash-looping):
	// the zones are then the ones kubespray's and the upstream node-local-dns Corefiles forward, to
	// the cluster DNS addresses nodedns knows.
	Assumed bool
}

// CacheClusterForwards reads, from the cache's forward lines, the cluster-domain and reverse zones it
// forwards to an address (a server block of one of them, or a forward FROM naming one). With no
// forward lines known it assumes kubespray's and the upstream manifest's shape.
func CacheClusterForwards(f policy.Facts, fws []Forward, known bool) ClusterForwards {
	if !known {
		return ClusterForwards{Zones: append([]string{f.ClusterDomain}, reverseZones...), To: slices.Clone(f.ClusterDNS), Assumed: true}
	}
	var cf ClusterForwards
	for _, fw := range fws {
		zones := fw.Zones
		if fw.From != "." {
			zones = []string{fw.From}
		}
		var mine []string
		for _, z := range zones {
			if f.IsClusterDomain(z) || z == "arpa" || strings.HasSuffix(z, ".arpa") {
				mine = append(mine, z)
			}
		}
		if len(mine) == 0 {
			continue
		}
		for _, to := range fw.To {
			if a, file, ok := ForwardTarget(to); ok && file == "" && !slices.Contains(cf.To, a) {
				cf.To = append(cf.To, a)
			}
		}
		for _, z := range mine {
			if !slices.Contains(cf.Zones, z) {
				cf.Zones = append(cf.Zones, z)
			}
		}
	}
	if len(cf.To) == 0 {
		return ClusterForwards{}
	}
	return cf
}

// PodLoop is a DNS server on the node (a CoreDNS pod) that sends zones the cache forwards to the
// cluster DNS back to a loop address.
type PodLoop struct {
	Server *CacheProcess
	// Zones are the zones that loop, in the cache's order.
	Zones []string
	// Via says where each loop address was found: "/etc/resolv.conf lists 169.254.25.10 (the
	// node-local cache)".
	Via []string
}

// PodLoops judges each server's chain for the zones the cache sends to the cluster DNS: the server
// block that serves the zone (CoreDNS's longest match), unless its kubernetes plugin answers the zone
// itself (no fallthrough for it), forwards it to a loop address (docs/contract.md "Loop addresses") or
// to one of the cache's cluster DNS targets, directly or through a resolv.conf file the process sees.
func PodLoops(f policy.Facts, cf ClusterForwards, servers []*CacheProcess) []PodLoop {
	loops := func(a netip.Addr) bool { return f.IsLoop(a, false) || slices.Contains(cf.To, a.Unmap()) }
	kind := func(a netip.Addr) string {
		if !f.IsLoop(a, false) {
			return "the cluster DNS the cache forwards to"
		}
		return f.LoopKind(a)
	}
	var out []PodLoop
	for _, s := range servers {
		pl := PodLoop{Server: s}
		for _, z := range cf.Zones {
			b := BlockFor(s.Blocks, z)
			if b == nil || b.Kubernetes.Answers(z) {
				continue
			}
			hit := false
			for _, fw := range b.Forwards {
				if !InZone(z, fw.From) {
					continue
				}
				for file, addrs := range s.targets(fw) {
					if file == "" {
						if a := addrs[0]; loops(a) {
							hit = true
							pl.Via = appendNew(pl.Via, fmt.Sprintf("%s line %d forwards to %s (%s)", s.Corefile, fw.Line, a, kind(a)))
						}
						continue
					}
					var bad []string
					for _, ns := range addrs {
						if loops(ns) {
							bad = append(bad, fmt.Sprintf("%s (%s)", ns.Unmap(), kind(ns)))
						}
					}
					if len(bad) > 0 {
						hit = true
						pl.Via = appendNew(pl.Via, fmt.Sprintf("%s (read through /proc/%d/root) lists %s", file, s.PID, strings.Join(bad, ", ")))
					}
				}
			}
			if hit {
				pl.Zones = append(pl.Zones, z)
			}
		}
		if len(pl.Zones) > 0 {
			out = append(out, pl)
		}
	}
	return out
}

// targets are the addresses one forward line of cp's sends to, a target at a time: an address the
// line names (file "", one address), or the nameservers of a resolv.conf file it names, as the
// process sees the file (file its path). Placeholders and files that were not read are passed over.
func (cp *CacheProcess) targets(fw Forward) iter.Seq2[string, []netip.Addr] {
	return func(yield func(string, []netip.Addr) bool) {
		for _, to := range fw.To {
			a, file, ok := ForwardTarget(to)
			switch {
			case !ok:
			case file == "":
				if !yield("", []netip.Addr{a}) {
					return
				}
			case cp.Resolv[file] != nil:
				if !yield(file, cp.Resolv[file].Nameservers()) {
					return
				}
			}
		}
	}
}

func appendNew(s []string, x string) []string {
	if slices.Contains(s, x) {
		return s
	}
	return append(s, x)
}

// ClusterDNSNamespace is the Kubernetes namespace of the cluster DNS service and of the node-local
// cache's pods: kube-system, where kubeadm's (cmd/kubeadm/app/phases/addons/dns), kubespray's,
// k3s's and RKE2's CoreDNS and every node-local-dns manifest put them. A Service's endpoints are
// pods of its own namespace only (the EndpointSlice controller selects in the Service's namespace),
// so no pod of another namespace ever gets the cache's queries for the cluster DNS.
const ClusterDNSNamespace = "kube-system"

// serverTrust says whether a DNS server FindDNSServers found may be taken for the cluster DNS's or
// the node-local cache's (docs/contract.md "Check ids", dns.loop), with the pod it runs in: why is
// "" when it may. Anyone can start a process named coredns or node-cache, in namespaces of its own or
// in a pod of theirs, bound to port 53 there; what it says must not change a verdict. So a server
// counts only when the kernel or the container runtime says whose it is:
//   - in the host's network namespace: when its uids are root's, or port 53 is privileged there
//     (only CAP_NET_BIND_SERVICE binds it: a hostNetwork pod of the cluster's, node-local-dns);
//   - in a pod's: when the runtime's record of that pod's sandbox (root's, podnet) puts it in
//     ClusterDNSNamespace. A pod's hostname is its author's choice, never proof.
func serverTrust(s *CacheProcess, pods []podprobe.Pod) (*podprobe.Pod, string) {
	if s.HostNet {
		if s.Root || s.PrivilegedPort {
			return nil, ""
		}
		return nil, "in the host's network namespace, not root's, where port 53 is not privileged"
	}
	p := podOf(s, pods)
	switch {
	case p == nil:
		return nil, "in a network namespace that is no pod's (neither in kubelet's pod cgroups nor named by a container runtime)"
	case p.Namespace == "":
		return p, "no container runtime's record says whose pod this is"
	case p.Namespace != ClusterDNSNamespace:
		return p, fmt.Sprintf("a pod of namespace %s, not %s's", p.Namespace, ClusterDNSNamespace)
	}
	return p, ""
}

// podOf is the pod whose network namespace s runs in, nil when none.
func podOf(s *CacheProcess, pods []podprobe.Pod) *podprobe.Pod {
	if s.NetNS.IsZero() {
		return nil
	}
	for i := range pods {
		if pods[i].ID == s.NetNS {
			return &pods[i]
		}
	}
	return nil
}

// dnsPodName names a DNS server process after its pod: as the container runtime records it
// (namespace/name: podNS and podName, for the hint that re-creates it), else by its pod network
// namespace's name and hostname (which its author chose: named, never taken for the pod), else the
// process alone.
func dnsPodName(s *CacheProcess, pods []podprobe.Pod) (label, podNS, podName string) {
	p := podOf(s, pods)
	switch {
	case p == nil && s.HostNet:
		return fmt.Sprintf("%s (pid %d) in the host's network namespace", s.Comm, s.PID), "", ""
	case p == nil:
		return fmt.Sprintf("%s (pid %d)", s.Comm, s.PID), "", ""
	case p.Namespace != "":
		return fmt.Sprintf("%s pod %s/%s (pid %d)", s.Comm, p.Namespace, p.PodName, s.PID), p.Namespace, p.PodName
	case p.NamedBy == podprobe.NamedByHostname && p.Netns != "":
		return fmt.Sprintf("%s in pod network namespace %s, hostname %q (pid %d)", s.Comm, p.Netns, p.Name, s.PID), "", ""
	case p.NamedBy == podprobe.NamedByHostname:
		return fmt.Sprintf("%s in a pod network namespace, hostname %q (pid %d)", s.Comm, p.Name, s.PID), "", ""
	}
	return fmt.Sprintf("%s in pod network namespace %s (pid %d)", s.Comm, p.Name, s.PID), "", ""
}

// listSome joins the first n of items and says how many more there are.
func listSome(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(items[:n], "; "), len(items)-n)
}

// podLoopResult is dns.loop's answer when DNS pods loop back through the cache: it names each pod and
// the zones, and the hint says which pods to re-create once kubelet's resolvConf is loop-free (a pod
// keeps the resolv.conf it was made with: apply alone does not reach it).
func podLoopResult(ctx context.Context, env *Env, cf ClusterForwards, pls []PodLoop, cacheLoops []string, probe string) Result {
	pods, _ := env.podNamespaces(ctx)
	var parts, recreate []string
	coredns := false
	for _, pl := range pls {
		label, podNS, podName := dnsPodName(pl.Server, pods)
		parts = append(parts, fmt.Sprintf("%s sends %s back: %s", label, strings.Join(pl.Zones, ", "), strings.Join(pl.Via, "; ")))
		if podName != "" {
			recreate = appendNew(recreate, "`kubectl -n "+podNS+" delete pod "+podName+"`")
		}
		coredns = coredns || pl.Server.Comm == "coredns"
	}
	how := fmt.Sprintf("the cache forwards %s to %s", strings.Join(cf.Zones, ", "), addrList(cf.To))
	if cf.Assumed {
		how = fmt.Sprintf("the cache's Corefile cannot be read (it is down: the loop plugin stops it), and node-local-dns forwards %s to the cluster DNS %s", strings.Join(cf.Zones, ", "), addrList(cf.To))
		if len(cf.To) == 0 {
			how = fmt.Sprintf("the cache's Corefile cannot be read (it is down: the loop plugin stops it), and node-local-dns forwards %s to the cluster DNS", strings.Join(cf.Zones, ", "))
		}
	}
	// The pod first: node-problem-detector shows the first 80 characters.
	msg := strings.Join(parts, "; ") + "; cache -> CoreDNS -> cache: " + how
	if len(cacheLoops) > 0 {
		msg += "; and the cache forwards in a loop: " + strings.Join(cacheLoops, "; ")
	}
	if probe != "" {
		msg += "; " + probe
	}
	if coredns {
		recreate = append(recreate, "`kubectl -n kube-system rollout restart deployment coredns`")
	}
	what := "re-create those pods"
	if len(recreate) > 0 {
		what += " (" + strings.Join(recreate, ", or ") + ")"
	}
	hint := "a pod keeps the resolv.conf it was made with: " + what + ", then the node-local-dns pod on this node (" + recreateNodeLocal() + ")"
	switch loops, known := kubeletResolvLoops(env); {
	case loops:
		hint = "make kubelet's resolvConf loop-free first (kubelet.resolvconf says how: " + hintApply + "); then " + hint
	case known:
		hint = "kubelet's resolvConf is loop-free, but " + hint
	}
	return Result{Status: Problem, Message: msg, Hint: hint}
}

// kubeletResolvLoops reports whether kubelet's resolvConf, what a dnsPolicy Default pod gets when it
// is made, still lists a loop address; known is false when there is no such file to read.
func kubeletResolvLoops(env *Env) (loops, known bool) {
	rf := env.Snapshot.KubeletResolv
	if rf.File == nil {
		return false, false
	}
	return len(loopAddrs(env, rf.File.Nameservers(), true)) > 0, true
}

// recreateNodeLocal is the command that re-creates this node's node-local-dns pod (hostNetwork: it has
// the node's hostname, not its own), by kubespray's label; the upstream manifest's is
// k8s-app=node-local-dns.
func recreateNodeLocal() string {
	node := "NODE"
	if h, err := nodefs.ReadKernel("/proc/sys/kernel/hostname", nodefs.Proc); err == nil && strings.TrimSpace(string(h)) != "" {
		node = strings.TrimSpace(string(h))
	}
	return "`kubectl -n kube-system delete pod -l k8s-app=nodelocaldns --field-selector spec.nodeName=" + node + "`; the upstream manifest's label is k8s-app=node-local-dns"
}
