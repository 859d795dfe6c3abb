package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/testutil/nstest"
	"github.com/nodedns/nodedns/probes"
)

// trustNode is a node of its own for the kubelet trust tests (docs/contract.md "Kubelet's config"):
// a sandbox with its own PID and mount namespaces and /proc (the nodedns binary sees only its
// processes), /etc and /var/lib isolated, a private /var/tmp, and root's kubelet config
// /etc/kubernetes/kubelet-config.yaml whose resolvConf /etc/kubernetes/resolv.conf lists the cache
// (169.254.25.10). Root's kubelet is a copy of sh named kubelet, root's, in /run/k8s-bin (root's
// tmpfs, writable by nobody else); the impostor is a two-line shell script in /var/tmp/x, with a
// config and a loop-free resolv.conf there, all owned by nobody (uid 65534), run as nobody.
type trustNode struct {
	sb  *nstest.Sandbox
	bin string
}

const (
	rootKubeletConfig = "/etc/kubernetes/kubelet-config.yaml"
	impostorDir       = "/var/tmp/x"
	nobody            = 65534
)

func newTrustNode(t *testing.T) *trustNode {
	t.Helper()
	sb := nstest.New(t)
	bin := nstest.Build(t)
	sb.Isolate(t)
	sb.Run(t, `set -e
mount -t tmpfs -o mode=1777 tmpfs /var/tmp
mkdir -p /run/k8s-bin /etc/kubernetes `+impostorDir+`
cp "$(readlink -f /bin/sh)" /run/k8s-bin/kubelet
chmod 0755 /run/k8s-bin /run/k8s-bin/kubelet
printf 'nameserver 10.0.0.2\n' > /etc/resolv.conf
cat > `+rootKubeletConfig+` <<'EOF'
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
resolvConf: /etc/kubernetes/resolv.conf
clusterDNS: [169.254.25.10]
clusterDomain: cluster.local
EOF
printf 'nameserver 169.254.25.10\nsearch default.svc.cluster.local svc.cluster.local cluster.local\n' > /etc/kubernetes/resolv.conf
cat > `+impostorDir+`/config.yaml <<'EOF'
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
resolvConf: `+impostorDir+`/resolv.conf
clusterDNS: [169.254.25.10]
EOF
printf 'nameserver 10.0.0.2\n' > `+impostorDir+`/resolv.conf
printf '#!/bin/sh\nwhile :; do sleep 3600; done\n' > `+impostorDir+`/kubelet
cp `+impostorDir+`/kubelet `+impostorDir+`/agent
cp "$(readlink -f /bin/sh)" `+impostorDir+`/k3s-agent
chmod 0755 `+impostorDir+`/kubelet `+impostorDir+`/k3s-agent
chown -R 65534:65534 `+impostorDir)
	return &trustNode{sb: sb, bin: bin}
}

// startRootKubelet starts root's kubelet with args (its flags) and returns its PID in the sandbox.
func (n *trustNode) startRootKubelet(t *testing.T, args ...string) int {
	t.Helper()
	n.sb.Start(t, "/run/k8s-bin/kubelet", append([]string{"-c", "while :; do sleep 3600; done", "kubelet"}, args...)...)
	return n.waitProcess(t, "kubelet", 0, args[len(args)-1])
}

// startImpostor starts nobody's program named name with args, as nobody (setpriv: the nsenter
// that enters the sandbox must be root, so the uid is dropped after it, by util-linux's setpriv, as
// SysProcAttr.Credential would), in /var/tmp/x, and returns its PID in the sandbox. kubelet is a
// shell script (the kernel runs it as `/bin/sh /var/tmp/x/kubelet ARGS`, comm kubelet);
// k3s-agent is nobody's copy of sh, started as `./k3s-agent agent ARGS`: sh runs the script named
// agent, and the process's comm is k3s-agent with the subcommand agent, as k3s's own. lowPID (> 0)
// makes the kernel hand it a PID just above it (the PID namespace's ns_last_pid), so it sorts
// before root's kubelet whatever their start order.
func (n *trustNode) startImpostor(t *testing.T, name string, lowPID int, args ...string) int {
	t.Helper()
	argv := append([]string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "./" + name}, args...)
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = nstest.Quote(a)
	}
	script := "cd " + impostorDir + " && " + strings.Join(quoted, " ") + " >/dev/null 2>&1 &"
	if lowPID > 0 {
		script = fmt.Sprintf("echo %d > /proc/sys/kernel/ns_last_pid\n%s", lowPID, script)
	}
	n.sb.Run(t, script)
	return n.waitProcess(t, name, nobody, args[len(args)-1])
}

