package kubelet

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/internal/testutil/fakeproc"
	"github.com/nodedns/nodedns/internal/testutil/tied"
)

func TestFindProcess(t *testing.T) {
	root := fakeproc.Proc{Comm: "kubelet", Cwd: "/"}
	with := func(p fakeproc.Proc, argv ...string) fakeproc.Proc { p.Argv = argv; return p }
	at := func(p fakeproc.Proc, start uint64, ppid int) fakeproc.Proc { p.Start, p.PPID = start, ppid; return p }
	nobody := fakeproc.Proc{Comm: "kubelet", UID: 65534, Cwd: "/var/tmp/x"}
	tests := []struct {
		name    string
		procs   map[int]fakeproc.Proc
		units   map[int]string // systemd's MainPIDs
		ok      bool
		path    string
		dir     string
		how     string
		exact   bool   // How is how, nothing more
		started uint64 // when set, the start (clock ticks since boot) of the process chosen
		ignored []string
	}{
		{
			name: "kubespray's kubelet",
			procs: map[int]fakeproc.Proc{
				812: with(root, "/usr/local/bin/kubelet", "--v=2", "--node-ip=10.66.0.100", "--config=/etc/kubernetes/kubelet-config.yaml", "--kubeconfig=/etc/kubernetes/kubelet.conf"),
			},
			ok: true, path: "/etc/kubernetes/kubelet-config.yaml", how: "--config of the running kubelet, pid 812",
		},
		{
			name: "relative --config and --config-dir, from its working directory",
			procs: map[int]fakeproc.Proc{
				900: {Comm: "kubelet", Argv: []string{"kubelet", "--config", "config.yaml", "--config-dir=conf.d"}, Cwd: "/var/lib/kubelet"},
			},
			ok: true, path: "/var/lib/kubelet/config.yaml", dir: "/var/lib/kubelet/conf.d",
			how: "--config of the running kubelet, pid 900, with the drop-ins of its --config-dir /var/lib/kubelet/conf.d",
		},
		{
			name:  "no --config: kubelet's defaults",
			procs: map[int]fakeproc.Proc{77: with(root, "kubelet", "--v=2")},
			ok:    true, path: "", how: "the running kubelet (pid 77) has no --config: kubelet's defaults",
		},
		{
			name: "two of root's: the newest, whatever their PIDs",
			procs: map[int]fakeproc.Proc{
				4000: at(with(root, "kubelet", "--config=/restarted.yaml"), 900, 1),
				5000: at(with(root, "kubelet", "--config=/stopping.yaml"), 100, 1),
			},
			ok: true, path: "/restarted.yaml", how: "--config of the running kubelet, pid 4000; the newest of 2 kubelet processes of root's, pid 5000 also runs, root's",
		},
		{
			name: "two of root's: the main process of kubelet.service, as systemd says",
			procs: map[int]fakeproc.Proc{
				700: at(with(root, "kubelet", "--config=/unit.yaml"), 100, 1),
				900: at(with(root, "kubelet", "--config=/by-hand.yaml"), 900, 1),
			},
			units: map[int]string{700: "kubelet.service", 50: "rke2-server.service"},
			ok:    true, path: "/unit.yaml", how: "--config of the running kubelet, pid 700; the main process of kubelet.service (systemd's MainPID), pid 900 also runs, root's",
		},
		{
			name: "RKE2's kubelet is a child of its unit's main process",
			procs: map[int]fakeproc.Proc{
				50: at(fakeproc.Proc{Comm: "rke2", Argv: []string{"/usr/local/bin/rke2", "server"}}, 10, 1),
				60: at(with(root, "/var/lib/rancher/rke2/bin/kubelet", "--config-dir=/var/lib/rancher/rke2/agent/etc/kubelet.conf.d"), 20, 50),
				90: at(with(root, "kubelet", "--config=/by-hand.yaml"), 90, 1),
			},
			units: map[int]string{50: "rke2-server.service"},
			ok:    true, dir: "/var/lib/rancher/rke2/agent/etc/kubelet.conf.d", how: "a child of rke2-server.service's main process, pid 50 (systemd's MainPID), pid 90 also runs, root's",
		},
		{
			name: "the units run two: the newer of those",
			procs: map[int]fakeproc.Proc{
				50:  at(fakeproc.Proc{Comm: "rke2", Argv: []string{"/usr/local/bin/rke2", "server"}}, 10, 1),
				60:  at(with(root, "/var/lib/rancher/rke2/bin/kubelet", "--config=/rke2.yaml"), 200, 50),
				90:  at(with(root, "kubelet", "--config=/by-hand.yaml"), 900, 1),
				700: at(with(root, "kubelet", "--config=/unit.yaml"), 100, 1),
			},
			units: map[int]string{700: "kubelet.service", 50: "rke2-server.service"},
			ok:    true, path: "/rke2.yaml", how: "pid 60; the newest of 2 processes the units that start kubelet run (systemd's MainPID), pids 90, 700 also run, root's",
		},
		{
			name: "systemd names none of them: the newest",
			procs: map[int]fakeproc.Proc{
				700: at(with(root, "kubelet", "--config=/a.yaml"), 100, 1),
				900: at(with(root, "kubelet", "--config=/b.yaml"), 900, 1),
			},
			units: map[int]string{12: "kubelet.service"},
			ok:    true, path: "/b.yaml", how: "the newest of 2",
		},
		{
			// Seen with a stand-in that runs sleep: the fork, with the newest start, was taken for
			// a second kubelet (and, chosen, for a kubelet restarted after nodedns's change).
			name: "root's kubelet and its fork before the exec (kubelet runs mount, iptables): the kubelet alone",
			procs: map[int]fakeproc.Proc{
				812:  at(with(root, "/usr/local/bin/kubelet", "--config=/etc/kubernetes/kubelet-config.yaml"), 100, 1),
				4711: at(with(root, "/usr/local/bin/kubelet", "--config=/etc/kubernetes/kubelet-config.yaml"), 900, 812),
			},
			ok: true, path: "/etc/kubernetes/kubelet-config.yaml", how: "--config of the running kubelet, pid 812", exact: true, started: 100,
		},
		{
			name: "a kubelet's child with a command line of its own is another kubelet",
			procs: map[int]fakeproc.Proc{
				700: at(with(root, "kubelet", "--config=/a.yaml"), 100, 1),
				701: at(with(root, "kubelet", "--config=/b.yaml"), 900, 700),
			},
			ok: true, path: "/b.yaml", how: "--config of the running kubelet, pid 701; the newest of 2 kubelet processes of root's, pid 700 also runs, root's", exact: true,
		},
		{
			name: "nobody's kubelet script and the fork its loop makes: named once",
			procs: map[int]fakeproc.Proc{
				10:  at(with(nobody, "/bin/sh", "/var/tmp/x/kubelet", "--config=/var/tmp/x/config.yaml"), 100, 1),
				11:  at(with(nobody, "/bin/sh", "/var/tmp/x/kubelet", "--config=/var/tmp/x/config.yaml"), 900, 10),
				812: at(with(root, "kubelet", "--config=/etc/kubernetes/kubelet-config.yaml"), 50, 1),
			},
			ok: true, path: "/etc/kubernetes/kubelet-config.yaml", how: "--config of the running kubelet, pid 812", exact: true,
			ignored: []string{"pid 10 (uid 65534) calls itself kubelet: ignored (not root's)"},
		},
		{
			name:  "a zombie and another program",
			procs: map[int]fakeproc.Proc{10: {Comm: "kubelet", Cwd: "/"}, 11: with(fakeproc.Proc{Comm: "kubectl"}, "kubectl", "--config=/x")},
			ok:    false,
		},
		{
			name: "nobody's kubelet, with the lower PID, is ignored",
			procs: map[int]fakeproc.Proc{
				10:  with(nobody, "/bin/sh", "/var/tmp/x/kubelet", "--config=/var/tmp/x/config.yaml"),
				812: with(root, "kubelet", "--config=/etc/kubernetes/kubelet-config.yaml"),
			},
			ok: true, path: "/etc/kubernetes/kubelet-config.yaml", how: "--config of the running kubelet, pid 812",
			ignored: []string{"pid 10 (uid 65534) calls itself kubelet: ignored (not root's)"},
		},
		{
			name: "a set-user-ID root program a user started",
			procs: map[int]fakeproc.Proc{
				10: {Comm: "kubelet", Argv: []string{"kubelet", "--config=/x.yaml"}, Status: "Uid:\t1000\t0\t0\t0\nGid:\t1000\t1000\t1000\t1000\n"},
			},
			ignored: []string{"pid 10 (uid 1000) calls itself kubelet: ignored (not root's: its real, effective, saved and filesystem uids are 1000 0 0 0)"},
		},
		{
			name:    "root's group only",
			procs:   map[int]fakeproc.Proc{10: {Comm: "kubelet", Argv: []string{"kubelet"}, Status: "Uid:\t0\t0\t0\t0\nGid:\t50\t50\t50\t50\n"}},
			ignored: []string{"pid 10 (uid 0) calls itself kubelet: ignored (not root's: its gid is 50)"},
		},
		{
			name:    "a container's kubelet (another PID namespace)",
			procs:   map[int]fakeproc.Proc{10: {Comm: "kubelet", Argv: []string{"kubelet", "--config=/x.yaml"}, NS: "4026532201"}},
			ignored: []string{"pid 10 (uid 0) calls itself kubelet: ignored (in another PID namespace than PID 1 (pid:[4026532201], PID 1's is pid:[4026531836]): a container's)"},
		},
		{
			name: "nobody's k3s agent; nobody's `k3s kubectl` is not even a kubelet",
			procs: map[int]fakeproc.Proc{
				10: with(fakeproc.Proc{Comm: "k3s-agent", UID: 65534}, "./k3s-agent", "agent", "--resolv-conf=/var/tmp/x/resolv.conf"),
				11: with(fakeproc.Proc{Comm: "k3s", UID: 65534}, "k3s", "kubectl", "get", "nodes"),
			},
			ignored: []string{"pid 10 (uid 65534) calls itself k3s-agent: ignored (not root's)"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			proc := fakeproc.Write(t, tc.procs)
			asked := false
			var units AskUnits
			if tc.units != nil {
				units = func() map[string]UnitProcess {
					asked = true
					m := map[string]UnitProcess{}
					for pid, u := range tc.units {
						m[u] = UnitProcess{MainPID: pid}
					}
					return m
				}
			}
			got, err := FindProcess(proc, units)
			if err != nil {
				t.Fatal(err)
			}
			f := got.Found
			if got.OK != tc.ok || f.Path != tc.path || f.ConfigDir != tc.dir || !strings.Contains(f.How, tc.how) || (tc.exact && f.How != tc.how) {
				t.Errorf("found %+v, %v; want %q (config-dir %q, how %q), %v", f, got.OK, tc.path, tc.dir, tc.how, tc.ok)
			}
			if strings.Join(got.Ignored, "\n") != strings.Join(tc.ignored, "\n") {
				t.Errorf("ignored %q, want %q", got.Ignored, tc.ignored)
			}
			if tc.units != nil && !asked {
				t.Error("systemd was not asked for its main processes although several of root's kubelets run")
			}
			if got.OK && (got.Started.IsZero() || got.Started.Before(time.Unix(fakeproc.Btime, 0))) {
				t.Errorf("the chosen process started at %v", got.Started)
			}
			if want := time.Unix(fakeproc.Btime, 0).Add(time.Duration(tc.started) * time.Second / userHZ); tc.started != 0 && !got.Started.Equal(want) {
				t.Errorf("the chosen process started at %v, want %v", got.Started, want)
			}
		})
	}
}

