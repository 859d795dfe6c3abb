package packaging_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/testutil/nstest"
)

// TestUnitUnderSystemd runs the shipped unit under a real systemd (252) as PID 1 of a fresh PID,
// mount, network, cgroup, UTS and IPC namespace, with the real
// nodedns binary in `run --root` mode on a copy of the example node:
//   - it reaches active through READY=1 (Type=notify) with the unit's hardening in force;
//   - a stand-in kubelet.service ordered after it sees it active when it starts (Before=kubelet);
//   - a stalled daemon (SIGSTOP) is killed by the watchdog (Result=watchdog), then restarted
//     (Restart=on-failure).
//
// The test's drop-in changes only what a test needs: ExecStart (the built binary, --root),
// ReadWritePaths for that root, DefaultDependencies=no (no sysinit.target here) and WatchdogSec=3s
// (the shipped 30s would make the stall take half a minute; TestShippedConfigs checks the shipped
// value).
func TestUnitUnderSystemd(t *testing.T) { nstest.Suites(t, testUnitUnderSystemd) }

func testUnitUnderSystemd(t *testing.T, suite nstest.Suite) {
	nstest.Require(t)
	work := t.TempDir()
	bin := filepath.Join(work, "nodedns")
	if out, err := exec.Command("go", "build", "-C", "../cmd/nodedns", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build nodedns: %v\n%s", err, out)
	}
	if help, _ := exec.Command(bin, "run", "--help").CombinedOutput(); strings.Contains(string(help), "not implemented yet") {
		t.Skip("nodedns run: not implemented yet")
	}

	// Everything lives under /run/nds inside the namespace (a tmpfs): PrivateTmp= hides /tmp from
	// the service, and ProtectSystem=strict makes the rest read-only.
	const nds = "/run/nds"
	units := filepath.Join(work, "units")
	must(t, os.MkdirAll(filepath.Join(units, "nodedns.service.d"), 0o755))
	shipped := readRepo(t, "packaging/systemd/nodedns.service")
	must(t, os.WriteFile(filepath.Join(units, "nodedns.service"), shipped, 0o644))
	must(t, os.WriteFile(filepath.Join(units, "nodedns.service.d", "test.conf"), []byte(`[Unit]
DefaultDependencies=no
[Service]
ExecStart=
ExecStart=`+nds+`/nodedns --root `+nds+`/node run
ReadWritePaths=`+nds+`/node
WatchdogSec=3s
`), 0o644))
	must(t, os.WriteFile(filepath.Join(units, "kubelet.service"), []byte(`[Unit]
Description=stand-in kubelet: records whether nodedns was active when it started
DefaultDependencies=no
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -c 'systemctl is-active nodedns.service > `+nds+`/kubelet-saw 2>&1 || true'
`), 0o644))
	must(t, os.WriteFile(filepath.Join(units, "nds-test.target"), []byte(`[Unit]
DefaultDependencies=no
Wants=nodedns.service kubelet.service
`), 0o644))
	must(t, os.WriteFile(filepath.Join(units, "system.slice"), []byte("[Unit]\nDefaultDependencies=no\n"), 0o644))
	if out, err := exec.Command("cp", "-a", "../examples/kubespray-host-resolvconf", filepath.Join(work, "node")).CombinedOutput(); err != nil {
		t.Fatalf("copy the example node: %v\n%s", err, out)
	}
	// A resolv.conf another user owns: rewriting it must keep its owner and mode with only the
	// unit's CAP_CHOWN (no CAP_FOWNER, no CAP_DAC_OVERRIDE) and its system call filter.
	resolv := filepath.Join(work, "node/etc/resolv.conf")
	must(t, os.Chown(resolv, 1000, 1001))
	must(t, os.Chmod(resolv, 0o604))

	sd := nstest.BootSystemd(t, nstest.SystemdOptions{Suite: suite, Work: work, Target: "nds-test.target"})
	pid1 := sd.PID1
	systemctl := sd.Systemctl
	show := func(prop string) string { return sd.Show("nodedns.service", prop) }
	waitFor := func(what string, within time.Duration, ok func() bool) {
		t.Helper()
		sd.WaitFor(what, "nodedns.service", within, ok)
	}

	// 1. READY=1 makes it active, with the hardening in force.
	waitFor("nodedns.service active", 30*time.Second, func() bool { return show("ActiveState") == "active" })
	if st := show("StatusText"); st == "" {
		t.Errorf("no STATUS= from the daemon")
	} else {
		t.Logf("STATUS=%s", st)
	}
	fi, err := os.Stat(hostPath(pid1, nds+"/node/etc/resolv.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 1000 || st.Gid != 1001 || fi.Mode() != 0o604 {
		t.Errorf("/etc/resolv.conf after the daemon's pass: %d:%d %v, want 1000:1001 -rw----r-- kept", st.Uid, st.Gid, fi.Mode())
	}
	if data, err := os.ReadFile(hostPath(pid1, nds+"/node/etc/resolv.conf")); err != nil || !strings.Contains(string(data), "Edited by nodedns") {
		t.Errorf("/etc/resolv.conf was not edited under the unit's hardening (%v):\n%s", err, data)
	}
	// 2. Ordering: the stand-in kubelet started after nodedns was up.
	waitFor("kubelet.service done", 20*time.Second, func() bool {
		out, _ := systemctl("show", "-P", "ActiveState", "kubelet.service")
		return out == "active"
	})
	saw, err := os.ReadFile(hostPath(pid1, nds+"/kubelet-saw"))
	if err != nil || strings.TrimSpace(string(saw)) != "active" {
		t.Errorf("kubelet.service saw nodedns %q (%v), want active: Before=kubelet.service must hold", saw, err)
	}
	// Still active after several watchdog periods: the daemon pings.
	time.Sleep(7 * time.Second)
	if st := show("ActiveState"); st != "active" {
		t.Fatalf("nodedns.service %s after 7s with WatchdogSec=3s (result %s): no WATCHDOG=1?", st, show("Result"))
	}

	// 3. A stalled daemon is killed by the watchdog, then restarted.
	if out, err := systemctl("kill", "--signal=SIGSTOP", "nodedns.service"); err != nil {
		t.Fatalf("systemctl kill: %v: %s", err, out)
	}
	waitFor("Result=watchdog", 20*time.Second, func() bool { return show("Result") == "watchdog" })
	waitFor("restarted after the watchdog", 30*time.Second, func() bool {
		return show("ActiveState") == "active" && show("NRestarts") == "1"
	})

	sd.Poweroff()
}

func hostPath(pid int, p string) string { return fmt.Sprintf("/proc/%d/root%s", pid, p) }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
