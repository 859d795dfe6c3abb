package packaging_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/testutil/nstest"
)

// TestKubeletVerifiedUnderUnit (docs/contract.md "Kubelet's config", "kubelet.manage"): the shipped
// unit verifies root's kubelet without CAP_SYS_PTRACE. A real systemd (252) as PID 1 of its own
// namespaces starts kubelet.service (a copy of sh named kubelet, root's, with every capability: the
// kernel hides its executable and namespaces from a reader without ptrace access to it), nobody's
// program named kubelet as a unit of its own (User=65534), and `nodedns check` as a unit made of the
// shipped nodedns.service, with and without kubelet-manage.conf, its ExecStart only replaced (and
// the few lines a test needs: no default dependencies, oneshot, its output written under /run/nds).
// Under the unit's capabilities (CAP_NET_ADMIN CAP_CHOWN) and its whole hardening, ProtectProc=
// invisible included (which hides nothing from root's group, hidepid's gid= being 0),
// kubelet.resolvconf names kubelet's --config of the running kubelet, pid MainPID: verified by its
// status (root's, PID 1's PID namespace) and its cgroup (kubelet.service's, as systemd says over
// D-Bus, root's); nobody's is ignored, not root's.
//
// Measured before (the executable and namespace links only): "pid 36 (uid 0) calls itself kubelet:
// ignored (cannot be verified: readlink /proc/36/ns/pid: permission denied ...)" under the unit
// without the drop-in's CAP_SYS_PTRACE, kubelet's config then taken from the node's files.
func TestKubeletVerifiedUnderUnit(t *testing.T) {
	nstest.Require(t)
	work := t.TempDir()
	bin := filepath.Join(work, "nodedns")
	if out, err := exec.Command("go", "build", "-C", "../cmd/nodedns", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build nodedns: %v\n%s", err, out)
	}
	const nds = "/run/nds"
	sh, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(sh)
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.WriteFile(filepath.Join(work, "kubelet"), data, 0o755))
	must(t, os.MkdirAll(filepath.Join(work, "nobody"), 0o755))
	must(t, os.WriteFile(filepath.Join(work, "nobody", "kubelet"), []byte("#!/bin/sh\nwhile :; do sleep 3600; done\n"), 0o755))
	must(t, os.Chown(filepath.Join(work, "nobody"), 65534, 65534))
	must(t, os.Chown(filepath.Join(work, "nobody", "kubelet"), 65534, 65534))
	must(t, os.WriteFile(filepath.Join(work, "kubelet.yaml"), []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nresolvConf: "+nds+"/kubelet-resolv.conf\nclusterDNS: [169.254.25.10]\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(work, "kubelet-resolv.conf"), []byte("nameserver 10.0.0.2\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(work, "config.yaml"), []byte("kubelet:\n  manage: true\n"), 0o644))

	units := filepath.Join(work, "units")
	shipped := readRepo(t, "packaging/systemd/nodedns.service")
	dropIn := readRepo(t, "packaging/systemd/kubelet-manage.conf")
	check := func(name string, withDropIn bool) {
		must(t, os.MkdirAll(filepath.Join(units, name+".service.d"), 0o755))
		must(t, os.WriteFile(filepath.Join(units, name+".service"), shipped, 0o644))
		if withDropIn {
			must(t, os.WriteFile(filepath.Join(units, name+".service.d", "kubelet-manage.conf"), dropIn, 0o644))
		}
		must(t, os.WriteFile(filepath.Join(units, name+".service.d", "zz-test.conf"), []byte(`[Unit]
DefaultDependencies=no
After=kubelet.service nobody-kubelet.service
[Service]
Type=oneshot
RemainAfterExit=yes
Restart=no
WatchdogSec=0
ExecStart=
ExecStart=/bin/sh -c '`+nds+`/nodedns --config `+nds+`/config.yaml check -o json > `+nds+`/`+name+`.json; echo $? > `+nds+`/`+name+`.exit'
ExecReload=
ReadWritePaths=`+nds+`
`), 0o644))
	}
	check("check-dropin", true)
	check("check-base", false)
	// Type=exec: the kubelets' units are active once their programs run. A Type=simple unit is
	// active from systemd's fork, and until its exec the process is systemd's child, its comm
	// "(kubelet)" (exec_child's rename_process_from_path, src/core/execute.c, systemd 252): seen
	// under load, nobody's kubelet was not yet one that calls itself kubelet when the check ran.
	must(t, os.WriteFile(filepath.Join(units, "kubelet.service"), []byte("[Unit]\nDefaultDependencies=no\n[Service]\nType=exec\nExecStart="+nds+"/kubelet -c \"while :; do sleep 3600; done\" kubelet --config="+nds+"/kubelet.yaml\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(units, "nobody-kubelet.service"), []byte("[Unit]\nDefaultDependencies=no\n[Service]\nType=exec\nUser=65534\nGroup=65534\nExecStart="+nds+"/nobody/kubelet --config="+nds+"/nobody.yaml\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(units, "system.slice"), []byte("[Unit]\nDefaultDependencies=no\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(units, "nds-test.target"), []byte("[Unit]\nDefaultDependencies=no\nWants=kubelet.service nobody-kubelet.service\n"), 0o644))

	// systemd's StateDirectory= would make /var/lib/nodedns on this machine: a tmpfs of the
	// namespace's own takes /var/lib's place there.
	sd := nstest.BootSystemd(t, nstest.SystemdOptions{Work: work, Target: "nds-test.target", Setup: []string{"mount -t tmpfs -o mode=0755 tmpfs /var/lib"}})
	for _, u := range []string{"kubelet.service", "nobody-kubelet.service"} {
		sd.WaitFor(u+" active", u, 20*time.Second, func() bool { return sd.Show(u, "ActiveState") == "active" })
	}
	mainPID := sd.Show("kubelet.service", "MainPID")
	nobodyPID := sd.Show("nobody-kubelet.service", "MainPID")
	if cg := sd.Show("kubelet.service", "ControlGroup"); cg != "/system.slice/kubelet.service" {
		t.Logf("kubelet.service's cgroup: %s", cg)
	}
	result := func(name string) (msg string) {
		t.Helper()
		if out, err := sd.Systemctl("start", name+".service"); err != nil {
			status, _ := sd.Systemctl("status", "--no-pager", name+".service")
			t.Fatalf("start %s: %v %s\n%s", name, err, out, status)
		}
		out, err := os.ReadFile(hostPath(sd.PID1, nds+"/"+name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var rep struct {
			Checks []struct{ ID, Status, Message string }
		}
		if err := json.Unmarshal(out, &rep); err != nil {
			t.Fatalf("%s: check -o json: %v\n%s", name, err, out)
		}
		for _, c := range rep.Checks {
			if c.ID == "kubelet.resolvconf" {
				t.Logf("%s: kubelet.resolvconf %s: %s", name, c.Status, c.Message)
				return c.Message
			}
		}
		t.Fatalf("%s: no kubelet.resolvconf in\n%s", name, out)
		return ""
	}
	found := fmt.Sprintf("(--config of the running kubelet, pid %s", mainPID)
	ignored := fmt.Sprintf("pid %s (uid 65534) calls itself kubelet: ignored (not root's)", nobodyPID)
	for _, name := range []string{"check-dropin", "check-base"} {
		if msg := result(name); !strings.Contains(msg, found) || !strings.Contains(msg, nds+"/kubelet.yaml") || !strings.Contains(msg, ignored) {
			t.Errorf("%s: kubelet.resolvconf does not say %q and %q: %s", name, found, ignored, msg)
		}
		if caps := sd.Show(name+".service", "CapabilityBoundingSet"); strings.Contains(caps, "cap_sys_ptrace") || !strings.Contains(caps, "cap_net_admin") {
			t.Errorf("%s.service's capabilities: %s", name, caps)
		}
	}
	sd.Poweroff()
}
