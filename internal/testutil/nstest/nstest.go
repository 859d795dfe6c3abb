// Package nstest gives privileged tests a node of their own: a network namespace plus a private mount
// namespace (tmpfs /run, the namespace's own /sys, an empty /etc/resolv.conf) held open by a
// long-lived process, in which real components (systemd-resolved, networkd, dnsmasq, dhclient,
// CoreDNS, iptables) and the nodedns binary run. Nothing it does is visible outside the sandbox: the
// host's /etc/resolv.conf, /etc/systemd, /etc/netplan and eth0 are never touched.
//
// Tests using it call Require first: they run only as root with NODEDNS_PRIVILEGED=1 (.ci/run sets
// it), so `go test ./...` on a laptop skips them.
package nstest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Require skips t unless privileged tests are enabled and possible here.
func Require(t testing.TB) {
	t.Helper()
	if os.Getenv("NODEDNS_PRIVILEGED") != "1" {
		t.Skip("privileged test: set NODEDNS_PRIVILEGED=1 and run as root (.ci/run does)")
	}
	if os.Geteuid() != 0 {
		t.Skip("privileged test: needs root")
	}
	for _, tool := range []string{"ip", "unshare", "nsenter", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("privileged test: needs %s", tool)
		}
	}
}

// Sandbox is one simulated node.
type Sandbox struct {
	// Name is the network namespace's name (ip netns).
	Name string
	// PID is the process holding the sandbox's namespaces, as this machine's PID namespace numbers
	// it (with Options.PIDNamespace, the sandbox's init: PID 1 inside).
	PID int
	// Opts are the namespaces it was made with.
	Opts Options

	t      testing.TB
	dir    string
	holder *exec.Cmd
	mu     sync.Mutex
	procs  []*exec.Cmd
	logs   []string
	exited chan error
}

var seq atomic.Int64

// Options selects namespaces beyond the network and mount ones every sandbox has.
type Options struct {
	// PIDNamespace gives the sandbox its own PID namespace with its own /proc (unshare -p -f
	// --mount-proc): a process in it sees only the sandbox's processes. Tests of anything that scans
	// /proc (pod network namespaces, NetworkManager's children) need it, or they would see this
	// machine's processes. The sandbox's init is a shell loop that reaps orphans.
	PIDNamespace bool
	// UTSNamespace gives the sandbox its own hostname (unshare -u), so a component that sets the
	// hostname (NetworkManager) cannot change this machine's.
	UTSNamespace bool
	// Suite is the components the sandbox runs (the zero Suite: this machine's Debian 12). With a
	// suite's tree the sandbox's root is an overlay of the tree (its upper layer in the sandbox's
	// directory, so the cached tree stays clean) with its own /proc, the namespace's sysfs, a tmpfs
	// /run and the host's /dev; this machine's temporary directory (the nodedns binary Build makes,
	// every sandbox's Dir) is bound at the same path, and Cmd, Run, Try and Start run chrooted in
	// it with SYSTEMD_IGNORE_CHROOT=1.
	Suite Suite
}

// New makes a sandbox with a network and a private mount namespace, and removes it (and everything
// running in it) when the test ends.
func New(t testing.TB) *Sandbox { return NewWith(t, Options{}) }

