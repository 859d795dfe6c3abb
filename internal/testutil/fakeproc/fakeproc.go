// Package fakeproc is test-only: it lays out /proc-shaped trees for the readers of other processes
// (the running kubelet, docs/contract.md "Kubelet's config"), with what the kernel would say of
// each process: its comm, command line, environment, working directory, stat (start time and
// parent), status (uids and gids), namespace links, executable and root.
//
// What is faked and what is not: status and the namespace links are text the test writes (the
// kernel's word, as a test wants it); the executable link points at a real file of this machine,
// whose owner and mode the reader stats for real: by default the program sh is (root's, in root's
// directories, on any Linux machine), else a file the test made. The root link points at this
// machine's /, so the executable's directories are this machine's too.
package fakeproc

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// Btime is the boot time every tree's /proc/stat says (Unix seconds).
const Btime = 1700000000

// Proc is one process.
type Proc struct {
	Comm string
	Argv []string
	// Cwd is the working directory link's target, "" for none.
	Cwd string
	// UID is its uid and gid, all four of each (0: root's). Status, when set, replaces the whole
	// status file.
	UID    int
	Status string
	// Exe is the host path the executable link points at, "" for RootProgram.
	Exe string
	// NS is the inode number its PID and mount namespace links name ("4026532201"): "" is PID
	// 1's.
	NS string
	// Start is its start time in clock ticks since boot (stat's field 22); PPID its parent.
	Start uint64
	PPID  int
	// Environ is its environment.
	Environ []string
}

// RootProgram is a program of this machine that root owns and only root can write, in directories
// likewise (sh, its symlinks resolved: the kernel's exe link names no symlink).
func RootProgram(t testing.TB) string {
	t.Helper()
	p, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		t.Skipf("no /bin/sh to stand in for root's kubelet: %v", err)
	}
	return p
}

// Write lays the processes out in a new temporary directory and returns it. PID 1 is always there
// (an init of root's, unless procs has one): the namespaces of the others are compared with its.
func Write(t testing.TB, procs map[int]Proc) string {
	t.Helper()
	dir := t.TempDir()
	if _, ok := procs[1]; !ok {
		procs[1] = Proc{Comm: "systemd", Argv: []string{"/sbin/init"}, Cwd: "/"}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "stat"), []byte(fmt.Sprintf("cpu  1 2 3\nbtime %d\nprocesses 9\n", Btime)), 0o644))
	for pid, p := range procs {
		d := filepath.Join(dir, strconv.Itoa(pid))
		must(os.MkdirAll(filepath.Join(d, "ns"), 0o755))
		cmdline := ""
		for _, a := range p.Argv {
			cmdline += a + "\x00"
		}
		status := p.Status
		if status == "" {
			status = fmt.Sprintf("Name:\t%s\nUmask:\t0022\nState:\tS (sleeping)\nPid:\t%d\nPPid:\t%d\nUid:\t%[4]d\t%[4]d\t%[4]d\t%[4]d\nGid:\t%[4]d\t%[4]d\t%[4]d\t%[4]d\nNSpid:\t%[2]d\n",
				p.Comm, pid, p.PPID, p.UID)
		}
		stat := fmt.Sprintf("%d (%s) S %d %d %d 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 12 0 %d 1000 100\n", pid, p.Comm, p.PPID, pid, pid, p.Start)
		var env string
		for _, e := range p.Environ {
			env += e + "\x00"
		}
		for name, data := range map[string]string{"comm": p.Comm + "\n", "cmdline": cmdline, "status": status, "stat": stat, "environ": env} {
			must(os.WriteFile(filepath.Join(d, name), []byte(data), 0o644))
		}
		pidNS, mntNS := "4026531836", "4026531841"
		if p.NS != "" {
			pidNS, mntNS = p.NS, p.NS
		}
		must(os.Symlink("pid:["+pidNS+"]", filepath.Join(d, "ns", "pid")))
		must(os.Symlink("mnt:["+mntNS+"]", filepath.Join(d, "ns", "mnt")))
		exe := p.Exe
		if exe == "" {
			exe = RootProgram(t)
		}
		must(os.Symlink(exe, filepath.Join(d, "exe")))
		must(os.Symlink("/", filepath.Join(d, "root")))
		if p.Cwd != "" {
			must(os.Symlink(p.Cwd, filepath.Join(d, "cwd")))
		}
	}
	return dir
}
