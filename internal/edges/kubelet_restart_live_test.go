package edges

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/kubelet"
	"github.com/nodedns/nodedns/internal/policy"
	"github.com/nodedns/nodedns/internal/testutil/nstest"
	"golang.org/x/sys/unix"
)

// TestKubeletRestartLive (docs/contract.md "kubelet.manage", kubelet.restart): the restart action
// asks a real systemd (252, PID 1 of its own namespaces) over its private D-Bus socket to restart a
// stand-in kubelet.service in "replace" mode and waits for the job: the unit runs a new process
// afterwards, started after the restart was asked (what the plan compares with kubelet's start
// time), and a unit whose restart fails is an error naming the job's result and the unit.
func TestKubeletRestartLive(t *testing.T) {
	nstest.Require(t)
	work, put := systemdWork(t)
	write := func(name, data string) { put("units/"+name, []byte(data), 0o644) }
	write("kubelet.service", `[Unit]
Description=stand-in kubelet: counts its starts
DefaultDependencies=no
[Service]
ExecStart=/bin/sh -c 'echo start >> /run/nds/starts; exec sleep infinity'
`)
	write("broken.service", `[Unit]
DefaultDependencies=no
[Service]
Type=oneshot
ExecStart=/bin/false
`)
	write("nds-test.target", "[Unit]\nDefaultDependencies=no\nWants=kubelet.service\n")
	// The restart runs in systemd's namespace (TestKubeletRestartInNamespace), with the default dial
	// of PID 1's /run/systemd/private.
	sd := nstest.BootSystemd(t, nstest.SystemdOptions{Work: work, Target: "nds-test.target"})
	// The stand-in records each start once its shell runs, which under load comes well after systemd's
	// fork (a Type=simple unit is active from the fork): the count is waited for, before the restart
	// too (a process killed before its echo records nothing).
	starts := func() (int, string) {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/root/run/nds/starts", sd.PID1))
		if err != nil {
			return 0, err.Error()
		}
		return strings.Count(string(data), "start\n"), string(data)
	}
	sd.WaitFor("kubelet.service active", "kubelet.service", 20*time.Second, func() bool { return sd.Show("kubelet.service", "ActiveState") == "active" })
	sd.WaitFor("the stand-in kubelet to record its start", "kubelet.service", 20*time.Second, func() bool { n, _ := starts(); return n >= 1 })
	oldPID := sd.Show("kubelet.service", "MainPID")
	restart := func(unit string) (string, error) {
		c := exec.Command("nsenter", "-t", fmt.Sprint(sd.PID1), "-m", "-p", "--", "env", restartHelperEnv+"="+unit,
			sd.Dir+"/edges.test", "-test.run", "^TestKubeletRestartInNamespace$", "-test.v")
		out, err := c.CombinedOutput()
		return string(out), err
	}
	if a := (policy.RestartKubelet{Unit: kubelet.Unit}); !(KubeletRestarter{}).Handles(a) || (KubeletRestarter{}).Handles(policy.RestartResolved{}) {
		t.Fatal("KubeletRestarter handles the wrong actions")
	}
	asked := monotonic(t)
	if out, err := restart(kubelet.Unit); err != nil || !strings.Contains(out, "restarted: kubelet.service") {
		t.Fatalf("restart kubelet.service: %v\n%s\n%s", err, out, sd.Console())
	}
	// The job is done when Do returns: the unit is active again with a new process.
	if st := sd.Show("kubelet.service", "ActiveState"); st != "active" {
		t.Errorf("kubelet.service %s after the restart", st)
	}
	newPID := sd.Show("kubelet.service", "MainPID")
	if newPID == oldPID || newPID == "0" {
		t.Errorf("kubelet.service MainPID %s after the restart, was %s", newPID, oldPID)
	}
	sd.WaitFor("the stand-in kubelet to record its second start", "kubelet.service", 20*time.Second, func() bool { n, _ := starts(); return n >= 2 })
	if n, data := starts(); n != 2 {
		t.Errorf("the stand-in kubelet started %d times (%q), want twice", n, data)
	}
	// The new process started after the restart was asked, by systemd's record of when it forked
	// it (CLOCK_MONOTONIC, which the namespace shares with this test); how nodedns reads a
	// process's start time is internal/kubelet's TestStartTimeResolution.
	var started time.Duration
	if _, err := fmt.Sscan(sd.Show("kubelet.service", "ExecMainStartTimestampMonotonic"), &started); err != nil {
		t.Fatalf("kubelet.service ExecMainStartTimestampMonotonic: %v", err)
	}
	if started *= time.Microsecond; started < asked || started > monotonic(t) {
		t.Errorf("the restarted kubelet started at %v (CLOCK_MONOTONIC); the restart was asked at %v", started, asked)
	}

	if out, err := restart("broken.service"); err == nil || !strings.Contains(out, "restart broken.service: job failed") {
		t.Errorf("restart of a failing unit: %v, want the job's result named:\n%s", err, out)
	}
	if out, err := restart("k3s.service"); err == nil || !strings.Contains(out, "restart k3s.service: ") {
		t.Errorf("restart of a unit that does not exist: %v, want an error naming it:\n%s", err, out)
	}
	sd.Poweroff()
}

// systemdWork makes the Work directory of a test of a real systemd (nstest.BootSystemd): units/ with
// system.slice, and a copy of this test binary as edges.test, since systemd serves its private
// socket only to peers it can see (SO_PEERCRED's PID in its PID namespace), as on a node: the part
// of the test that talks to it runs in the namespace, from that copy. put writes a file under it.
func systemdWork(t *testing.T) (work string, put func(name string, data []byte, mode os.FileMode)) {
	t.Helper()
	work = t.TempDir()
	put = func(name string, data []byte, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(work, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, mode); err != nil {
			t.Fatal(err)
		}
	}
	put("units/system.slice", []byte("[Unit]\nDefaultDependencies=no\n"), 0o644)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	put("edges.test", data, 0o755)
	return work, put
}

// restartHelperEnv names the unit TestKubeletRestartInNamespace restarts.
const restartHelperEnv = "NODEDNS_TEST_RESTART_UNIT"

// TestKubeletRestartInNamespace is TestKubeletRestartLive's restart, run inside the namespace of
// its systemd; it does nothing elsewhere.
func TestKubeletRestartInNamespace(t *testing.T) {
	unit := os.Getenv(restartHelperEnv)
	if unit == "" {
		t.Skip("run by TestKubeletRestartLive inside its systemd's namespace")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := (KubeletRestarter{Timeout: 30 * time.Second}).Do(ctx, policy.RestartKubelet{Unit: unit}); err != nil {
		t.Fatal(err)
	}
	t.Logf("restarted: %s", unit)
}

// monotonic is CLOCK_MONOTONIC now, the clock of systemd's *TimestampMonotonic properties.
func monotonic(t *testing.T) time.Duration {
	t.Helper()
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ts.Nano())
}
