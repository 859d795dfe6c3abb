// Package nstest gives privileged tests a node of their own: a network, mount and PID namespace
// (tmpfs /run, the namespace's own /sys and /proc, an empty /etc/resolv.conf) whose init is tied to
// the test, in which real components (systemd-resolved, networkd, dnsmasq, dhclient, CoreDNS,
// iptables) and the nodedns binary run. Nothing it does is visible outside the sandbox: the host's
// /etc/resolv.conf, /etc/systemd, /etc/netplan and eth0 are never touched, and nothing it starts
// outlives the test, however the test ends (a SIGKILL from outside included): every process of a
// sandbox is in its PID namespace, whose init the kernel kills when the test process dies, and the
// network namespace and mounts go with the last process holding them (no name under /run/netns).
//
// Tests using it call Require first: they run only as root with NODEDNS_PRIVILEGED=1 (.ci/run sets
// it), so `go test ./...` on a laptop skips them.
package nstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/testutil/tied"
	"golang.org/x/sys/unix"
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
	for _, tool := range []string{"ip", "unshare", "nsenter", "setpriv", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("privileged test: needs %s", tool)
		}
	}
}

// Sandbox is one simulated node.
type Sandbox struct {
	// Name names the sandbox in messages (it is no name under /run/netns: a named network
	// namespace is a mount in this machine's /run/netns, which would outlive a killed test).
	Name string
	// PID is the sandbox's init (PID 1 inside) as this machine's PID namespace numbers it: its
	// namespaces are /proc/PID/ns/*.
	PID int
	// Opts are the namespaces it was made with.
	Opts Options

	t      testing.TB
	dir    string
	enter  string   // the enter helper (internal/testutil/nstest/enter), for Cmd
	pidns  *os.File // the sandbox's PID namespace, joined to fork into it
	holder *exec.Cmd
	mu     sync.Mutex
	procs  []*exec.Cmd
	reaped map[*exec.Cmd]chan struct{} // StartPID's commands, waited for by StartPID
	logs   []string
	relay  bool // SystemBus started the bus relay
	exited chan error
}

var seq atomic.Int64