// TestFindProcessExecutable: the executable a process of root's runs must be root's and writable by
// nobody else, in directories likewise (as the process's root shows them): a program anyone can
// swap is anyone's. The program here is a file this test makes, so which rule it fails depends on
// who runs the test.
func TestFindProcessExecutable(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "kubelet")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	chmod := func(p string, m os.FileMode) {
		if err := os.Chmod(p, m); err != nil {
			t.Fatal(err)
		}
	}
	ignored := func(want string) {
		t.Helper()
		proc := fakeproc.Write(t, map[int]fakeproc.Proc{10: {Comm: "kubelet", Argv: []string{"kubelet"}, Exe: exe}})
		got, err := FindProcess(proc, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got.OK || len(got.Ignored) != 1 || !strings.Contains(got.Ignored[0], "pid 10 (uid 0) calls itself kubelet: ignored ("+want) {
			t.Errorf("found %v, ignored %q; want it ignored: %s", got.OK, got.Ignored, want)
		}
	}
	if os.Geteuid() != 0 {
		ignored(fmt.Sprintf("its executable %s is owned by uid %d", exe, os.Geteuid()))
	} else {
		chmod(dir, 0o777)
		ignored(fmt.Sprintf("its executable's directory %s is writable by others", dir))
		chmod(dir, 0o700)
		chmod(exe, 0o775)
		ignored(fmt.Sprintf("its executable %s is writable by its group", exe))
	}
	chmod(exe, 0o777)
	ignored("its executable " + exe + " is ")
}

