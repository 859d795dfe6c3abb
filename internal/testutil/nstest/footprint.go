package nstest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/testutil/tied"
)

// MarkEnv names the environment variable that marks a process tree for Footprint: a test that
// starts a child to kill sets MarkEnv=<random> in its environment, and every process the child
// starts inherits it (nstest, nsenter, unshare and the components keep their environment).
const MarkEnv = "NSTEST_MARK"

// Footprint is what a marked process tree holds on this machine while it runs: its processes and
// the PID, network and mount namespaces they are in (this process's own left out). After the tree
// is killed, Left says what of it remains.
type Footprint struct {
	Marker string
	// Procs are the marked processes seen: PID and command line.
	Procs map[int]string
	// PIDNS, NetNS and MntNS are the namespaces (by inode) the marked processes are in.
	PIDNS, NetNS, MntNS map[uint64]bool
}

// TakeFootprint finds every process whose environment carries MarkEnv=marker, and their namespaces.
func TakeFootprint(marker string) (Footprint, error) {
	f := Footprint{Marker: marker, Procs: map[int]string{}, PIDNS: map[uint64]bool{}, NetNS: map[uint64]bool{}, MntNS: map[uint64]bool{}}
	own := map[string]uint64{}
	for _, ns := range []string{"pid", "net", "mnt"} {
		ino, err := nsInode("self", ns)
		if err != nil {
			return f, err
		}
		own[ns] = ino
	}
	for _, pid := range pids() {
		if !marked(pid, marker) {
			continue
		}
		f.Procs[pid] = cmdline(pid)
		for ns, set := range map[string]map[uint64]bool{"pid": f.PIDNS, "net": f.NetNS, "mnt": f.MntNS} {
			if ino, err := nsInode(strconv.Itoa(pid), ns); err == nil && ino != own[ns] {
				set[ino] = true
			}
		}
	}
	return f, nil
}

// Leftovers is what remains of a killed process tree.
type Leftovers struct {
	// Procs are processes still marked, or still in one of the tree's namespaces, and not dead:
	// "PID cmdline".
	Procs []string
	// Dead counts the tree's processes that are dead but not yet reaped: zombies, and namespace
	// inits that have released their namespaces and wait in their exit for the zombies of their
	// namespace. Their parent reaps them, or, their parent killed too, this machine's PID 1 (or a
	// subreaper): how soon is its business, not the tree's.
	Dead int
	// NetNS are the tree's network namespaces still held (by a process, an open descriptor or a
	// bind mount such as a name under /run/netns), and the names `ip netns` lists that held
	// them.
	NetNS []string
	// Mounts are mount points of this machine's mount namespace that the tree made: a namespace
	// bound somewhere (nsfs), or a mount under one of the paths given to Left.
	Mounts []string
}

// Empty reports whether nothing remains.
func (l Leftovers) Empty() bool { return len(l.Procs)+len(l.NetNS)+len(l.Mounts) == 0 }

func (l Leftovers) String() string {
	return fmt.Sprintf("%d processes %q, %d network namespaces %q, %d mounts %q (and %d dead, not yet reaped)", len(l.Procs), l.Procs, len(l.NetNS), l.NetNS, len(l.Mounts), l.Mounts, l.Dead)
}

