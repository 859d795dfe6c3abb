package live_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/testutil/nstest"
	"github.com/nodedns/nodedns/probes"
)

// chainClusterDNS is the cluster DNS service IP the node-local cache forwards the cluster zones to.
const chainClusterDNS = "10.233.0.3"

// corednsPod is the cluster's CoreDNS pod on the chain test's node.
const corednsPod = "coredns-5d78c9869d-h2k4x"

// TestLiveCacheChain is incident 002 after apply (docs/incidents.md): the node's files are loop-free,
// but the cluster's CoreDNS pod (dnsPolicy Default) kept the resolv.conf it was made with, listing the
// cache. A real CoreDNS runs as the node-local cache in kubespray's Corefile shape (cluster.local,
// in-addr.arpa and ip6.arpa forwarded to the cluster DNS IP, the rest to /etc/resolv.conf), and a
// second real CoreDNS as the cluster DNS, in a pod network namespace carrying the cluster DNS IP and in
// a mount namespace of its own (`ip netns exec`) whose /etc/resolv.conf lists 169.254.25.10: the
// reverse zones go cache -> CoreDNS -> cache. `nodedns check` exits 1 with dns.loop naming the CoreDNS
// pod and the reverse zones, and a hint that names the pod to re-create; once CoreDNS is re-created
// with a loop-free resolv.conf, dns.loop is ok and names the pod it judged. Last, the cache with
// kubespray's loop plugin dies on the loop, as node-cache does on such a node, and dns.loop still
// names CoreDNS and, in its hint, the pod to re-create; so it does through the crash loop that
// follows (the cache restarted as kubelet restarts it), whether a check finds the cache up or down. It runs on this machine's Debian only: what it proves is the chain between two
// CoreDNS (the cached static binary in every suite) and nodedns's own probes; the suite's user space
// only sets the node up (its iptables' NOTRACK rules are TestLiveChecks's, per suite).
func TestLiveCacheChain(t *testing.T) {
	n, pod := newChainNode(t)
	coredns := nstest.CoreDNS(t)
	corefile := filepath.Join(n.nd.Dir(), "Corefile-coredns")
	if err := os.WriteFile(corefile, []byte(fmt.Sprintf(`cluster.local:53 {
    errors
    hosts {
        %s %s
    }
}
.:53 {
    errors
    forward . /etc/resolv.conf
}
`, nstest.ClusterNameAddr, strings.TrimSuffix(nstest.ClusterName, "."))), 0o644); err != nil {
		t.Fatal(err)
	}
	// `ip netns exec` gives the process a mount namespace of its own with /etc/netns/NAME/resolv.conf
	// bound over /etc/resolv.conf: the pod's resolv.conf, which the node's /etc does not show.
	var corednsPID, hostPID int // as the node numbers it (what nodedns names), as this machine does
	startCoreDNS := func(t *testing.T, resolv string) {
		t.Helper()
		if corednsPID != 0 {
			stopProcess(t, hostPID)
		}
		n.nd.Run(t, fmt.Sprintf("mkdir -p /etc/netns/%[1]s && printf '%[2]s' > /etc/netns/%[1]s/resolv.conf", pod.Netns, resolv))
		_, pid := n.nd.StartPID(t, "ip", "netns", "exec", pod.Netns, coredns, "-conf", corefile)
		nstest.WaitFor(t, 20*time.Second, "CoreDNS in its pod", func() bool {
			out, err := n.nd.Try(fmt.Sprintf("dig +tries=1 +time=1 @%s %s A", chainClusterDNS, nstest.ClusterName))
			return err == nil && strings.Contains(out, nstest.ClusterNameAddr)
		})
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/root/etc/resolv.conf", pid))
		if err != nil || string(data) != strings.ReplaceAll(resolv, `\n`, "\n") {
			t.Fatalf("CoreDNS's own /etc/resolv.conf: %q, %v; want %q", data, err, resolv)
		}
		if node := n.nd.Run(t, "cat /etc/resolv.conf"); strings.Contains(node, cacheAddr) {
			t.Fatalf("the node's /etc/resolv.conf lists the cache: %q", node)
		}
		corednsPID = nodePID(t, pid)
		hostPID = pid
	}
	startCoreDNS(t, `nameserver `+cacheAddr+`\n`)
	n.cache = n.nd.StartCache(t, nstest.CacheOptions{Forward: "/etc/resolv.conf", ClusterDNS: netip.MustParseAddr(chainClusterDNS)})
	if cf, _ := os.ReadFile(n.cache.Corefile); !strings.Contains(string(cf), "in-addr.arpa:53 {") || !strings.Contains(string(cf), "forward . "+chainClusterDNS) {
		t.Fatalf("the cache's Corefile is not kubespray's shape:\n%s", cf)
	}

	t.Run("CoreDNS's resolv.conf lists the cache", func(t *testing.T) {
		rep, code := n.check(t)
		if got := problems(rep); !slices.Equal(got, []string{"dns.loop"}) || code != 1 {
			t.Fatalf("problems %v exit %d, want exactly [dns.loop] exit 1:\n%s", got, code, dump(rep))
		}
		r := byID(rep)["dns.loop"]
		for _, s := range []string{
			"cache -> CoreDNS -> cache",
			"the cache forwards cluster.local, in-addr.arpa, ip6.arpa to " + chainClusterDNS,
			fmt.Sprintf("coredns pod kube-system/%s (pid ", corednsPod),
			"sends in-addr.arpa, ip6.arpa back",
			"/etc/resolv.conf (read through /proc/",
			"lists 169.254.25.10 (the node-local cache)",
		} {
			if !strings.Contains(r.Message, s) {
				t.Errorf("dns.loop does not say %q: %s", s, r.Message)
			}
		}
		for _, s := range []string{"kubectl -n kube-system delete pod " + corednsPod, "kubectl -n kube-system rollout restart deployment coredns", "kubelet's resolvConf is loop-free", "spec.nodeName=node-1"} {
			if !strings.Contains(r.Hint, s) {
				t.Errorf("dns.loop's hint does not say %q: %s", s, r.Hint)
			}
		}
		if strings.Contains(r.Hint, "nodedns apply") {
			t.Errorf("dns.loop's hint sends to apply, which has nothing left to do: %s", r.Hint)
		}
		t.Logf("dns.loop: %s\nhint: %s", r.Message, r.Hint)
		out, _ := n.nd.Cmd(context.Background(), n.bin, "check", "--npd").Output()
		if line := strings.TrimSuffix(string(out), "\n"); len(line) > probes.NPDMaxLen || !strings.HasPrefix(line, "dns.loop: coredns pod kube-system/"+corednsPod) {
			t.Errorf("--npd printed %q: want the CoreDNS pod within %d characters", line, probes.NPDMaxLen)
		}
		n.requirePodsUnchanged(t)
	})

	t.Run("CoreDNS re-created with a loop-free resolv.conf", func(t *testing.T) {
		startCoreDNS(t, `nameserver `+upstreamAddr+`\n`)
		rep := n.requireHealthy(t, "CoreDNS re-created")
		if r := byID(rep)["dns.loop"]; !strings.Contains(r.Message, fmt.Sprintf("coredns pod kube-system/%s (pid %d): cluster.local, in-addr.arpa, ip6.arpa not sent back to a loop address", corednsPod, corednsPID)) {
			t.Errorf("dns.loop does not name the CoreDNS pod it judged: %s", r.Message)
		}
	})

	t.Run("the cache's loop plugin stops it", func(t *testing.T) {
		startCoreDNS(t, `nameserver `+cacheAddr+`\n`)
		n.cache.Stop()
		// kubespray's Corefile with its loop plugin: node-cache's own start on such a node.
		bin := coredns
		loopCorefile := filepath.Join(n.nd.Dir(), "Corefile-loop")
		cf, err := os.ReadFile(n.cache.Corefile)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(loopCorefile, []byte(strings.ReplaceAll(string(cf), "    errors\n", "    errors\n    loop\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := n.nd.Start(t, bin, "-conf", loopCorefile)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err == nil {
				t.Fatal("the cache exited cleanly on a loop")
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the cache's loop plugin did not stop it within 30s: no loop through CoreDNS?")
		}
		// What node-cache logs on incident 002's node: the loop runs through CoreDNS's pod address.
		logf, _ := cmd.Stdout.(*os.File)
		if logf == nil {
			t.Fatal("no log of the cache")
		}
		log, err := os.ReadFile(logf.Name())
		if err != nil || !strings.Contains(string(log), "Loop (") || !strings.Contains(string(log), ".arpa.\"") || !strings.Contains(string(log), fmt.Sprintf("%s:", pod.HostIPv4)) && !strings.Contains(string(log), fmt.Sprintf("%s:", pod.IPv4)) {
			t.Fatalf("the cache did not stop on a loop through CoreDNS (%v):\n%s", err, log)
		}
		t.Logf("the cache stopped: %s", lastLine(string(log)))
		defer func() {
			startCoreDNS(t, `nameserver `+upstreamAddr+`\n`)
			n.cache.Start(t)
			n.requireHealthy(t, "after the loop plugin case")
		}()
		// kubespray's kubelet names only the cache (clusterDNS 169.254.25.10): the CoreDNS service IP
		// is unknown unless nodedns's config names it.
		for _, env := range [][]string{nil, {"NODEDNS_CLUSTERDNS=" + chainClusterDNS}} {
			rep, code := n.check(t, env...)
			r := byID(rep)["dns.loop"]
			if r.Status != probes.Problem || code != 1 {
				t.Fatalf("%v: dns.loop %s exit %d, want problem exit 1:\n%s", env, r.Status, code, dump(rep))
			}
			says := []string{"the cache's Corefile cannot be read", fmt.Sprintf("coredns pod kube-system/%s (pid %d) sends in-addr.arpa, ip6.arpa back", corednsPod, corednsPID), "169.254.25.10 (the node-local cache)"}
			if env != nil {
				says = append(says, "to the cluster DNS "+chainClusterDNS)
			}
			for _, s := range says {
				if !strings.Contains(r.Message, s) {
					t.Errorf("%v: dns.loop does not say %q: %s", env, s, r.Message)
				}
			}
			// The crash loop's cause and its fix, named while the cache is down: kubelet's file
			// is loop-free here, so the pod to re-create, not apply.
			for _, s := range []string{"kubectl -n kube-system delete pod " + corednsPod, "kubelet's resolvConf is loop-free"} {
				if !strings.Contains(r.Hint, s) {
					t.Errorf("%v: dns.loop's hint with the cache down does not say %q: %s", env, s, r.Hint)
				}
			}
			if strings.Contains(r.Hint, "nodedns apply") {
				t.Errorf("%v: dns.loop's hint with the cache down sends to apply, which has nothing left to do: %s", env, r.Hint)
			}
			t.Logf("%v: with the cache down, dns.loop: %s\nhint: %s", env, r.Message, r.Hint)
		}

		// The crash loop itself, as kubelet restarts the container: the cache binds, its loop plugin
		// stops it, it starts again. Whenever check runs, up or down, dns.loop names the pod.
		stop := filepath.Join(n.nd.Dir(), "crashloop-stop")
		starts := filepath.Join(n.nd.Dir(), "crashloop-starts")
		loop := n.nd.Start(t, "sh", "-c", fmt.Sprintf(`while [ ! -e %s ]; do echo >> %s; %s -conf %s; sleep 0.2; done`, stop, starts, bin, loopCorefile))
		defer func() {
			// Before the healthy cache comes back: the running CoreDNS still stops on its own.
			if err := os.WriteFile(stop, nil, 0o644); err != nil {
				t.Error(err)
			}
			if err := loop.Wait(); err != nil {
				t.Errorf("the crash loop: %v", err)
			}
		}()
		for i := range 3 {
			rep, code := n.check(t)
			r := byID(rep)["dns.loop"]
			if r.Status != probes.Problem || code != 1 {
				t.Fatalf("check %d in the crash loop: dns.loop %s exit %d, want problem exit 1:\n%s", i, r.Status, code, dump(rep))
			}
			if s := fmt.Sprintf("coredns pod kube-system/%s (pid %d) sends in-addr.arpa, ip6.arpa back", corednsPod, corednsPID); !strings.Contains(r.Message, s) {
				t.Errorf("check %d in the crash loop: dns.loop does not say %q: %s", i, s, r.Message)
			}
			if s := "kubectl -n kube-system delete pod " + corednsPod; !strings.Contains(r.Hint, s) {
				t.Errorf("check %d in the crash loop: dns.loop's hint does not say %q: %s", i, s, r.Hint)
			}
		}
		// At least two starts: the checks ran across a restart, not beside one long-lived cache.
		deadline := time.Now().Add(60 * time.Second)
		for {
			data, _ := os.ReadFile(starts)
			if n := strings.Count(string(data), "\n"); n >= 2 {
				t.Logf("the cache started %d times in the crash loop", n)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the cache did not restart in the crash loop: %q", data)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}

// newChainNode makes the chain tests' node: kubelet handing pods the cache on both families, and the
// cluster DNS's pod (kube-system, as containerd records it), the service IP on the pod's loopback and
// routed to it (as kube-proxy or Cilium deliver the service IP to an endpoint on this node); no
// CoreDNS runs in it yet, and no cache.
func newChainNode(t *testing.T) (*liveNode, *nstest.Pod) {
	t.Helper()
	n := newLiveNode(t, nstest.Suite{}, false)
	n.nd.Run(t, fmt.Sprintf(`set -e
mkdir -p /var/lib/kubelet
printf 'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nclusterDNS:\n- %s\n- %s\nclusterDomain: cluster.local\n' > /var/lib/kubelet/config.yaml
`, cacheAddr, cacheAddr6))
	pod := n.nd.AddPod(t, nstest.PodOptions{Name: corednsPod, Namespace: "kube-system", HostIf: "lxc5e1d0c0ffee1",
		Cgroup: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod7c1e2d3f_4a5b_4c6d_8e7f_8091a2b3c4d5.slice/cri-containerd-dddd.scope"})
	pod.Run(t, "ip addr add "+chainClusterDNS+"/32 dev lo")
	n.nd.Run(t, fmt.Sprintf("ip route add %s/32 via %s", chainClusterDNS, pod.IPv4))
	n.watchPods(t, pod)
	return n, pod
}

// nodePID is pid's number in the node sandbox's PID namespace (the last NSpid of /proc/PID/status).
func nodePID(t *testing.T, pid int) int {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(l, "NSpid:"); ok {
			f := strings.Fields(rest)
			if n, err := strconv.Atoi(f[len(f)-1]); err == nil {
				return n
			}
		}
	}
	t.Fatalf("process %d: no NSpid line", pid)
	return 0
}

// stopProcess ends a process this test started (by its PID on this machine) and waits until it is gone.
func stopProcess(t *testing.T, pid int) {
	t.Helper()
	_ = syscall.Kill(pid, syscall.SIGTERM)
	nstest.WaitFor(t, 10*time.Second, fmt.Sprintf("process %d to exit", pid), func() bool {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
		return err != nil
	})
}

func lastLine(s string) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return l[len(l)-1]
}

// TestLiveNotrackFirstSync: a real cache process named node-cache (CoreDNS under that name: what
// nodedns knows node-cache by) that has just started, with no NOTRACK rule yet. node-cache adds them
// at its first sync tick, about 60 s after start, so nodelocaldns.iptables is unknown and says to
// wait (or `check --wait 90s`), never to restart the pod, which would restart the wait. Every other
// check is ok. Per suite: the raw table nodedns reads is the one the suite's iptables left after
// `iptables -t raw -F` (nf_tables chains emptied, not deleted), and the rules put back are its own.
func TestLiveNotrackFirstSync(t *testing.T) { nstest.Suites(t, testLiveNotrackFirstSync) }

func testLiveNotrackFirstSync(t *testing.T, s nstest.Suite) {
	n := newLiveNode(t, s, true)
	n.cache.Stop()
	nodeCache := filepath.Join(n.nd.Dir(), "node-cache")
	if err := os.Symlink(nstest.CoreDNS(t), nodeCache); err != nil {
		t.Fatal(err)
	}
	_, pid := n.nd.StartPID(t, nodeCache, "-conf", n.cache.Corefile)
	defer stopProcess(t, pid)
	for _, a := range []string{cacheAddr, cacheAddr6} {
		nstest.WaitFor(t, 20*time.Second, "node-cache on "+a, func() bool {
			out, err := n.nd.Try(fmt.Sprintf("dig +tries=1 +time=1 @%s %s A", a, nstest.ClusterName))
			return err == nil && strings.Contains(out, nstest.ClusterNameAddr)
		})
	}
	if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) != "node-cache" {
		t.Fatalf("the cache process is %q, not node-cache", comm)
	}
	n.nd.Run(t, "iptables -t raw -F && ip6tables -t raw -F")
	rep, code := n.check(t)
	r := byID(rep)["nodelocaldns.iptables"]
	if got := problems(rep); len(got) != 0 || code != 2 || r.Status != probes.Unknown {
		t.Fatalf("problems %v exit %d, nodelocaldns.iptables %s; want no problem, exit 2 and unknown:\n%s", got, code, r.Status, dump(rep))
	}
	for _, s := range []string{fmt.Sprintf("node-cache (pid %d) started ", nodePID(t, pid)), "first sync tick, about 60s after start", "missing for 169.254.25.10"} {
		if !strings.Contains(r.Message, s) {
			t.Errorf("nodelocaldns.iptables does not say %q: %s", s, r.Message)
		}
	}
	if !strings.Contains(r.Hint, "nodedns check --wait 90s") || strings.Contains(r.Hint, "restart its pod on this node") {
		t.Errorf("the hint: %s; want the wait, not a restart", r.Hint)
	}
	t.Logf("nodelocaldns.iptables: %s\nhint: %s", r.Message, r.Hint)
	for _, c := range rep.Checks {
		if c.ID != "nodelocaldns.iptables" && c.Status != probes.OK && c.Status != probes.Skipped {
			t.Errorf("%s is %s: %s", c.ID, c.Status, c.Message)
		}
	}
	for _, a := range n.cache.Addrs {
		n.cache.Notrack(t, "-A", a)
	}
}