// NewWith makes a sandbox with the namespaces o asks for besides the network and mount ones.
func NewWith(t testing.TB, o Options) *Sandbox {
	t.Helper()
	Require(t)
	sb := &Sandbox{t: t, dir: t.TempDir(), Name: fmt.Sprintf("ndt%d-%d", os.Getpid(), seq.Add(1)), Opts: o}
	if out, err := exec.Command("ip", "netns", "add", sb.Name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", sb.Name, err, out)
	}
	t.Cleanup(sb.cleanup)

	empty := filepath.Join(sb.dir, "empty-resolv.conf")
	ready := filepath.Join(sb.dir, "ready")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The holder enters the netns, unshares a private mount namespace, sets up the mounts every
	// component expects, says it is ready, and sleeps: its PID is the sandbox's handle. exec keeps
	// one PID through ip netns exec, unshare, sh and sleep.
	lines := []string{
		"set -e",
		"ip link set lo up",
		"mount -t tmpfs -o mode=0755 tmpfs /run",
		"mkdir -p /run/systemd /run/dbus /run/netns",
		// ip netns exec has already mounted a sysfs showing the namespace's own links.
		"mount --bind " + Quote(empty) + " /etc/resolv.conf",
	}
	if o.Suite.Chrooted() {
		lines = append(lines, sb.chrootSetup(t, empty)...)
	}
	lines = append(lines, ": > "+Quote(ready))
	idle := "exec sleep infinity"
	unshare := []string{"netns", "exec", sb.Name, "unshare", "-m"}
	if o.UTSNamespace {
		unshare = append(unshare, "-u")
	}
	if o.PIDNamespace {
		// The shell is PID 1 of the new namespace: it must reap the orphans the components leave
		// (a daemon's double fork), so it waits in a loop instead of exec'ing sleep.
		unshare = append(unshare, "-p", "-f", "--mount-proc")
		idle = "trap 'exit 0' TERM\nwhile :; do sleep 3600 & wait; done"
	}
	if o.Suite.Chrooted() {
		// The holder itself enters the tree: /proc/PID/root (Path) and nsenter -r (Cmd) are then
		// the tree's root.
		idle = "exec chroot " + Quote(sb.root()) + " /bin/sh -c " + Quote(idle)
	}
	script := strings.Join(append(lines, idle), "\n")
	unshare = append(unshare, "--propagation", "private", "sh", "-c", script)
	sb.holder = exec.Command("ip", unshare...)
	out := &strings.Builder{}
	sb.holder.Stdout, sb.holder.Stderr = out, out
	if err := sb.holder.Start(); err != nil {
		t.Fatalf("start sandbox holder: %v", err)
	}
	sb.PID = sb.holder.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- sb.holder.Wait() }()
	deadline := time.After(10 * time.Second)
	for {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		select {
		case err := <-exited:
			sb.holder = nil
			t.Fatalf("sandbox %s did not come up (%v): %s", sb.Name, err, out.String())
		case <-deadline:
			t.Fatalf("sandbox %s did not come up: %s", sb.Name, out.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	sb.exited = exited
	if o.PIDNamespace {
		// unshare -f forks the namespace's init: its host PID is the holder's only child.
		pid, err := ChildPID(sb.PID)
		if err != nil {
			t.Fatalf("sandbox %s: find its init: %v", sb.Name, err)
		}
		sb.PID = pid
	}
	return sb
}

// ChildPID returns the only child of pid (from /proc/PID/task/PID/children).
func ChildPID(pid int) (int, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(data))
	if len(f) != 1 {
		return 0, fmt.Errorf("process %d has children %q, want one", pid, f)
	}
	var child int
	if _, err := fmt.Sscan(f[0], &child); err != nil {
		return 0, err
	}
	return child, nil
}

// Quote single-quotes s for sh.
func Quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func (sb *Sandbox) cleanup() {
	sb.mu.Lock()
	procs := sb.procs
	sb.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		if p := procs[i]; p.Process != nil {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
	}
	// Anything else still in the netns (a daemon that forked) goes too.
	if out, err := exec.Command("ip", "netns", "pids", sb.Name).Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			_ = exec.Command("kill", "-9", f).Run()
		}
	}
	if sb.Opts.PIDNamespace && sb.PID > 0 {
		// Killing a PID namespace's init kills every process in it.
		_ = syscall.Kill(sb.PID, syscall.SIGKILL)
	}
	if sb.holder != nil && sb.holder.Process != nil {
		_ = sb.holder.Process.Kill()
		if sb.exited != nil {
			<-sb.exited
		}
	}
	_ = exec.Command("ip", "netns", "del", sb.Name).Run()
}

// Cmd returns a command that runs inside the sandbox's namespaces (mount and network, and PID and
// UTS when the sandbox has them).
func (sb *Sandbox) Cmd(ctx context.Context, name string, args ...string) *exec.Cmd {
	full := []string{"-t", fmt.Sprint(sb.PID), "-m", "-n"}
	if sb.Opts.UTSNamespace {
		full = append(full, "-u")
	}
	if sb.Opts.PIDNamespace {
		full = append(full, "-p") // nsenter forks, so the command is in the namespace
	}
	if sb.Opts.Suite.Chrooted() {
		// Into the holder's root (the tree) and working directory; systemd's tools act although
		// they see a chroot (networkctl would answer "Running in chroot, ignoring command").
		full = append(full, "-r", "-w", "--", "env", "SYSTEMD_IGNORE_CHROOT=1")
	} else {
		full = append(full, "--")
	}
	full = append(append(full, name), args...)
	return exec.CommandContext(ctx, "nsenter", full...)
}

// Run runs a shell script inside the sandbox and returns its combined output; an error fails the test.
func (sb *Sandbox) Run(t testing.TB, script string) string {
	t.Helper()
	out, err := sb.Cmd(context.Background(), "sh", "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("in sandbox %s: %v\nscript:\n%s\noutput:\n%s", sb.Name, err, script, out)
	}
	return string(out)
}

