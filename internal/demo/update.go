package demo

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/nodedns/nodedns/internal/standby/statefile"
	"github.com/nodedns/nodedns/internal/testutil/nstest"
)

// The rolling update's timing: the replacement starts ReplaceAfter the SIGTERM (kubelet starting the
// DaemonSet's next pod), and the pod's lookups are counted over UpdateWindow from the SIGTERM, as the
// standby's live tests and `make bench` (cmd/nodedns BenchmarkStandbyRollingUpdate) measure it.
const (
	ReplaceAfter = 3 * time.Second
	UpdateWindow = 10 * time.Second
)

// Update is what the rolling-update scene measured: a pod's lookups through the cache address over
// the UpdateWindow from node-cache's SIGTERM, once without nodedns and once with `nodedns run` and
// nodeLocalDNS.standby on.
type Update struct {
	Title         string
	Without, With nstest.Window
	// Control is a second resolver in the same pod asking the cluster DNS directly over With's
	// window, which the update does not touch: what the machine's load alone cost a resolver
	// (nstest.GapAllowed).
	Control nstest.Window
	// Check is `nodedns check`'s nodelocaldns.standby after the update ("ok: ..."). PutBack is what
	// it says nodedns put back, Took how long after the kernel's event (Gone) it was back;
	// TakenOver: it says the replacement took it over.
	Check     string
	PutBack   string
	Took      time.Duration
	Gone      string
	TakenOver bool
	// Rules counts node-cache's rules for the cache address while it runs; TornDown says what
	// its teardown left without nodedns, once it had exited: whether its interface was still
	// there, and how many of its rules.
	Rules    int
	TornDown struct {
		Link  bool
		Rules int
	}
	Elapsed time.Duration
}

// kubeletConfig is where kubespray writes kubelet's config (roles/kubernetes/node/tasks/kubelet.yml:
// kubelet-config.v1beta1.yaml.j2 to {{ kube_config_dir }}/kubelet-config.yaml), here handing pods
// the cache address.
const kubeletConfig = "/etc/kubernetes/kubelet-config.yaml"

// rollingUpdate is a node-local-dns rolling update on a kubespray node. kubespray's DaemonSet
// (roles/kubernetes-apps/ansible/templates/nodelocaldns-daemonset.yml.j2) runs node-cache with
// `-localip 169.254.25.10 -conf /etc/Corefile -upstreamsvc coredns` and passes -skipteardown only to
// its secondary DaemonSet, so on SIGTERM node-cache's teardown deletes its rules and its interface
// (kubernetes/dns cmd/node-cache/app/cache_app.go TeardownNetworking) before it exits: the cache
// address is off the node until the replacement binds. node-cache cannot be built here (the module
// proxy refuses k8s.io/dns); nstest.NodeCache is its model from that source, around a real CoreDNS
// in kubespray's Corefile. A pod resolves through the cache address 100 times a second.
func (d *demo) rollingUpdate() Update {
	t := d.t
	start := time.Now()
	u := Update{Title: "kubespray's DaemonSet has no -skipteardown, so node-cache's teardown takes the cache address off the node"}
	d.printf("node-local-dns rolling update: %s\n", u.Title)
	n := d.newNode("ens33", false, false)
	n.sb.Run(t, fmt.Sprintf(`set -e
printf 'nameserver %[1]s\n' > /etc/resolv.conf
mkdir -p /etc/kubernetes
cat > %[3]s <<'END'
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
clusterDomain: cluster.local
clusterDNS:
- %[2]s
resolvConf: "/etc/resolv.conf"
END
`, lanDNS, cacheAddr, kubeletConfig))
	corefile := filepath.Join(n.sb.Dir(), "Corefile-node-cache")
	must(t, os.WriteFile(corefile, []byte(kubesprayCorefile), 0o644))
	addr := netip.MustParseAddr(cacheAddr)
	nc := &nstest.NodeCache{Addr: addr, Corefile: corefile}
	n.sb.StartNodeCache(t, nc, clusterName+".", clusterAddr)
	u.Rules = n.sb.CountRules(t, nc.Iptables, addr)
	pod := n.sb.AddPod(t, nstest.PodOptions{Name: "resolver"})
	r := nstest.StartResolver(t, pod, cacheAddr,
		nstest.Question{Name: clusterName + ".", Addr: clusterAddr}, nstest.Question{Name: outsideName + ".", Addr: outsideAddr})
	ctl := nstest.StartResolver(t, pod, clusterDNS, nstest.Question{Name: clusterName + ".", Addr: clusterAddr})
	d.printf("  node: node-cache with kubespray's args (-localip %s, its Corefile, no -skipteardown; modelled from\n", cacheAddr)
	d.printf("  its source around a real CoreDNS), %d rules; a pod asks %s 100 times a second, every fifth over TCP.\n", u.Rules, cacheAddr)
	d.printf("  Each update: SIGTERM to node-cache (its teardown deletes its rules, then its interface), the replacement %v later.\n", ReplaceAfter)
	nstest.WaitFor(t, 10*time.Second, "the pod's lookups through the cache to be answered", func() bool {
		w := r.Window(time.Now().Add(-time.Second), time.Now())
		return w.AnsweredShare() >= 0.99 && w.Rate >= 50
	})

	from, to := n.roll(nc, func() {
		_, err := n.sb.Try("ip link show nodelocaldns")
		u.TornDown.Link, u.TornDown.Rules = err == nil, n.sb.CountRules(t, nc.Iptables, addr)
	})
	u.Without = r.Window(from, to)

	cfg := filepath.Join(n.sb.Dir(), "nodedns.yaml")
	must(t, os.WriteFile(cfg, []byte("netplan:\n  mode: \"off\"\nnodeLocalDNS:\n  standby: on\n"), 0o644))
	// Ready once it has read node-cache's footprint (its interface, address and rules), which it
	// reads while the cache serves.
	rules := fmt.Sprintf("%d rules", u.Rules)
	n.runNodedns(cfg, func() bool {
		st, err := n.standbyState()
		return err == nil && st.State == statefile.Ready && strings.Contains(st.Footprint, rules)
	})
	from, to = n.roll(nc, nil)
	u.With, u.Control = r.Window(from, to), ctl.Window(from, to)
	nstest.WaitFor(t, 10*time.Second, "the replacement to take over what nodedns put back", func() bool {
		st, err := n.standbyState()
		return err == nil && st.State == statefile.Ready && (st.PutBack == nil || !st.PutBack.Adopted.IsZero())
	})
	u.Check = n.standbyCheck(cfg)
	if m := putBackRe.FindStringSubmatch(u.Check); m != nil {
		took, err := time.ParseDuration(m[3])
		if err != nil {
			t.Fatalf("nodelocaldns.standby says nodedns put back %s %q later: %v", m[2], m[3], err)
		}
		u.Gone, u.PutBack, u.Took, u.TakenOver = m[1], m[2], took, m[4] != ""
	}
	u.Elapsed = time.Since(start)
	d.reportUpdate(u)
	return u
}

