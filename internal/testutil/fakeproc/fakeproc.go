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
	"strings"
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
	// Hidden leaves out its namespace links and executable, as the kernel hides them from a reader
	// without ptrace access to the process (proc(5)).
	Hidden bool
	// Cgroup is its /proc/PID/cgroup, "" for none.
	Cgroup string
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
	// The reader's own mounts, as a hybrid node has them: cgroup v2 at dir/cgroupfs and cgroup v1's
	// name=systemd hierarchy at dir/cgroupfs-systemd (Cgroup makes the cgroups in both).
	must(os.MkdirAll(filepath.Join(dir, "self"), 0o755))
	for _, d := range []string{"cgroupfs", "cgroupfs-systemd"} {
		must(os.MkdirAll(filepath.Join(dir, d), 0o755))
	}
	must(os.WriteFile(filepath.Join(dir, "self", "mountinfo"), []byte(fmt.Sprintf(
		"22 1 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:5 - proc proc rw\n"+
			"30 22 0:26 / %s rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate\n"+
			"31 22 0:27 / %s rw,nosuid,nodev,noexec,relatime shared:10 - cgroup cgroup rw,xattr,name=systemd\n",
		filepath.Join(dir, "cgroupfs"), filepath.Join(dir, "cgroupfs-systemd"))), 0o644))
	for pid, p := range procs {
		d := filepath.Join(dir, strconv.Itoa(pid))
		must(os.MkdirAll(filepath.Join(d, "ns"), 0o755))
		cmdline := ""
		for _, a := range p.Argv {
			cmdline += a + "\x00"
		}
		status := p.Status
		if status == "" {
			nspid := strconv.Itoa(pid)
			if p.NS != "" {
				nspid += "\t1" // its PID in its own namespace too: a container's
			}
			status = fmt.Sprintf("Name:\t%s\nUmask:\t0022\nState:\tS (sleeping)\nPid:\t%d\nPPid:\t%d\nUid:\t%[4]d\t%[4]d\t%[4]d\t%[4]d\nGid:\t%[4]d\t%[4]d\t%[4]d\t%[4]d\nNSpid:\t%[5]s\n",
				p.Comm, pid, p.PPID, p.UID, nspid)
		}
		stat := fmt.Sprintf("%d (%s) S %d %d %d 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 12 0 %d 1000 100\n", pid, p.Comm, p.PPID, pid, pid, p.Start)
		var env string
		for _, e := range p.Environ {
			env += e + "\x00"
		}
		for name, data := range map[string]string{"comm": p.Comm + "\n", "cmdline": cmdline, "status": status, "stat": stat, "environ": env, "cgroup": p.Cgroup} {
			must(os.WriteFile(filepath.Join(d, name), []byte(data), 0o644))
		}
		if p.Hidden {
			if p.Cwd != "" {
				must(os.Symlink(p.Cwd, filepath.Join(d, "cwd")))
			}
			continue
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

// Cgroup makes the cgroup path (as /proc/PID/cgroup names it) in the tree's cgroup file systems
// (proc/cgroupfs, v2, and proc/cgroupfs-systemd, v1's name=systemd), its directories and
// cgroup.procs owned by uid with the modes given (0755 and 0644 as systemd makes them; a delegated
// cgroup is its user's).
func Cgroup(t testing.TB, proc, path string, uid int, dirMode, procsMode os.FileMode) {
	t.Helper()
	for _, fs := range []string{"cgroupfs", "cgroupfs-systemd"} {
		dir := filepath.Join(proc, fs)
		for _, e := range strings.Split(strings.Trim(path, "/"), "/") {
			dir = filepath.Join(dir, e)
			if err := os.Mkdir(dir, dirMode); err != nil && !os.IsExist(err) {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, dirMode); err != nil {
				t.Fatal(err)
			}
			if err := os.Lchown(dir, uid, uid); err != nil {
				t.Skipf("cannot give the test cgroup %s to uid %d: %v", dir, uid, err)
			}
		}
		procs := filepath.Join(dir, "cgroup.procs")
		if err := os.WriteFile(procs, nil, procsMode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(procs, procsMode); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(procs, uid, uid); err != nil {
			t.Skipf("cannot give the test cgroup to uid %d: %v", uid, err)
		}
	}
}