// Left lists what remains of the tree: marked processes, processes in its namespaces, its network
// namespaces still held by a descriptor or a bind mount (a name in this machine's /run/netns
// included), and mounts in this machine's mount namespace of its namespaces or under any of paths
// (the tree's own directories; a name in /run/netns whose namespace it made is found by its
// namespace, whatever the name).
func (f Footprint) Left(paths ...string) Leftovers {
	var l Leftovers
	held := map[uint64][]string{}
	for _, pid := range pids() {
		if pid == os.Getpid() {
			continue
		}
		p := strconv.Itoa(pid)
		in := marked(pid, f.Marker)
		for ns, set := range map[string]map[uint64]bool{"pid": f.PIDNS, "net": f.NetNS, "mnt": f.MntNS} {
			if ino, err := nsInode(p, ns); err == nil && set[ino] {
				in = true
			}
		}
		if in {
			if dead(pid) {
				l.Dead++
			} else {
				l.Procs = append(l.Procs, p+" "+cmdline(pid))
			}
			continue
		}
		fds, _ := os.ReadDir(filepath.Join("/proc", p, "fd"))
		for _, fd := range fds {
			target, err := os.Readlink(filepath.Join("/proc", p, "fd", fd.Name()))
			if err != nil {
				continue
			}
			if ino, ok := nsLink(target, "net"); ok && f.NetNS[ino] {
				held[ino] = append(held[ino], fmt.Sprintf("descriptor %s of %s %s", fd.Name(), p, cmdline(pid)))
			}
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for line := range strings.SplitSeq(string(mounts), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		root, point := fields[3], unescapeMount(fields[4])
		if ino, ok := nsLink(root, "net"); ok && f.NetNS[ino] {
			held[ino] = append(held[ino], "bind mount "+point)
			l.Mounts = append(l.Mounts, point)
			continue
		}
		if ino, ok := nsLink(root, "mnt"); ok && f.MntNS[ino] {
			l.Mounts = append(l.Mounts, point)
			continue
		}
		for _, p := range paths {
			if p != "" && (point == p || strings.HasPrefix(point, strings.TrimSuffix(p, "/")+"/")) {
				l.Mounts = append(l.Mounts, point)
				break
			}
		}
	}
	for ino, by := range held {
		slices.Sort(by)
		l.NetNS = append(l.NetNS, fmt.Sprintf("net:[%d] held by %s", ino, strings.Join(by, ", ")))
	}
	slices.Sort(l.NetNS)
	return l
}

// Kill sends SIGKILL to every process of l, so a failed test still leaves the machine clean.
func (l Leftovers) Kill() {
	for _, p := range l.Procs {
		if pid, err := strconv.Atoi(strings.Fields(p)[0]); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func pids() []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// dead reports whether pid is a zombie or exiting (PF_EXITING): it runs no code of its own any
// more and has released its namespaces.
func dead(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 7 {
		return false
	}
	const pfExiting = 0x4 // include/linux/sched.h
	flags, err := strconv.ParseUint(f[6], 10, 64)
	return f[0] == "Z" || f[0] == "X" || err == nil && flags&pfExiting != 0
}

func marked(pid int, marker string) bool {
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return false
	}
	want := []byte(MarkEnv + "=" + marker)
	for v := range bytes.SplitSeq(env, []byte{0}) {
		if bytes.Equal(v, want) {
			return true
		}
	}
	return false
}

func cmdline(pid int) string {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.TrimSpace(string(bytes.ReplaceAll(data, []byte{0}, []byte{' '})))
}

func nsInode(pid, ns string) (uint64, error) {
	target, err := os.Readlink(filepath.Join("/proc", pid, "ns", ns))
	if err != nil {
		return 0, err
	}
	ino, ok := nsLink(target, ns)
	if !ok {
		return 0, fmt.Errorf("/proc/%s/ns/%s: unexpected link %q", pid, ns, target)
	}
	return ino, nil
}

// nsLink parses a namespace's name as /proc links and mountinfo show it: "net:[4026532301]".
func nsLink(s, ns string) (uint64, bool) {
	rest, ok := strings.CutPrefix(s, ns+":[")
	if !ok {
		return 0, false
	}
	ino, err := strconv.ParseUint(strings.TrimSuffix(rest, "]"), 10, 64)
	return ino, err == nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ChildTest is this test binary run again as a child process that runs one test, marked with
// MarkEnv so TakeFootprint finds everything it starts: for tests that kill a test and look for what
// it left.
type ChildTest struct {
	Cmd    *exec.Cmd
	Marker string
	// Tmp is the child's TMPDIR: its t.TempDir, its sandboxes' directories and the tools it
	// builds are under it.
	Tmp string

	out  *syncWriter
	done chan struct{}
}

// StartChildTest runs `os.Args[0] -test.run=^name$ -test.v` with env added to this process's
// environment, MarkEnv set to a fresh marker and TMPDIR to a directory of t's. The child is tied to
// this process (internal/testutil/tied): it dies with it.
func StartChildTest(t testing.TB, name string, env ...string) *ChildTest {
	t.Helper()
	c := &ChildTest{Marker: fmt.Sprintf("%d-%s", os.Getpid(), randHex(t, 8)), Tmp: t.TempDir(), out: &syncWriter{}, done: make(chan struct{})}
	c.Cmd = exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.v", "-test.count=1", "-test.timeout=10m")
	c.Cmd.Env = append(append(os.Environ(), env...), MarkEnv+"="+c.Marker, "TMPDIR="+c.Tmp)
	c.Cmd.Stdout, c.Cmd.Stderr = c.out, c.out
	if err := tied.Start(c.Cmd); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Cmd.Wait(); close(c.done) }()
	t.Cleanup(func() {
		_ = c.Cmd.Process.Kill()
		<-c.done
		if t.Failed() {
			t.Logf("the child test's output:\n%s", c.Output())
		}
	})
	return c
}

// Output is what the child printed so far.
func (c *ChildTest) Output() string { return c.out.String() }

// WaitFor waits until cond holds, failing t if the child exits first or within passes.
func (c *ChildTest) WaitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		select {
		case <-c.done:
			t.Fatalf("the child test exited before %s:\n%s", what, c.Output())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// KillLeavesNothing SIGKILLs the child, which runs none of its cleanups, and fails t unless nothing
// of fp (TakeFootprint while it ran) and of its directories is left within the given time; what is
// left is killed, so the machine is left clean either way.
func (c *ChildTest) KillLeavesNothing(t testing.TB, fp Footprint, within time.Duration) {
	t.Helper()
	t.Logf("killing the child test with %d processes, %d PID, %d network and %d mount namespaces", len(fp.Procs), len(fp.PIDNS), len(fp.NetNS), len(fp.MntNS))
	start := time.Now()
	_ = c.Cmd.Process.Kill()
	<-c.done
	deadline := start.Add(within)
	// The directories the child made for the whole of its process (ProcessTempDir: its built tools,
	// the demo's), which their remover takes away once the process is gone.
	processDirs := filepath.Join(c.Tmp, fmt.Sprintf("*-%d-*", c.Cmd.Process.Pid))
	for {
		l := fp.Left(c.Tmp)
		dirs, _ := filepath.Glob(processDirs)
		if l.Empty() && len(dirs) == 0 {
			t.Logf("nothing left %v after the SIGKILL (%d dead processes not yet reaped by their reaper)", time.Since(start).Round(time.Millisecond), l.Dead)
			return
		}
		if time.Now().After(deadline) {
			l.Kill()
			t.Fatalf("%v after the SIGKILL of the child test, left: %s; its process's directories %q", within, l, dirs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