// Options selects namespaces beyond the network, mount and PID ones every sandbox has.
type Options struct {
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

// New makes a sandbox with a network, a private mount and a PID namespace, and removes it (and
// everything running in it) when the test ends.
func New(t testing.TB) *Sandbox { return NewWith(t, Options{}) }

// NewWith makes a sandbox with the namespaces o asks for besides the network, mount and PID ones.
//
// The sandbox is `unshare --fork --kill-child --pid --mount-proc --mount --net` started with a
// parent-death signal (internal/testutil/tied): when the test process dies, the kernel kills
// unshare, unshare's --kill-child kills the namespace's init, and the death of a PID namespace's
// init kills every process in it (pid_namespaces(7)). The network namespace and the private mounts
// then have no process left to hold them.
func NewWith(t testing.TB, o Options) *Sandbox {
	t.Helper()
	Require(t)
	sb := &Sandbox{t: t, dir: t.TempDir(), Name: fmt.Sprintf("ndt%d-%d", os.Getpid(), seq.Add(1)), Opts: o, enter: enterTool(t)}
	empty := filepath.Join(sb.dir, "empty-resolv.conf")
	ready := filepath.Join(sb.dir, "ready")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The init sets up the mounts every component expects, says it is ready, and stays: PID 1 must
	// reap the orphans the components leave (a daemon's double fork), so it waits in a loop instead
	// of exec'ing sleep.
	lines := []string{
		"set -e",
		"ip link set lo up",
		// The namespace's own sysfs: /sys/class/net shows its links only.
		"mount -t sysfs sysfs /sys",
		"mount -t tmpfs -o mode=0755 tmpfs /run",
		"mkdir -p /run/systemd /run/dbus /run/netns",
		"mount --bind " + Quote(empty) + " /etc/resolv.conf",
	}
	if o.Suite.Chrooted() {
		lines = append(lines, sb.chrootSetup(t, empty)...)
	}
	lines = append(lines, ": > "+Quote(ready))
	idle := "trap 'exit 0' TERM\nwhile :; do sleep 3600 & wait; done"
	if o.Suite.Chrooted() {
		// The init itself enters the tree: /proc/PID/root (Path) and nsenter -r (Cmd) are then
		// the tree's root.
		idle = "exec chroot " + Quote(sb.root()) + " /bin/sh -c " + Quote(idle)
	}
	script := strings.Join(append(lines, idle), "\n")
	args := []string{"--fork", "--kill-child", "--pid", "--mount-proc", "--mount", "--net"}
	if o.UTSNamespace {
		args = append(args, "--uts")
	}
	args = append(args, "--propagation", "private", "sh", "-c", script)
	sb.holder = exec.Command("unshare", args...)
	out := &syncWriter{}
	sb.holder.Stdout, sb.holder.Stderr = out, out
	if err := tied.Start(sb.holder); err != nil {
		t.Fatalf("start sandbox holder: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- sb.holder.Wait() }()
	sb.exited = exited
	t.Cleanup(sb.cleanup)
	deadline := time.After(10 * time.Second)
	for {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("sandbox %s did not come up (%v): %s", sb.Name, err, out.String())
		case <-deadline:
			t.Fatalf("sandbox %s did not come up: %s", sb.Name, out.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	// unshare --fork forks the namespace's init: its host PID is the holder's only child.
	pid, err := ChildPID(sb.holder.Process.Pid)
	if err != nil {
		t.Fatalf("sandbox %s: find its init: %v", sb.Name, err)
	}
	sb.PID = pid
	if sb.pidns, err = os.Open(fmt.Sprintf("/proc/%d/ns/pid", pid)); err != nil {
		t.Fatalf("sandbox %s: %v", sb.Name, err)
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
	// Killing a PID namespace's init kills every process in it, and the kernel has reaped them
	// all before the init's own exit completes; the namespaces go with the last of them.
	if sb.PID > 0 {
		_ = syscall.Kill(sb.PID, syscall.SIGKILL)
	}
	if sb.holder.Process != nil {
		_ = sb.holder.Process.Kill()
		err := <-sb.exited
		sb.exited <- err
	}
	sb.mu.Lock()
	procs := sb.procs
	sb.mu.Unlock()
	for _, p := range procs {
		_ = p.Process.Kill() // gone with the namespace already; Wait reaps it
		sb.mu.Lock()
		reaped := sb.reaped[p]
		sb.mu.Unlock()
		if reaped != nil {
			<-reaped
		} else {
			_ = p.Wait()
		}
	}
	if sb.pidns != nil {
		sb.pidns.Close()
	}
}

// command is the nsenter command that runs name in the sandbox's mount, network (and UTS)
// namespaces; it joins the PID namespace only when forked into it (spawn, or the enter helper).
func (sb *Sandbox) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "nsenter", sb.nsenterArgs(name, args)...)
}

func (sb *Sandbox) nsenterArgs(name string, args []string) []string {
	full := []string{"-t", fmt.Sprint(sb.PID), "-m", "-n"}
	if sb.Opts.UTSNamespace {
		full = append(full, "-u")
	}
	if sb.Opts.Suite.Chrooted() {
		// Into the init's root (the tree) and working directory; systemd's tools act although
		// they see a chroot (networkctl would answer "Running in chroot, ignoring command").
		full = append(full, "-r", "-w", "--", "env", "SYSTEMD_IGNORE_CHROOT=1")
	} else {
		full = append(full, "--")
	}
	return append(append(full, name), args...)
}

// spawn starts a command of sb.command forked into the sandbox's PID namespace, so the process
// exec.Cmd holds is the program itself (nsenter without --pid execs it in place). The fork is made
// from a thread that joins the namespace for its children and then ends with its goroutine, locked
// and never unlocked: no other goroutine ever forks from it into the sandbox.
func (sb *Sandbox) spawn(cmd *exec.Cmd) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		if err := unix.Setns(int(sb.pidns.Fd()), unix.CLONE_NEWPID); err != nil {
			errc <- fmt.Errorf("join sandbox %s's PID namespace: %w", sb.Name, err)
			return
		}
		errc <- cmd.Start()
	}()
	return <-errc
}

// Cmd returns a command that runs inside the sandbox's namespaces (mount, network and PID, and
// UTS when the sandbox has it), for the caller to start. Its process is the enter helper
// (internal/testutil/nstest/enter), which forks the program into the sandbox's PID namespace,
// passes every signal it gets on to it (SIGTERM, SIGINT, SIGHUP, SIGQUIT …), exits as it did, and
// takes it along when killed: signal and kill it as the program. The program itself is the
// process's only child (ChildPID), numbered as this machine numbers it.
func (sb *Sandbox) Cmd(ctx context.Context, name string, args ...string) *exec.Cmd {
	argv := append([]string{sb.pidns.Name(), "nsenter"}, sb.nsenterArgs(name, args)...)
	return exec.CommandContext(ctx, sb.enter, argv...)
}

// Run runs a shell script inside the sandbox and returns its combined output; an error fails the test.
func (sb *Sandbox) Run(t testing.TB, script string) string {
	t.Helper()
	out, err := sb.Try(script)
	if err != nil {
		t.Fatalf("in sandbox %s: %v\nscript:\n%s\noutput:\n%s", sb.Name, err, script, out)
	}
	return out
}

// Try runs a shell script inside the sandbox and returns its output and error, for scripts allowed to fail.
func (sb *Sandbox) Try(script string) (string, error) {
	cmd := sb.command(context.Background(), "sh", "-c", script)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := sb.spawn(cmd); err != nil {
		return "", err
	}
	err := cmd.Wait()
	return out.String(), err
}

// Start runs a program in the background inside the sandbox; it is killed when the test ends. The
// returned command's process is the program itself (its PID as this machine numbers it: signal it,
// kill it, wait for it). Its output goes to the log file that is the command's Stdout.
func (sb *Sandbox) Start(t testing.TB, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := sb.command(context.Background(), name, args...)
	logf, err := os.CreateTemp(sb.dir, filepath.Base(name)+"-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := sb.spawn(cmd); err != nil {
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

// HostPID returns the PID this machine gives the sandbox's process inside (as the sandbox numbers
// it: $$, $! and PID files written inside), for signalling it from the test.
func (sb *Sandbox) HostPID(inside int) (int, error) {
	ns, err := nsInode(strconv.Itoa(sb.PID), "pid")
	if err != nil {
		return 0, err
	}
	for _, pid := range pids() {
		if got, err := nsInode(strconv.Itoa(pid), "pid"); err != nil || got != ns {
			continue
		}
		if n, err := nsPID(pid); err == nil && n == inside {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no process %d in sandbox %s", inside, sb.Name)
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
	sb.mu.Lock()
	relay := !sb.relay
	sb.relay = true
	sb.mu.Unlock()
	if relay {
		sb.Start(t, tool(t, "./internal/testutil/nstest/busproxy"), relaySocket, "/run/dbus/system_bus_socket")
		WaitFor(t, 10*time.Second, "the sandbox system bus relay's socket", func() bool {
			_, err := os.Stat(sb.Path(relaySocket))
			return err == nil
		})
	}
	return cmd
}

// BusAddress is the D-Bus address of the sandbox's system bus for a client in the test process
// (after SystemBus): a relay inside the sandbox (internal/testutil/nstest/busproxy, listening in the
// sandbox's /run: a path through the sandbox's directory can pass the 108 bytes a unix socket's
// path may have), so the bus
// sees a caller in the sandbox's PID namespace. A caller whose PID the bus cannot give (the test
// process is outside that namespace) is refused by NetworkManager 1.42 ("Unable to determine UID
// of the request") and aborts systemd-resolved 252 on its privileged calls (SetLinkDNSEx: "Assertion
// 'c->pid > 0' failed at src/libsystemd/sd-bus/bus-creds.c:279, function sd_bus_creds_get_pid()").
// The relay dials the bus anew for each connection, so it outlives a restart of the bus.
func (sb *Sandbox) BusAddress() string { return "unix:path=" + sb.Path(relaySocket) }

// relaySocket is where the bus relay listens, inside the sandbox.
const relaySocket = "/run/nstest-bus-relay.sock"

var vethSeq atomic.Int64

// Veth links two sandboxes with a veth pair and gives each end an address with prefix
// ("10.77.0.1/24"); the interfaces are named nd<N>a (in a) and nd<N>b (in b), and returned. The
// pair is made with each end in its sandbox at once: it never exists in this machine's network
// namespace, so a test killed meanwhile leaves no link behind.
func Veth(t testing.TB, a, b *Sandbox, aAddr, bAddr string) (aIf, bIf string) {
	t.Helper()
	n := vethSeq.Add(1)
	aIf, bIf = fmt.Sprintf("nd%d%da", os.Getpid()%10000, n), fmt.Sprintf("nd%d%db", os.Getpid()%10000, n)
	VethPair(t, a, b, aIf, bIf)
	a.Run(t, fmt.Sprintf("ip addr add %s dev %s && ip link set %s up", aAddr, aIf, aIf))
	b.Run(t, fmt.Sprintf("ip addr add %s dev %s && ip link set %s up", bAddr, bIf, bIf))
	return aIf, bIf
}

// VethPair makes a veth pair with aIf in sandbox a and bIf in b, created there (never in this
// machine's network namespace), down and without addresses.
func VethPair(t testing.TB, a, b *Sandbox, aIf, bIf string) {
	t.Helper()
	argv := []string{"link", "add", aIf, "netns", strconv.Itoa(a.PID), "type", "veth", "peer", "name", bIf, "netns", strconv.Itoa(b.PID)}
	if out, err := exec.Command("ip", argv...).CombinedOutput(); err != nil {
		t.Fatalf("ip %v: %v: %s", argv, err, out)
	}
}

// Build builds the nodedns binary once per test process and returns its path (visible inside every
// sandbox: the sandboxes share the host's filesystem but /run, /sys and /etc/resolv.conf).
func Build(t testing.TB) string {
	t.Helper()
	return tool(t, "./cmd/nodedns")
}

// EnterEnv names the environment variable holding the enter helper, built already (make demo builds
// it, so the demo needs no Go toolchain at run time); without it the helper is built once per test
// process.
const EnterEnv = "NSTEST_ENTER"

// enterTool is the enter helper Cmd runs (internal/testutil/nstest/enter).
func enterTool(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(EnterEnv); p != "" {
		return p
	}
	return tool(t, "./internal/testutil/nstest/enter")
}

var tools = struct {
	sync.Mutex
	dir   string
	built map[string]*builtTool
}{built: map[string]*builtTool{}}

type builtTool struct {
	once sync.Once
	path string
	err  error
}

// tool builds the main package pkg of this module ("./cmd/nodedns") once per test process, into one
// temporary directory for all of them, and returns the binary's path.
func tool(t testing.TB, pkg string) string {
	t.Helper()
	tools.Lock()
	b := tools.built[pkg]
	if b == nil {
		b = &builtTool{}
		tools.built[pkg] = b
	}
	tools.Unlock()
	b.once.Do(func() { b.path, b.err = buildTool(pkg) })
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

func buildTool(pkg string) (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	tools.Lock()
	if tools.dir == "" {
		if tools.dir, err = ProcessTempDir("nodedns-bin"); err != nil {
			tools.Unlock()
			return "", err
		}
	}
	dir := tools.dir
	tools.Unlock()
	bin := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(out)))
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v: %s", pkg, err, out)
	}
	return bin, nil
}

// ProcessTempDir makes a temporary directory named after prefix and this process's PID, for files
// that must outlive any one test of the process, and removes it when the process ends, however it
// ends (removeAtExit). It first removes those of processes that are gone, which their remover
// should have done: a remover killed from outside runs no rm either.
func ProcessTempDir(prefix string) (string, error) {
	old, _ := filepath.Glob(filepath.Join(os.TempDir(), prefix+"-*-*"))
	for _, d := range old {
		f := strings.SplitN(strings.TrimPrefix(filepath.Base(d), prefix+"-"), "-", 2)
		pid, err := strconv.Atoi(f[0])
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(d)
		}
	}
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s-%d-", prefix, os.Getpid()))
	if err != nil {
		return "", err
	}
	if err := removeAtExit(dir); err != nil {
		_ = os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// atExit holds the write ends of removeAtExit's pipes for the life of the process (an *os.File no
// longer referenced would be closed by its finalizer).
var atExit struct {
	sync.Mutex
	pipes []*os.File
}

// removeAtExit starts a remover of dir that waits for this process to end, however it ends: it
// reads a pipe whose only write end this process holds (close-on-exec, so no other child inherits
// it), which the kernel closes when the process exits or is killed; then it removes dir. Without
// it the last test process of a run left its built tools (30 MB) until the next one swept them. Its
// own session, so a Ctrl-C to the terminal's process group does not kill it with the tests.
func removeAtExit(dir string) error {
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("remover of %s: %w", dir, err)
	}
	defer r.Close()
	cmd := exec.Command("sh", "-c", `cat > /dev/null; exec rm -rf -- "$1"`, "sh", dir)
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("remover of %s: %w", dir, err)
	}
	// Never waited for: it ends with this process, and is then its new parent's to reap.
	_ = cmd.Process.Release()
	atExit.Lock()
	atExit.pipes = append(atExit.pipes, w)
	atExit.Unlock()
	return nil
}
