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

	"github.com/nodedns/nodedns/internal/testutil/tied"
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

	t        testing.TB
	chrooted bool // systemd runs in a suite's tree: systemctl is the tree's
	cmd      *exec.Cmd
	console  *syncWriter
	done     chan struct{}
}

// SystemdOptions configure a boot.
type SystemdOptions struct {
	// Work is a host directory copied to Dir inside the namespace before systemd starts; its
	// units/ subdirectory is the unit path (Dir/units). It needs a system.slice and the target.
	Work string
	// Target is the unit systemd starts (--unit=).
	Target string
	// Setup are shell lines run in the namespace after the copy, before systemd starts (extra
	// mounts); with a suite's tree, chrooted in it.
	Setup []string
	// Suite is the systemd that boots: this machine's (252) for the zero Suite, else the suite's
	// tree's (forky: 262), booted chrooted in an overlay of the tree.
	Suite Suite
}

// BootSystemd starts systemd as PID 1 in namespaces of its own, with fresh /proc, read-only /proc/sys
// and /sys, cgroup2, a tmpfs /run and /tmp, and a pty of its own bound over /dev/console (never the
// real console). It is powered off, or killed, when the test ends.
func BootSystemd(t testing.TB, o SystemdOptions) *Systemd {
	t.Helper()
	Require(t)
	if o.Suite.Chrooted() {
		o.Suite.Need(t, ".ci/suite-tree installs systemd", SystemdBin, "systemctl")
	} else if _, err := os.Stat(SystemdBin); err != nil {
		t.Skip("systemd not installed (.ci/run installs it)")
	}
	for _, tool := range []string{"script", "unshare", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
	const dir = "/run/nds"
	// R is the root systemd boots in: "" (this machine's), or an overlay of the suite's tree
	// mounted first, every later mount under it, and systemd chrooted into it.
	var lines []string
	r := ""
	if o.Suite.Chrooted() {
		tmp := t.TempDir()
		r = filepath.Join(tmp, "root")
		for _, d := range []string{r, filepath.Join(tmp, "up"), filepath.Join(tmp, "work")} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		lines = append(lines, fmt.Sprintf("mount -t overlay overlay -o lowerdir=%s,upperdir=%s,workdir=%s %s",
			Quote(o.Suite.Tree), Quote(filepath.Join(tmp, "up")), Quote(filepath.Join(tmp, "work")), Quote(r)),
			"mount --rbind /dev "+Quote(r+"/dev"))
	}
	q := func(p string) string { return Quote(r + p) }
	lines = append(lines,
		"mount -t proc proc "+q("/proc"),
		"mount --bind "+q("/proc/sys")+" "+q("/proc/sys")+" && mount -o remount,bind,ro "+q("/proc/sys"),
		"mount -t sysfs -o ro sysfs "+q("/sys"),
		"mount -t cgroup2 cgroup2 "+q("/sys/fs/cgroup"),
		"mount -t tmpfs -o mode=0755 tmpfs "+q("/run"),
		"mkdir -p "+q(dir)+" && cp -a "+Quote(o.Work)+"/. "+q(dir)+"/",
		"mount -t tmpfs -o mode=1777 tmpfs "+q("/tmp"),
		// systemd writes status to /dev/console: a pty of its own (script's), never the real one.
		"mount --bind \"$(tty 2>/dev/null || echo /dev/null)\" "+q("/dev/console"),
	)
	boot := "env SYSTEMD_UNIT_PATH=" + dir + "/units: " + SystemdBin + " --unit=" + o.Target + " --log-target=console --log-level=info"
	if r == "" {
		lines = append(lines, o.Setup...)
	} else {
		if len(o.Setup) > 0 {
			lines = append(lines, "chroot "+Quote(r)+" /bin/sh -ec "+Quote(strings.Join(o.Setup, "\n")))
		}
		boot = "chroot " + Quote(r) + " " + boot
	}
	script := strings.Join(append(append([]string{"set -e"}, lines...), "exec "+boot), "\n")
	s := &Systemd{Dir: dir, t: t, console: &syncWriter{}, done: make(chan struct{}), chrooted: r != ""}
	// Tied to the test however it ends: script dies with the test (tied), unshare with script
	// (setpriv's parent-death signal), systemd with unshare (--kill-child), and every process of
	// the PID namespace with systemd, its init.
	s.cmd = exec.Command("script", "-qfec",
		"exec setpriv --pdeathsig KILL unshare --pid --fork --kill-child --mount --net --cgroup --uts --ipc --propagation private sh -c "+Quote(script), "/dev/null")
	s.cmd.Stdout, s.cmd.Stderr = s.console, s.console
	// Wait must not hang on a pipe a stray process in the namespace still holds.
	s.cmd.WaitDelay = 5 * time.Second
	if err := tied.Start(s.cmd); err != nil {
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
	ns := []string{"-t", strconv.Itoa(s.PID1), "-m", "-p"}
	if s.chrooted {
		ns = append(ns, "-r", "-w")
	}
	c := exec.Command("nsenter", append(append(ns, "--", "systemctl"), args...)...)
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
