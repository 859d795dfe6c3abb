package live_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/testutil/nstest"
	"github.com/nodedns/nodedns/probes"
)

// lrpClusterDNS is the cluster DNS service IP kubelet hands pods on the LRP node.
const lrpClusterDNS = "10.233.0.10"

// TestLRPMode is a node whose cache runs in the pod network behind a Cilium LocalRedirectPolicy
// (docs/contract.md "Cache mode"): no nodelocaldns interface and no NOTRACK rule; kubelet's
// clusterDNS is the service IP, which the CNI redirects (here: nft DNAT, at prerouting for pods and
// at output for the host, with the hairpin masqueraded as kube-proxy does) to a real CoreDNS in a pod
// network namespace. With nodeLocalDNS.mode lrp and with auto the interface, routes and iptables
// checks are skipped with the mode as the reason, and the probes (the host's and the pods') go to the
// cluster DNS IP and are answered: the node is healthy. With the redirect removed, nodelocaldns.dns
// names the cluster DNS IP. It runs on this machine's Debian only: the redirect is nft's, but the
// kernel enforces it and nodedns never reads it (the netfilter checks are skipped in this mode), so a
// newer suite's nft would change nothing nodedns sees.
func TestLRPMode(t *testing.T) {
	n, _, redirect := newLRPNode(t)
	for _, tc := range []struct {
		name string
		env  []string
		mode string
	}{
		{"nodeLocalDNS.mode lrp", []string{"NODEDNS_NODELOCALDNS_MODE=lrp"}, "cache mode lrp (nodeLocalDNS.mode: lrp)"},
		{"nodeLocalDNS.mode auto", nil, "cache mode lrp or none (auto: no nodelocaldns interface, no nodeLocalDNS.addresses, kubelet's clusterDNS 10.233.0.10 is the cluster DNS service)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, code := n.check(t, tc.env...)
			if rep.Status != probes.OK || code != 0 {
				t.Fatalf("status %s exit %d, want ok 0:\n%s", rep.Status, code, dump(rep))
			}
			got := byID(rep)
			for _, id := range []string{"nodelocaldns.interface", "nodelocaldns.routes", "nodelocaldns.iptables"} {
				if got[id].Status != probes.Skipped || !strings.HasPrefix(got[id].Message, tc.mode) {
					t.Errorf("%s: %s %q, want skipped with %q", id, got[id].Status, got[id].Message, tc.mode)
				}
			}
			for id, says := range map[string]string{
				"nodelocaldns.dns":  "the cluster DNS 10.233.0.10 (" + tc.mode + ") answers over udp and tcp",
				"nodelocaldns.pods": "the cluster DNS answers api-0, node-local-dns-x7k2p, web-0 on 10.233.0.10 over udp and tcp",
				"dns.loop":          "coredns (pid",
			} {
				if got[id].Status != probes.OK || !strings.Contains(got[id].Message, says) {
					t.Errorf("%s: %s %q, want ok saying %q", id, got[id].Status, got[id].Message, says)
				}
			}
			n.requirePodsUnchanged(t)
		})
	}

	t.Run("the redirect removed", func(t *testing.T) {
		n.nd.Run(t, "nft delete table ip nstest_lrp")
		defer n.nd.Run(t, redirect)
		rep, code := n.check(t)
		if got := problems(rep); !slices.Equal(got, []string{"nodelocaldns.dns"}) || code != 1 {
			t.Fatalf("problems %v exit %d, want exactly [nodelocaldns.dns]:\n%s", got, code, dump(rep))
		}
		r := byID(rep)["nodelocaldns.dns"]
		if !strings.Contains(r.Message, "the cluster DNS 10.233.0.10") || !strings.Contains(r.Message, "does not answer within 2s") || !strings.Contains(r.Hint, "LocalRedirectPolicy") {
			t.Errorf("nodelocaldns.dns: %s (hint %s)", r.Message, r.Hint)
		}
		if r := byID(rep)["nodelocaldns.pods"]; r.Status != probes.Unknown {
			t.Errorf("nodelocaldns.pods: %s %s, want unknown (the host is not answered either)", r.Status, r.Message)
		}
	})
}

// newLRPNode makes TestLRPMode's node: kubelet's clusterDNS the service IP 10.233.0.10, a real
// CoreDNS as node-local-dns in its kube-system pod (containerd's record of it) behind an nft DNAT of
// the service IP (the LocalRedirectPolicy's stand-in, the script that adds it returned), and the two
// client pods of addPods.
func newLRPNode(t *testing.T) (n *liveNode, cachePod *nstest.Pod, redirect string) {
	t.Helper()
	n = newLiveNode(t, nstest.Suite{}, false)
	coredns := nstest.CoreDNS(t)
	n.nd.Run(t, fmt.Sprintf(`set -e
mkdir -p /var/lib/kubelet
printf 'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nclusterDNS:\n- %s\nclusterDomain: cluster.local\nresolvConf: /etc/resolv.conf\n' > /var/lib/kubelet/config.yaml
ip route add default via %s
`, lrpClusterDNS, upstreamAddr))

	// node-local-dns in the pod network, and a client pod.
	cachePod = n.nd.AddPod(t, nstest.PodOptions{Name: "node-local-dns-x7k2p", Namespace: "kube-system", HostIf: "lxc0c0ffee0c0de",
		Cgroup: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod3e0c7a52_9b1d_4c6e_8f2a_0d4b5c6e7f80.slice/cri-containerd-cccc.scope"})
	n.addPods(t)
	n.watchPods(t, cachePod)
	corefile := filepath.Join(n.nd.Dir(), "Corefile-lrp")
	if err := os.WriteFile(corefile, []byte(fmt.Sprintf("cluster.local:53 {\n    hosts {\n        %s %s\n    }\n}\n",
		nstest.ClusterNameAddr, strings.TrimSuffix(nstest.ClusterName, "."))), 0o644); err != nil {
		t.Fatal(err)
	}
	n.nd.StartPID(t, "ip", "netns", "exec", cachePod.Netns, coredns, "-conf", corefile)
	nstest.WaitFor(t, 20*time.Second, "CoreDNS in the node-local-dns pod", func() bool {
		out, err := n.nd.Try(fmt.Sprintf("dig +tries=1 +time=1 @%s %s A", cachePod.IPv4, nstest.ClusterName))
		return err == nil && strings.Contains(out, nstest.ClusterNameAddr)
	})
	redirect = fmt.Sprintf(`set -e
nft add table ip nstest_lrp
nft add chain ip nstest_lrp pre '{ type nat hook prerouting priority -100; }'
nft add chain ip nstest_lrp out '{ type nat hook output priority -100; }'
nft add chain ip nstest_lrp post '{ type nat hook postrouting priority 100; }'
nft add rule ip nstest_lrp pre ip daddr %[1]s meta l4proto { udp, tcp } th dport 53 dnat to %[2]s
nft add rule ip nstest_lrp out ip daddr %[1]s meta l4proto { udp, tcp } th dport 53 dnat to %[2]s
nft add rule ip nstest_lrp post ip saddr %[2]s ip daddr %[2]s masquerade
`, lrpClusterDNS, cachePod.IPv4)
	n.nd.Run(t, redirect)

	return n, cachePod, redirect
}
