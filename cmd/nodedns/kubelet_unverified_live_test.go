package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/testutil/nstest"
	"github.com/nodedns/nodedns/probes"
)

// TestKubeletUnverifiedLive (docs/contract.md "kubelet.manage"): nodedns with only the packaged
// unit's capabilities (CAP_NET_ADMIN, CAP_CHOWN: no ptrace access to root's kubelet) cannot verify a
// running kubelet that no unit of systemd's started (here: started by hand, in the test's cgroup):
// check names it as not verified, with what the kernel did not show and why its cgroup is no proof, and the owed
// restart stays a pending step even with kubelet.restart, since nodedns could not see kubelet
// restart and would restart it on every pass.
func TestKubeletUnverifiedLive(t *testing.T) {
	n := newTrustNode(t)
	n.sb.Run(t, "printf 'kubelet:\\n  manage: true\\n' > /etc/nodedns/config.yaml && printf 'kubelet:\\n  manage: true\\n  restart: true\\n' > /etc/nodedns/restart.yaml")
	root := n.startRootKubelet(t, "--config="+rootKubeletConfig)
	started := time.Now()
	nstest.WaitFor(t, 5*time.Second, "the second after root's kubelet started", func() bool { return time.Now().Truncate(time.Second).After(started) })
	if out := n.run(t, "--config", "/etc/nodedns/config.yaml", "apply"); !nstest.FileHas(n.sb.Path("/var/lib/nodedns/kubelet-restart.json"), "changed") {
		t.Fatalf("apply wrote no restart record:\n%s", out)
	}
	unit := []string{"setpriv", "--bounding-set=-all,+net_admin,+chown", "--inh-caps=-all", "--", n.bin, "--config", "/etc/nodedns/restart.yaml"}
	out, _ := n.sb.Cmd(context.Background(), unit[0], append(unit[1:], "check", "-o", "json")...).Output()
	var rep probes.Report
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("check -o json: %v\n%s", err, out)
	}
	kc := byID(rep, "kubelet.resolvconf")
	t.Logf("kubelet.resolvconf %s: %s", kc.Status, kc.Message)
	contains(t, "kubelet.resolvconf", kc.Message, fmt.Sprintf("pid %d (uid 0) calls itself kubelet: ignored (cannot be verified: ", root))
	contains(t, "kubelet.resolvconf", kc.Message, "only to a reader with ptrace access to it")
	// Nor from what the kernel shows anyone: no unit of systemd's started it (no systemd here).
	contains(t, "kubelet.resolvconf", kc.Message, "; nor from its cgroup")
	out, _ = n.sb.Cmd(context.Background(), unit[0], append(unit[1:], "plan", "-o", "json", "--full")...).Output()
	var p planJSON
	if err := json.Unmarshal(out, &p); err != nil {
		t.Fatalf("plan -o json: %v\n%s", err, out)
	}
	for _, a := range p.Actions {
		if a.Kind == "restart-kubelet" {
			t.Errorf("the plan restarts kubelet although nodedns cannot see it restart: %+v", a)
		}
	}
	pending := ""
	for _, note := range p.Notes {
		if strings.HasPrefix(note, "pending: kubelet.service: `systemctl restart kubelet.service`") {
			pending = note
		}
	}
	contains(t, "the pending restart", pending, "nodedns cannot verify the running kubelet")
}