// roll is one update as kubelet runs it: SIGTERM to node-cache, which runs its teardown and exits
// (then exited runs, when set), its replacement started ReplaceAfter the SIGTERM. It returns the
// UpdateWindow from the SIGTERM, once it has passed.
func (n *node) roll(nc *nstest.NodeCache, exited func()) (from, to time.Time) {
	t := n.d.t
	from = time.Now()
	nc.Terminate(t)
	if exited != nil {
		exited()
	}
	time.Sleep(time.Until(from.Add(ReplaceAfter)))
	n.sb.StartNodeCache(t, nc, clusterName+".", clusterAddr)
	to = from.Add(UpdateWindow)
	time.Sleep(time.Until(to))
	return from, to
}

// standbyState reads the standby's state file in the node.
func (n *node) standbyState() (statefile.Status, error) {
	data, err := os.ReadFile(n.sb.Path(statefile.Path))
	if err != nil {
		return statefile.Status{}, err
	}
	return statefile.Parse(statefile.Path, data)
}

// standbyCheck runs `nodedns check -o json` in the node and returns nodelocaldns.standby's status
// and message ("ok: ..."). The check's exit status is not asked: other checks may see problems in
// the demo's node (it has no kubelet running).
func (n *node) standbyCheck(cfg string) string {
	t := n.d.t
	out, _ := n.nodedns(cfg, "check", "-o", "json")
	var rep struct {
		Checks []struct{ ID, Status, Message string }
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("nodedns check -o json: %v\n%s", err, out)
	}
	for _, c := range rep.Checks {
		if c.ID == "nodelocaldns.standby" {
			return c.Status + ": " + c.Message
		}
	}
	t.Fatalf("nodedns check -o json has no nodelocaldns.standby:\n%s", out)
	return ""
}

// putBackRe reads what nodelocaldns.standby says was put back (probes/check_standby.go putBack):
// the kernel's event, what, how long after it, and whether node-cache took it over.
var putBackRe = regexp.MustCompile(`; at \S+ ([^:]+): nodedns put back (.+) \(([^()]+) later\)(; node-cache took it over)?`)

// reportUpdate prints the scene's figures side by side.
func (d *demo) reportUpdate(u Update) {
	row := func(what, without, with string) {
		d.printf("  %-32s %-38s %s\n", what, without, with)
	}
	answered := func(w nstest.Window) string {
		return fmt.Sprintf("%d of %d (%.1f%%)", w.Answered, w.Asked, 100*w.AnsweredShare())
	}
	gap := func(w nstest.Window) string { return fmt.Sprintf("%d ms", w.LongestGap.Milliseconds()) }
	row("", "without nodedns", "with nodedns run, standby: on")
	row(fmt.Sprintf("answered, the %v from SIGTERM", UpdateWindow), answered(u.Without), answered(u.With))
	row("longest gap without an answer", gap(u.Without), gap(u.With))
	torn := fmt.Sprintf("interface and %d of %d rules gone", u.Rules-u.TornDown.Rules, u.Rules)
	if u.TornDown.Link {
		torn = fmt.Sprintf("%d of %d rules gone, the interface NOT", u.Rules-u.TornDown.Rules, u.Rules)
	}
	back := "nothing put back"
	if u.PutBack != "" {
		back = fmt.Sprintf("put back in %.1f ms", float64(u.Took.Microseconds())/1000)
	}
	row("after node-cache's teardown", torn, back)
	if u.PutBack == "" {
		d.printf("  nodedns check: nodelocaldns.standby %s\n", u.Check)
	} else {
		// The kernel's event (u.Gone) is left out: the address's RTM_DELADDR and the interface's
		// RTM_DELLINK come in either order.
		d.printf("  nodedns run put back %s\n", u.PutBack)
	}
	over := "the replacement took it over, and the address from the standby."
	if !u.TakenOver {
		over = "the replacement has NOT taken over what nodedns put back."
	}
	d.printf("  (nodedns check, nodelocaldns.standby); %s (%.1fs)\n\n", over, u.Elapsed.Seconds())
}
