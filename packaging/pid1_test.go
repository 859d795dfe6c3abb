package packaging_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/nstest"
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
func TestUnitUnderSystemd(t *testing.T) {
	nstest.Require(t)
	systemd := "/lib/systemd/systemd"
	if _, err := os.Stat(systemd); err != nil {
		t.Skip("systemd not installed (.ci/run installs it)")
	}
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

	script := strings.Join([]string{
		"set -e",
		"mount -t proc proc /proc",
		"mount --bind /proc/sys /proc/sys && mount -o remount,bind,ro /proc/sys",
		"mount -t sysfs -o ro sysfs /sys",
		"mount -t cgroup2 cgroup2 /sys/fs/cgroup",
		"mount -t tmpfs -o mode=0755 tmpfs /run",
		"mkdir -p " + nds + " && cp -a " + shq(work) + "/. " + nds + "/",
		"mount -t tmpfs -o mode=1777 tmpfs /tmp",
		// systemd writes status to /dev/console: give it a pty of its own, never the real console.
		"mount --bind \"$(tty 2>/dev/null || echo /dev/null)\" /dev/console",
		"exec env SYSTEMD_UNIT_PATH=" + nds + "/units: " + systemd + " --unit=nds-test.target --log-target=console --log-level=info",
	}, "\n")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "script", "-qfec",
		"unshare --pid --fork --mount --net --cgroup --uts --ipc --propagation private sh -c "+shq(script), "/dev/null")
	var console strings.Builder
	cmd.Stdout, cmd.Stderr = &console, &console
	// Wait must not hang on a pipe a stray process in the namespace still holds.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// done is closed when systemd's session has ended (closed, not sent: both the test and its
	// cleanup wait on it).
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			_ = cmd.Process.Kill()
			// The namespace's PID 1 goes with its unshare parent's kill only if we kill it too.
			if pid1 := findPID1(cmd.Process.Pid); pid1 > 0 {
				_ = exec.Command("kill", "-9", strconv.Itoa(pid1)).Run()
			}
			<-done
		}
	})

	// systemd is the process whose parent is unshare (script -> unshare -> systemd).
	var pid1 int
	deadline := time.Now().Add(20 * time.Second)
	for pid1 == 0 && time.Now().Before(deadline) {
		pid1 = findPID1(cmd.Process.Pid)
		time.Sleep(100 * time.Millisecond)
	}
	if pid1 == 0 {
		t.Fatalf("systemd did not start:\n%s", console.String())
	}
	systemctl := func(args ...string) (string, error) {
		c := exec.Command("nsenter", append([]string{"-t", strconv.Itoa(pid1), "-m", "-p", "--", "systemctl"}, args...)...)
		out, err := c.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	show := func(prop string) string {
		out, _ := systemctl("show", "-P", prop, "nodedns.service")
		return out
	}
	waitFor := func(what string, within time.Duration, ok func() bool) {
		t.Helper()
		end := time.Now().Add(within)
		for !ok() {
			if time.Now().After(end) {
				status, _ := systemctl("status", "--no-pager", "nodedns.service")
				t.Fatalf("%s: not within %v\nstatus:\n%s\nconsole:\n%s", what, within, status, console.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
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

	if out, err := systemctl("poweroff"); err != nil {
		t.Logf("poweroff: %v %s", err, out)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Error("systemd did not power off")
	}
}

// findPID1 returns the child of the unshare process under parent (script -> unshare -> PID 1).
func findPID1(parent int) int {
	for _, p := range children(parent) {
		if comm(p) == "unshare" {
			for _, c := range children(p) {
				return c
			}
		}
		if found := findPID1(p); found > 0 {
			return found
		}
	}
	return 0
}

func children(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range tasks {
		data, _ := os.ReadFile(f)
		for _, s := range strings.Fields(string(data)) {
			if n, err := strconv.Atoi(s); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

func comm(pid int) string {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(data))
}

// hostPath is where a path in PID 1's mount namespace is seen from the host.
func hostPath(pid int, p string) string { return fmt.Sprintf("/proc/%d/root%s", pid, p) }

func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