// waitProcess waits for the process whose comm is comm, uid uid, with arg on its command line, in
// the sandbox's /proc, and returns its PID there.
func (n *trustNode) waitProcess(t *testing.T, comm string, uid int, arg string) int {
	t.Helper()
	proc := n.sb.Path("/proc")
	pid := 0
	nstest.WaitFor(t, 10*time.Second, fmt.Sprintf("%s (uid %d) with %s", comm, uid, arg), func() bool {
		ents, _ := os.ReadDir(proc)
		for _, e := range ents {
			p, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			c, _ := os.ReadFile(filepath.Join(proc, e.Name(), "comm"))
			cmdline, _ := os.ReadFile(filepath.Join(proc, e.Name(), "cmdline"))
			status, _ := os.ReadFile(filepath.Join(proc, e.Name(), "status"))
			if strings.TrimSpace(string(c)) == comm && strings.Contains(string(cmdline), arg) &&
				strings.Contains(string(status), fmt.Sprintf("\nUid:\t%d\t%d\t%d\t%d\n", uid, uid, uid, uid)) {
				pid = p
				return true
			}
		}
		return false
	})
	return pid
}

// run runs the nodedns binary in the sandbox.
func (n *trustNode) run(t *testing.T, args ...string) string {
	t.Helper()
	out, _ := n.sb.Cmd(context.Background(), n.bin, args...).Output()
	return string(out)
}

func (n *trustNode) kubeletCheck(t *testing.T, args ...string) probes.Result {
	t.Helper()
	out := n.run(t, append(args, "check", "-o", "json")...)
	var rep probes.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("check -o json: %v\n%s", err, out)
	}
	return byID(rep, "kubelet.resolvconf")
}

func (n *trustNode) plan(t *testing.T, args ...string) planJSON {
	t.Helper()
	out := n.run(t, append(args, "plan", "-o", "json", "--full")...)
	var p planJSON
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("plan -o json: %v\n%s", err, out)
	}
	return p
}

// TestKubeletImpostorLive (docs/contract.md "Kubelet's config"): a process that only calls itself
// kubelet (a shell script named kubelet, or k3s-agent with the `agent` subcommand, run by nobody
// with a config and a loop-free resolv.conf nobody owns) does not decide the kubelet verdict: check
// judges root's kubelet's config, whose resolv.conf lists the cache, and names the impostor as
// ignored. The impostor starts first, so it has the lower PID, as an impostor started before
// kubelet's restart does.
//
// Measured on the code before this rule (the lowest PID wins, whoever owns it): for the impostor
// named kubelet, `kubelet.resolvconf ok: kubelet's resolvConf /var/tmp/x/resolv.conf is loop-free
// (nameservers: 10.0.0.2); kubelet's config /var/tmp/x/config.yaml (--config of the running
// kubelet, pid 47)`; for k3s-agent, `kubelet.resolvconf ok: kubelet's resolvConf
// /var/tmp/x/resolv.conf (resolv-conf (--resolv-conf of the running k3s, pid 47)) is loop-free
// (nameservers: 10.0.0.2); no kubelet config (the running k3s agent (pid 47) runs kubelet inside
// itself)`: a false ok either way, root's kubelet (pid 49) and its looping resolv.conf unnamed.
func TestKubeletImpostorLive(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"kubelet", []string{"--config=" + impostorDir + "/config.yaml"}},
		{"k3s-agent", []string{"agent", "--config=" + impostorDir + "/config.yaml", "--resolv-conf=" + impostorDir + "/resolv.conf"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newTrustNode(t)
			imp := n.startImpostor(t, tc.name, 0, tc.args...)
			root := n.startRootKubelet(t, "--config="+rootKubeletConfig)
			if imp > root {
				t.Fatalf("the impostor has PID %d, root's kubelet %d: the test wants the impostor first", imp, root)
			}
			kc := n.kubeletCheck(t)
			t.Logf("kubelet.resolvconf %s: %s", kc.Status, kc.Message)
			if kc.Status != probes.Problem {
				t.Errorf("kubelet.resolvconf is %s, want a problem from root's kubelet's config: %s", kc.Status, kc.Message)
			}
			contains(t, "kubelet.resolvconf", kc.Message, "kubelet's resolvConf /etc/kubernetes/resolv.conf lists 169.254.25.10")
			contains(t, "kubelet.resolvconf", kc.Message, fmt.Sprintf("kubelet's config %s (--config of the running kubelet, pid %d", rootKubeletConfig, root))
			contains(t, "kubelet.resolvconf", kc.Message, fmt.Sprintf("pid %d (uid %d) calls itself %s: ignored (not root's", imp, nobody, tc.name))
			notContains(t, "kubelet.resolvconf", kc.Message, impostorDir+"/resolv.conf")
		})
	}
}