// Try runs a shell script inside the sandbox and returns its output and error, for scripts allowed to fail.
func (sb *Sandbox) Try(script string) (string, error) {
	out, err := sb.Cmd(context.Background(), "sh", "-c", script).CombinedOutput()
	return string(out), err
}

// Start runs a program in the background inside the sandbox; it is killed when the test ends. Its
// output goes to the returned command's log file (LogPath).
func (sb *Sandbox) Start(t testing.TB, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := sb.Cmd(context.Background(), name, args...)
	logf, err := os.CreateTemp(sb.dir, filepath.Base(name)+"-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s in sandbox: %v", name, err)
	}
	sb.mu.Lock()
	sb.procs = append(sb.procs, cmd)
	sb.logs = append(sb.logs, logf.Name())
	sb.mu.Unlock()
	t.Cleanup(func() {
		if t.Failed() {
			data, _ := os.ReadFile(logf.Name())
			t.Logf("log of %s %v:\n%s", name, args, data)
		}
		logf.Close()
	})
	return cmd
}

// Path is the host path of a path inside the sandbox's private mounts (through /proc/PID/root), for
// reading or writing the sandbox's /run from the test.
func (sb *Sandbox) Path(p string) string {
	return fmt.Sprintf("/proc/%d/root%s", sb.PID, p)
}

// Dir is a host directory private to this sandbox, visible inside at the same path.
func (sb *Sandbox) Dir() string { return sb.dir }

// WaitFor polls cond until it holds or timeout passes; it fails the test with what on timeout.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

const busConfig = `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=/run/dbus/system_bus_socket</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow receive_sender="*"/>
    <allow eavesdrop="true"/>
  </policy>
</busconfig>
`

// SystemBus starts a private system bus (dbus-daemon) inside the sandbox at
// /run/dbus/system_bus_socket, with a policy that lets every test process own and call anything.
// It returns the daemon so a test can kill and restart it.
func (sb *Sandbox) SystemBus(t testing.TB) *exec.Cmd {
	t.Helper()
	if _, err := exec.LookPath("dbus-daemon"); err != nil {
		t.Skip("needs dbus-daemon (apt-get install dbus-daemon)")
	}
	conf := filepath.Join(sb.dir, "system-bus.conf")
	if err := os.WriteFile(conf, []byte(busConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := sb.Path("/run/dbus/system_bus_socket")
	_ = os.Remove(sock)
	cmd := sb.Start(t, "dbus-daemon", "--config-file="+conf, "--nofork", "--nopidfile")
	WaitFor(t, 10*time.Second, "the sandbox system bus socket", func() bool {
		_, err := os.Stat(sock)
		return err == nil
	})
	return cmd
}

// BusAddress is the D-Bus address of the sandbox's system bus as seen from the host (the test
// process), for a godbus client in the test.
func (sb *Sandbox) BusAddress() string {
	return "unix:path=" + sb.Path("/run/dbus/system_bus_socket")
}

var vethSeq atomic.Int64

// Veth links two sandboxes with a veth pair and gives each end an address with prefix
// ("10.77.0.1/24"); the interfaces are named nd<N>a (in a) and nd<N>b (in b), and returned.
func Veth(t testing.TB, a, b *Sandbox, aAddr, bAddr string) (aIf, bIf string) {
	t.Helper()
	n := vethSeq.Add(1)
	aIf, bIf = fmt.Sprintf("nd%d%da", os.Getpid()%10000, n), fmt.Sprintf("nd%d%db", os.Getpid()%10000, n)
	steps := [][]string{
		{"link", "add", aIf, "type", "veth", "peer", "name", bIf},
		{"link", "set", aIf, "netns", a.Name},
		{"link", "set", bIf, "netns", b.Name},
	}
	for _, s := range steps {
		if out, err := exec.Command("ip", s...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", s, err, out)
		}
	}
	a.Run(t, fmt.Sprintf("ip addr add %s dev %s && ip link set %s up", aAddr, aIf, aIf))
	b.Run(t, fmt.Sprintf("ip addr add %s dev %s && ip link set %s up", bAddr, bIf, bIf))
	return aIf, bIf
}

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// Build builds the nodedns binary once per test process and returns its path (visible inside every
// sandbox: the sandboxes share the host's filesystem but /run, /sys and /etc/resolv.conf).
func Build(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		out, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			buildErr = fmt.Errorf("go env GOMOD: %w", err)
			return
		}
		modDir := filepath.Dir(strings.TrimSpace(string(out)))
		dir, err := os.MkdirTemp("", "nodedns-bin-")
		if err != nil {
			buildErr = err
			return
		}
		buildPath = filepath.Join(dir, "nodedns")
		cmd := exec.Command("go", "build", "-o", buildPath, "./cmd/nodedns")
		cmd.Dir = modDir
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}