// TestProcessLive: a real process named kubelet (a copy of sh, so its comm and argv[0] are
// kubelet's), started by this test from its temporary directory, is read from this machine's /proc
// with its --config, and that file is read instead of the one the node's files name; but it is not
// root's kubelet (docs/contract.md "Kubelet's config"): FindProcess names it as ignored, for the
// rule it fails as whoever runs the test (a user: not root's; root: its directory, the temporary
// one, is anyone's, or this machine's PID 1 cannot be read).
func TestProcessLive(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	bin := filepath.Join(t.TempDir(), "kubelet")
	data, err := os.ReadFile(sh)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	// sh -c SCRIPT NAME ARGS...: the arguments after the script are kubelet's flags as a
	// supervisor would pass them. It waits on its stdin, a pipe this test holds (read is sh's own:
	// no child to outlive it), and dies with the test (tied).
	cmd := exec.Command(bin, "-c", "read -r line", "kubelet", "--config=/etc/kubernetes/kubelet-config.yaml")
	if _, err := cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := tied.Start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	root := t.TempDir()
	for p, d := range map[string]string{
		"/var/lib/kubelet/config.yaml":        "kind: KubeletConfiguration\nresolvConf: /etc/resolv.conf\n",
		"/etc/kubernetes/kubelet-config.yaml": "kind: KubeletConfiguration\nresolvConf: /var/lib/nodedns/resolv.conf\nclusterDNS: [169.254.25.10]\n",
	} {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(d), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// No unit on this node: the files alone would pick kubespray's path first anyway, so make them
	// say otherwise with a unit naming kubeadm's.
	unit := filepath.Join(root, "etc/systemd/system/kubelet.service")
	if err := os.MkdirAll(filepath.Dir(unit), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(unit, []byte("[Service]\nExecStart=/usr/bin/kubelet --config=/var/lib/kubelet/config.yaml\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := nodefs.NewReader(root)
	if fromFiles, _, _ := Find(r, config.Default()); fromFiles.Path != "/var/lib/kubelet/config.yaml" {
		t.Fatalf("files alone found %q", fromFiles.Path)
	}
	var c candidate
	deadline := time.Now().Add(5 * time.Second)
	for {
		// Once sh has started, its comm is the binary's name and its cmdline the flags.
		got, ok, err := readProcess("/proc", cmd.Process.Pid, nil)
		if err != nil {
			t.Fatal(err)
		}
		if ok && got.found.Path != "" {
			c = got
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the kubelet process (pid %d) was not read: last answer %+v, %v", cmd.Process.Pid, got, ok)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if c.found.Path != "/etc/kubernetes/kubelet-config.yaml" {
		t.Errorf("found %+v", c.found)
	}
	if k := Load(r, c.found); k.Err != nil || k.Path != "/etc/kubernetes/kubelet-config.yaml" || k.ResolvConf != "/var/lib/nodedns/resolv.conf" {
		t.Errorf("the running kubelet's config read as %+v", k)
	}
	scan, err := FindProcess("/proc", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("pid %d (uid %d) calls itself kubelet: ignored (", cmd.Process.Pid, os.Getuid())
	if os.Geteuid() != 0 {
		want += "not root's)"
	}
	var ig string
	for _, s := range scan.Ignored {
		if strings.HasPrefix(s, fmt.Sprintf("pid %d ", cmd.Process.Pid)) {
			ig = s
		}
	}
	if !strings.HasPrefix(ig, want) || (scan.OK && scan.Found.PID == cmd.Process.Pid) {
		t.Errorf("this test's kubelet (pid %d) taken for root's: found %v (pid %d), ignored %q; want %q", cmd.Process.Pid, scan.OK, scan.Found.PID, scan.Ignored, want)
	}
	t.Logf("%s", ig)
}

// startTimeOf is when process pid started as FindProcess reads it: its stat's starttime after the
// boot time.
func startTimeOf(proc string, pid int) (time.Time, error) {
	stat, err := nodefs.ReadKernel(filepath.Join(proc, strconv.Itoa(pid), "stat"), procKind)
	if err != nil {
		return time.Time{}, err
	}
	ticks, _, err := statFields(stat)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s/%d/stat: %w", proc, pid, err)
	}
	return startTime(proc, ticks)
}

// TestStartTime: /proc/PID/stat's starttime (clock ticks since boot, field 22, after a comm with
// spaces and parentheses) over /proc/stat's btime; FindProcess reports the same for the process it
// chose; and against this test's own process in the real /proc, which started before now and after
// boot.
func TestStartTime(t *testing.T) {
	proc := fakeproc.Write(t, map[int]fakeproc.Proc{812: {Comm: "kube (let) x", Argv: []string{"kubelet"}, Start: 12345}})
	got, err := startTimeOf(proc, 812)
	if want := time.Unix(fakeproc.Btime, 0).Add(123450 * time.Millisecond); err != nil || !got.Equal(want) {
		t.Errorf("startTimeOf = %v, %v; want %v", got, err, want)
	}
	if _, err := startTimeOf(proc, 813); err == nil {
		t.Error("a process that is not there has a start time")
	}
	proc = fakeproc.Write(t, map[int]fakeproc.Proc{812: {Comm: "kubelet", Argv: []string{"kubelet"}, Start: 12345}})
	if scan, err := FindProcess(proc, nil); err != nil || !scan.OK || !scan.Started.Equal(time.Unix(fakeproc.Btime, 0).Add(123450*time.Millisecond)) {
		t.Errorf("FindProcess: started %v (%v, %v)", scan.Started, scan.OK, err)
	}
	self, err := startTimeOf("/proc", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if self.After(time.Now()) || time.Since(self) > 24*time.Hour {
		t.Errorf("this test's process started at %v", self)
	}
}

// TestStartTimeResolution (docs/contract.md "kubelet.manage"): the start time of a process started
// now is good to the clock tick (10 ms), as kubelet.manage compares it with the time of its change.
// /proc/stat's btime is the boot time cut to the whole second: a start time built on it alone is up
// to a second early (on the machine this was written on, 0.55 s: the boot's fraction of a second),
// so a kubelet restarted just after the change could count as started before it.
func TestStartTimeResolution(t *testing.T) {
	before := time.Now()
	cmd := exec.Command("sleep", "60")
	if err := tied.Start(cmd); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	got, err := startTimeOf("/proc", cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	// The kernel's start time is cut to the tick: at most 10 ms before the real one.
	if got.Before(before.Add(-10*time.Millisecond)) || got.After(after) {
		t.Errorf("a process started between %s and %s started at %s by startTimeOf (%v early)",
			before.Format("15:04:05.000"), after.Format("15:04:05.000"), got.Format("15:04:05.000"), before.Sub(got).Round(time.Millisecond))
	}
}

// FuzzProcStatus: the /proc readers of the running kubelet (its stat's start time and parent, its
// status's ids) take any bytes without panicking, and what they accept is what was written.
func FuzzProcStatus(f *testing.F) {
	f.Add([]byte("812 (kube (let) x) S 1 812 812 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 12 0 12345 1000 100"), []byte("Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\n"))
	f.Add([]byte("1 (a) S"), []byte("Uid:\t1000\t0\t0\nGid:"))
	f.Fuzz(func(t *testing.T, stat, status []byte) {
		if ticks, ppid, err := statFields(stat); err == nil {
			f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
			if n, _ := strconv.ParseUint(f[19], 10, 64); n != ticks {
				t.Errorf("stat %q: starttime %d, field 22 says %q", stat, ticks, f[19])
			}
			if n, _ := strconv.Atoi(f[1]); n != ppid {
				t.Errorf("stat %q: ppid %d, field 4 says %q", stat, ppid, f[1])
			}
		}
		for _, key := range []string{"Uid:", "Gid:"} {
			if ids := statusIDs(status, key); ids != nil && len(ids) != 4 {
				t.Errorf("status %q: %s %v", status, key, ids)
			}
		}
	})
}

// TestVerifyWithoutPtrace (docs/contract.md "Kubelet's config"): where the kernel hides a process's
// executable and namespaces (nodedns without ptrace access to it, the packaged unit), root's kubelet
// is still told from the rest by what the kernel shows anyone: its status's uids, gids and NSpid
// (one PID: PID 1's PID namespace), and its cgroup, which must be a unit's that starts kubelet (as
// systemd says over D-Bus; without an answer, system.slice/UNIT) and root's alone, or systemd's
// MainPID. A cgroup delegated to a user, one named like the unit's but a user's, one others can
// write, and a process that is in none of them or in a container's PID namespace, are not proof.
func TestVerifyWithoutPtrace(t *testing.T) {
	root := os.Getuid() // who the test's cgroups belong to: root's, or the user running the test
	kubelet := func(cgroup string) fakeproc.Proc {
		return fakeproc.Proc{Comm: "kubelet", Argv: []string{"/usr/bin/kubelet", "--config=/var/lib/kubelet/config.yaml"}, Cwd: "/", Hidden: true, Cgroup: cgroup}
	}
	const unitCG = "/system.slice/kubelet.service"
	const userCG = "/user.slice/user-1000.slice/user@1000.service/app.slice/kubelet.service"
	for _, tc := range []struct {
		name    string
		proc    fakeproc.Proc
		cgroups func(t *testing.T, proc string)
		units   map[string]UnitProcess // nil: no systemd to ask
		ok      bool
		ignored string
	}{
		{"in kubelet.service's cgroup, no bus", kubelet("0::" + unitCG + "\n"),
			func(t *testing.T, proc string) { fakeproc.Cgroup(t, proc, unitCG, root, 0o755, 0o644) }, nil, true, ""},
		{"in the cgroup systemd names", kubelet("0::/kube.slice/kubelet.service\n"),
			func(t *testing.T, proc string) {
				fakeproc.Cgroup(t, proc, "/kube.slice/kubelet.service", root, 0o755, 0o644)
			},
			map[string]UnitProcess{"kubelet.service": {MainPID: 4242, ControlGroup: "/kube.slice/kubelet.service"}}, true, ""},
		{"cgroup v1's name=systemd hierarchy", kubelet("12:pids:/system.slice/kubelet.service\n1:name=systemd:" + unitCG + "\n"),
			func(t *testing.T, proc string) { fakeproc.Cgroup(t, proc, unitCG, root, 0o755, 0o644) }, nil, true, ""},
		{"the unit's main process, as systemd says", kubelet("0::/somewhere\n"), nil,
			map[string]UnitProcess{"kubelet.service": {MainPID: 700, ControlGroup: unitCG}}, true, ""},
		{"system.slice/kubelet.service, but systemd names another cgroup", kubelet("0::" + unitCG + "\n"),
			func(t *testing.T, proc string) { fakeproc.Cgroup(t, proc, unitCG, root, 0o755, 0o644) },
			map[string]UnitProcess{"kubelet.service": {MainPID: 4242, ControlGroup: "/kube.slice/kubelet.service"}}, false,
			"nor from its cgroup: " + unitCG + " is no unit's that starts kubelet"},
		{"a cgroup a user's systemd delegates, named kubelet.service", kubelet("0::" + userCG + "\n"),
			func(t *testing.T, proc string) { fakeproc.Cgroup(t, proc, userCG, 1000, 0o755, 0o644) }, nil, false,
			"nor from its cgroup: " + userCG + " is no unit's that starts kubelet"},
		{"kubelet.service's cgroup, but a user's", kubelet("0::" + unitCG + "\n"),
			func(t *testing.T, proc string) { fakeproc.Cgroup(t, proc, unitCG, 1000, 0o755, 0o644) }, nil, false,
			"its cgroup " + unitCG + " is not root's alone: refusing to read " + unitCG + "/cgroup.procs"},
		{"kubelet.service's cgroup, others may write its cgroup.procs", kubelet("0::" + unitCG + "\n"),
			func(t *testing.T, proc string) { fakeproc.Cgroup(t, proc, unitCG, root, 0o755, 0o666) }, nil, false,
			"is writable by others"},
		{"a container's PID namespace", func() fakeproc.Proc { p := kubelet("0::" + unitCG + "\n"); p.NS = "4026532201"; return p }(),
			func(t *testing.T, proc string) { fakeproc.Cgroup(t, proc, unitCG, root, 0o755, 0o644) }, nil, false,
			"in another PID namespace than PID 1 (its PIDs 700 1, from PID 1's namespace down): a container's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proc := fakeproc.Write(t, map[int]fakeproc.Proc{700: tc.proc})
			if tc.cgroups != nil {
				tc.cgroups(t, proc)
			}
			var ask AskUnits
			if tc.units != nil {
				ask = func() map[string]UnitProcess { return tc.units }
			}
			scan, err := FindProcess(proc, ask)
			if err != nil {
				t.Fatal(err)
			}
			if scan.OK != tc.ok || tc.ok && scan.Found.Path != "/var/lib/kubelet/config.yaml" {
				t.Fatalf("found %v (%+v), ignored %q; want found %v", scan.OK, scan.Found, scan.Ignored, tc.ok)
			}
			if !tc.ok && (len(scan.Ignored) != 1 || !strings.Contains(scan.Ignored[0], tc.ignored)) {
				t.Errorf("ignored %q, want one saying %q", scan.Ignored, tc.ignored)
			}
			if tc.ok && scan.Started.IsZero() {
				t.Error("no start time for the kubelet verified")
			}
			t.Logf("ignored %q, unverified %v", scan.Ignored, scan.Unverified)
		})
	}
}

// FuzzCgroupFiles: the readers of /proc/PID/cgroup and of mountinfo that verifyUntraced uses take
// any bytes without panicking, and what they return is a clean absolute path or nothing.
func FuzzCgroupFiles(f *testing.F) {
	f.Add([]byte("0::/system.slice/kubelet.service\n"), []byte("30 22 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"))
	f.Add([]byte("12:pids:/system.slice/kubelet.service\n1:name=systemd:/system.slice/kubelet.service\n"), []byte("31 22 0:27 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,xattr,name=systemd\n"))
	f.Add([]byte("0::relative\n::\n0::/a/../../b\n"), []byte(" - \n - cgroup2\n1 2 3 4 5 - cgroup2 x y\n"))
	f.Fuzz(func(t *testing.T, cgroup, mountinfo []byte) {
		if cg, _ := systemdCgroup(cgroup); cg != "" && (!strings.HasPrefix(cg, "/") || path.Clean(cg) != cg) {
			t.Fatalf("cgroup path %q is not clean and absolute", cg)
		}
		for _, v2 := range []bool{true, false} {
			_ = cgroupMountIn(mountinfo, v2)
		}
		_ = statusFields(cgroup, "NSpid:")
	})
}
