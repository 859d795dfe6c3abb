package kubelet

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/nodefs"
)

// fakeProc writes a /proc-shaped tree: for each pid its comm, cmdline (NUL-separated) and cwd link.
func fakeProc(t *testing.T, procs map[int][3]string) string {
	t.Helper()
	dir := t.TempDir()
	for pid, p := range procs {
		d := filepath.Join(dir, strconv.Itoa(pid))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "comm"), []byte(p[0]+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "cmdline"), []byte(p[1]), 0o644); err != nil {
			t.Fatal(err)
		}
		if p[2] != "" {
			if err := os.Symlink(p[2], filepath.Join(d, "cwd")); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

func TestFindProcess(t *testing.T) {
	tests := []struct {
		name  string
		procs map[int][3]string
		ok    bool
		path  string
		dir   string
		how   string
	}{
		{
			name: "kubespray's kubelet",
			procs: map[int][3]string{
				1:   {"systemd", "/sbin/init\x00", "/"},
				812: {"kubelet", "/usr/local/bin/kubelet\x00--v=2\x00--node-ip=10.66.0.100\x00--config=/etc/kubernetes/kubelet-config.yaml\x00--kubeconfig=/etc/kubernetes/kubelet.conf\x00", "/"},
			},
			ok: true, path: "/etc/kubernetes/kubelet-config.yaml", how: "--config of the running kubelet, pid 812",
		},
		{
			name: "relative --config and --config-dir, from its working directory",
			procs: map[int][3]string{
				900: {"kubelet", "kubelet\x00--config\x00config.yaml\x00--config-dir=conf.d\x00", "/var/lib/kubelet"},
			},
			ok: true, path: "/var/lib/kubelet/config.yaml", dir: "/var/lib/kubelet/conf.d",
		},
		{
			name:  "no --config: kubelet's defaults",
			procs: map[int][3]string{77: {"kubelet", "kubelet\x00--v=2\x00", "/"}},
			ok:    true, path: "", how: "has no --config",
		},
		{
			name: "the oldest of two",
			procs: map[int][3]string{
				5000: {"kubelet", "kubelet\x00--config=/new.yaml\x00", "/"},
				4000: {"kubelet", "kubelet\x00--config=/old.yaml\x00", "/"},
			},
			ok: true, path: "/old.yaml",
		},
		{
			name:  "a zombie and another program",
			procs: map[int][3]string{10: {"kubelet", "", "/"}, 11: {"kubectl", "kubectl\x00--config=/x\x00", "/"}},
			ok:    false,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			proc := fakeProc(t, tc.procs)
			got, ok, err := FindProcess(proc)
			if err != nil {
				t.Fatal(err)
			}
			if ok != tc.ok || got.Path != tc.path || got.ConfigDir != tc.dir || !strings.Contains(got.How, tc.how) {
				t.Errorf("found %+v, %v; want %q (config-dir %q, how %q), %v", got, ok, tc.path, tc.dir, tc.how, tc.ok)
			}
		})
	}
}

// TestProcessLive: a real process named kubelet (a copy of sh, so its comm and argv[0] are
// kubelet's) is found in this machine's /proc with its --config, and that file is read instead of
// the one the node's files name.
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
	// supervisor would pass them.
	cmd := exec.Command(bin, "-c", "sleep 60", "kubelet", "--config=/etc/kubernetes/kubelet-config.yaml")
	if err := cmd.Start(); err != nil {
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
	var found Found
	deadline := time.Now().Add(5 * time.Second)
	for {
		// Once sh has started, its comm is the binary's name and its cmdline the flags.
		f, ok, err := readProcess("/proc", cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if ok && f.Path != "" {
			found = f
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the kubelet process (pid %d) was not read: last answer %+v, %v", cmd.Process.Pid, f, ok)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, ok, err := FindProcess("/proc"); !ok || err != nil {
		t.Errorf("no kubelet found in /proc (%v) while pid %d runs", err, cmd.Process.Pid)
	}
	if found.Path != "/etc/kubernetes/kubelet-config.yaml" {
		t.Errorf("found %+v", found)
	}
	if k := Load(r, found); k.Err != nil || k.Path != "/etc/kubernetes/kubelet-config.yaml" || k.ResolvConf != "/var/lib/nodedns/resolv.conf" {
		t.Errorf("the running kubelet's config read as %+v", k)
	}
}

// TestStartTime: /proc/PID/stat's starttime (clock ticks since boot, field 22, after a comm with
// spaces and parentheses) over /proc/stat's btime; and against this test's own process in the real
// /proc, which started before now and after boot.
func TestStartTime(t *testing.T) {
	proc := fakeProc(t, map[int][3]string{812: {"kubelet", "kubelet\x00", "/"}})
	stat := "812 (kube (let) x) S 1 812 812 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 12 0 12345 1000 100"
	if err := os.WriteFile(filepath.Join(proc, "812", "stat"), []byte(stat+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proc, "stat"), []byte("cpu  1 2 3\nbtime 1700000000\nprocesses 9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := StartTime(proc, 812)
	if want := time.Unix(1700000000, 0).Add(123450 * time.Millisecond); err != nil || !got.Equal(want) {
		t.Errorf("StartTime = %v, %v; want %v", got, err, want)
	}
	if _, err := StartTime(proc, 813); err == nil {
		t.Error("a process that is not there has a start time")
	}
	self, err := StartTime("/proc", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if self.After(time.Now()) || time.Since(self) > 24*time.Hour {
		t.Errorf("this test's process started at %v", self)
	}
}