// TestKubeletManageImpostorLive (docs/contract.md "kubelet.manage"): after apply points root's
// kubelet config at nodedns's file, the restart is owed until root's kubelet restarts: nobody's
// process named kubelet started after the change (with a lower PID than root's kubelet) does not
// settle it; root's kubelet restarted does.
//
// Measured on the code before this rule: nobody's kubelet (pid 101) started after apply settled
// the restart: the plan removed /var/lib/nodedns/kubelet-restart.json ("kubelet.manage: kubelet
// restarted at 2026-11-29T01:22:53Z, after nodedns changed /etc/kubernetes/kubelet-config.yaml")
// and owed nothing, while root's kubelet (pid 1001) still ran with the old resolv.conf.
func TestKubeletManageImpostorLive(t *testing.T) {
	n := newTrustNode(t)
	cfg := []string{"--config", "/etc/nodedns/config.yaml"}
	n.sb.Run(t, "printf 'kubelet:\\n  manage: true\\n' > /etc/nodedns/config.yaml")
	// Root's kubelet gets PIDs from 1000 on, the impostor one from 100: lower, as after a restart.
	n.sb.Run(t, "echo 1000 > /proc/sys/kernel/ns_last_pid")
	root := n.startRootKubelet(t, "--config="+rootKubeletConfig)
	// Start times are good to the clock tick, the record's time of change to the second: apply in a
	// later second than root's kubelet started.
	started := time.Now()
	nstest.WaitFor(t, 5*time.Second, "the second after root's kubelet started", func() bool { return time.Now().Truncate(time.Second).After(started) })

	out := n.run(t, append(cfg, "apply")...)
	rec, err := os.ReadFile(n.sb.Path("/var/lib/nodedns/kubelet-restart.json"))
	if err != nil {
		t.Fatalf("apply wrote no restart record: %v\n%s", err, out)
	}
	var r struct{ Changed time.Time }
	must(t, json.Unmarshal(rec, &r))
	contains(t, "kubelet's config after apply", readSandboxFile(t, n.sb, rootKubeletConfig), "resolvConf: /var/lib/nodedns/resolv.conf\n")
	owed := func(what string) {
		t.Helper()
		p := n.plan(t, cfg...)
		for _, c := range p.Changes {
			if c.Path == "/var/lib/nodedns/kubelet-restart.json" {
				t.Errorf("%s: the plan settles the owed restart: %s", what, c.Reason)
			}
		}
		pending := false
		for _, note := range p.Notes {
			pending = pending || strings.HasPrefix(note, "pending: kubelet.service: `systemctl restart kubelet.service`")
		}
		if !pending {
			t.Errorf("%s: the plan does not owe kubelet's restart: %q", what, p.Notes)
		}
	}
	owed("root's kubelet started before the change")

	// Start times are seconds: the impostor starts in a later second than the change.
	nstest.WaitFor(t, 5*time.Second, "a second after the change", func() bool { return time.Now().Truncate(time.Second).After(r.Changed) })
	imp := n.startImpostor(t, "kubelet", 100, "--config="+impostorDir+"/config.yaml")
	if imp > root {
		t.Fatalf("the impostor has PID %d, root's kubelet %d: the test wants the impostor first", imp, root)
	}
	owed(fmt.Sprintf("nobody's kubelet (pid %d) started after the change", imp))

	// Root's kubelet restarted: a new process, started after the change, settles it.
	n.sb.Run(t, fmt.Sprintf("kill %d", root))
	restarted := n.startRootKubelet(t, "--config="+rootKubeletConfig)
	p := n.plan(t, cfg...)
	settled := ""
	for _, c := range p.Changes {
		if c.Path == "/var/lib/nodedns/kubelet-restart.json" && c.Op == "remove" {
			settled = c.Reason
		}
	}
	if !strings.Contains(settled, "kubelet.manage: kubelet restarted at ") {
		t.Errorf("root's kubelet restarted (pid %d) does not settle the restart: %+v", restarted, p.Changes)
	}
}

// TestKubeletConfigDirLive: a running kubelet with --config-dir and --resolv-conf but no --config
// (RKE2's shape): check names the directory kubelet reads. Before, it said only "no kubelet config
// (the running kubelet (pid 46) has no --config: kubelet's defaults)".
func TestKubeletConfigDirLive(t *testing.T) {
	n := newTrustNode(t)
	n.sb.Run(t, `set -e
mkdir -p /etc/kubernetes/kubelet.conf.d
printf 'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nclusterDNS: [10.43.0.10]\n' > /etc/kubernetes/kubelet.conf.d/10-dns.conf`)
	root := n.startRootKubelet(t, "--config-dir=/etc/kubernetes/kubelet.conf.d", "--resolv-conf=/etc/kubernetes/resolv.conf")
	kc := n.kubeletCheck(t)
	t.Logf("kubelet.resolvconf %s: %s", kc.Status, kc.Message)
	contains(t, "kubelet.resolvconf", kc.Message, fmt.Sprintf("the running kubelet (pid %d) has no --config: kubelet's defaults, with the drop-ins of its --config-dir /etc/kubernetes/kubelet.conf.d", root))
	contains(t, "kubelet.resolvconf", kc.Message, "kubelet's resolvConf /etc/kubernetes/resolv.conf (--resolv-conf of the running kubelet")
}
