package nstest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// SystemdBin is systemd's own program on this machine kind (Debian 12, systemd 252).
const SystemdBin = "/lib/systemd/systemd"

// Systemd is a real systemd running as PID 1 of a private PID, mount, network, cgroup, UTS and IPC
// namespace, for tests of units: what systemd does with a unit file, in what order, under what
// hardening. Its units come from SYSTEMD_UNIT_PATH; nothing touches this machine's systemd.
type Systemd struct {
	// PID1 is its PID as this machine numbers it.
	PID1 int
	// Dir is where the test's files are inside the namespace (a tmpfs holding a copy of Work).
	Dir string

	t       testing.TB
	cmd     *exec.Cmd
	console *syncWriter
	done    chan struct{}
}

// SystemdOptions configure a boot.
type SystemdOptions struct {
	// Work is a host directory copied to Dir inside the namespace before systemd starts; its
	// units/ subdirectory is the unit path (Dir/units). It needs a system.slice and the target.
	Work string
	// Target is the unit systemd starts (--unit=).
	Target string
	// Setup are shell lines run in the namespace after the copy, before systemd starts (extra
	// mounts).
	Setup []string
}

// BootSystemd starts systemd as PID 1 in namespaces of its own, with fresh /proc, read-only /proc/sys
// and /sys, cgroup2, a tmpfs /run and /tmp, and a pty of its own bound over /dev/console (never the
// real console). It is powered off, or killed, when the test ends.
func BootSystemd(t testing.TB, o SystemdOptions) *Systemd {
	t.Helper()
	Require(t)
	if _, err := os.Stat(SystemdBin); err != nil {
		t.Skip("systemd not installed (.ci/run installs it)")
	}
	for _, tool := range []string{"script", "unshare", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
	const dir = "/run/nds"
	script := strings.Join(append(append([]string{
		"set -e",
		"mount -t proc proc /proc",
		"mount --bind /proc/sys /proc/sys && mount -o remount,bind,ro /proc/sys",
		"mount -t sysfs -o ro sysfs /sys",
		"mount -t cgroup2 cgroup2 /sys/fs/cgroup",
		"mount -t tmpfs -o mode=0755 tmpfs /run",
		"mkdir -p " + dir + " && cp -a " + Quote(o.Work) + "/. " + dir + "/",
		"mount -t tmpfs -o mode=1777 tmpfs /tmp",
		// systemd writes status to /dev/console: a pty of its own (script's), never the real one.
		"mount --bind \"$(tty 2>/dev/null || echo /dev/null)\" /dev/console",
	}, o.Setup...),
		"exec env SYSTEMD_UNIT_PATH="+dir+"/units: "+SystemdBin+" --unit="+o.Target+" --log-target=console --log-level=info",
	), "\n")
	s := &Systemd{Dir: dir, t: t, console: &syncWriter{}, done: make(chan struct{})}
	s.cmd = exec.Command("script", "-qfec",
		"unshare --pid --fork --mount --net --cgroup --uts --ipc --propagation private sh -c "+Quote(script), "/dev/null")
	s.cmd.Stdout, s.cmd.Stderr = s.console, s.console
	// Wait must not hang on a pipe a stray process in the namespace still holds.
	s.cmd.WaitDelay = 5 * time.Second
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			_ = s.cmd.Process.Kill()
			// The namespace's PID 1 goes with its unshare parent's kill only if we kill it too.
			if pid1 := unsharedChild(s.cmd.Process.Pid); pid1 > 0 {
				_ = exec.Command("kill", "-9", strconv.Itoa(pid1)).Run()
			}
			<-s.done
		}
	})
	WaitFor(t, 20*time.Second, "systemd as PID 1", func() bool {
		s.PID1 = unsharedChild(s.cmd.Process.Pid)
		return s.PID1 > 0
	})
	return s
}

// Systemctl runs systemctl against this systemd.
func (s *Systemd) Systemctl(args ...string) (string, error) {
	c := exec.Command("nsenter", append([]string{"-t", strconv.Itoa(s.PID1), "-m", "-p", "--", "systemctl"}, args...)...)
	out, err := c.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// Show is one property of a unit (systemctl show -P).
func (s *Systemd) Show(unit, prop string) string {
	out, _ := s.Systemctl("show", "-P", prop, unit)
	return out
}

// Console is what systemd printed so far.
func (s *Systemd) Console() string { return s.console.String() }

// WaitFor polls ok until it holds, failing the test with unit's status and the console otherwise.
func (s *Systemd) WaitFor(what, unit string, within time.Duration, ok func() bool) {
	s.t.Helper()
	end := time.Now().Add(within)
	for !ok() {
		if time.Now().After(end) {
			status, _ := s.Systemctl("status", "--no-pager", unit)
			s.t.Fatalf("%s: not within %v\nstatus:\n%s\nconsole:\n%s", what, within, status, s.Console())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Poweroff powers systemd off and waits for it, failing the test if it does not go.
func (s *Systemd) Poweroff() {
	s.t.Helper()
	if out, err := s.Systemctl("poweroff"); err != nil {
		s.t.Logf("poweroff: %v %s", err, out)
	}
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		s.t.Error("systemd did not power off")
	}
}

// unsharedChild returns the child of the unshare process under parent (script -> unshare -> PID 1).
func unsharedChild(parent int) int {
	for _, p := range procChildren(parent) {
		if data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p)); strings.TrimSpace(string(data)) == "unshare" {
			for _, c := range procChildren(p) {
				return c
			}
		}
		if found := unsharedChild(p); found > 0 {
			return found
		}
	}
	return 0
}

func procChildren(pid int) []int {
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

// syncWriter is a goroutine-safe buffer for a child's output.
type syncWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
