package kubelet

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/internal/testutil/nstest"
	"github.com/nodedns/nodedns/internal/testutil/tied"
)

// The live test's stand-ins for kubelet, rke2 and k3s are copies of this test binary: started with
// NODEDNS_FAKE_PROCESS set, it sleeps under whatever argv it was given (kubelet's real flags), and as
// the rke2 stand-in starts its kubelet child first, as rke2 does. As PID 1 of a new PID namespace it
// mounts that namespace's /proc, which the test reads through /proc/PID/root/proc. Root's kubelet
// runs from root's directories (docs/contract.md "Kubelet's config"), and the test's temporary
// directory is under one anyone can write: so PID 1 first mounts a tmpfs of root's over its
// namespace's own /run, copies itself (and its child) there and runs from there. With
// NODEDNS_FAKE_IMPOSTOR set it also starts nobody's impostor: a shell script named kubelet, owned
// by nobody, run as uid and gid 65534 (SysProcAttr.Credential) with the flags given there.
func init() {
	role := os.Getenv("NODEDNS_FAKE_PROCESS")
	if role == "" {
		return
	}
	if os.Getpid() == 1 && os.Getenv("NODEDNS_FAKE_AT") == "" {
		os.Exit(relocate(role))
	}
	if role == "rke2" {
		args := strings.Split(os.Getenv("NODEDNS_FAKE_CHILD_ARGS"), "\n")
		child := &exec.Cmd{Path: os.Getenv("NODEDNS_FAKE_CHILD"), Args: args, Env: []string{"NODEDNS_FAKE_PROCESS=kubelet"}}
		if err := child.Start(); err != nil {
			os.Exit(5)
		}
	}
	if args := os.Getenv("NODEDNS_FAKE_IMPOSTOR"); args != "" {
		imp := &exec.Cmd{Path: "/run/x/kubelet", Args: append([]string{"/run/x/kubelet"}, strings.Split(args, "\n")...),
			SysProcAttr: &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}}
		if err := imp.Start(); err != nil {
			os.Exit(6)
		}
	}
	time.Sleep(2 * time.Minute)
	os.Exit(0)
}

// relocate is PID 1's setup: /proc, a tmpfs of root's over /run with the stand-ins in it (and
// nobody's script in /run/x), then itself again from there. It returns only on failure.
func relocate(role string) int {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return 3
	}
	if err := unix.Mount("proc", "/proc", "proc", 0, ""); err != nil {
		return 4
	}
	if err := unix.Mount("tmpfs", "/run", "tmpfs", 0, "mode=0755"); err != nil {
		return 7
	}
	copyTo := func(from, to string) error {
		data, err := os.ReadFile(from)
		if err != nil {
			return err
		}
		return os.WriteFile(to, data, 0o755)
	}
	if err := copyTo("/proc/self/exe", "/run/"+role); err != nil {
		return 8
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NODEDNS_FAKE_CHILD=") {
			env = append(env, kv)
		}
	}
	env = append(env, "NODEDNS_FAKE_AT=/run")
	if child := os.Getenv("NODEDNS_FAKE_CHILD"); child != "" {
		// The child is a copy of this binary too, named kubelet.
		if err := copyTo("/proc/self/exe", "/run/kubelet"); err != nil {
			return 8
		}
		env = append(env, "NODEDNS_FAKE_CHILD=/run/kubelet")
	}
	if os.Getenv("NODEDNS_FAKE_IMPOSTOR") != "" {
		if err := os.Mkdir("/run/x", 0o755); err != nil {
			return 9
		}
		if err := os.WriteFile("/run/x/kubelet", []byte("#!/bin/sh\nwhile :; do sleep 3600; done\n"), 0o755); err != nil {
			return 9
		}
		for _, p := range []string{"/run/x", "/run/x/kubelet"} {
			if err := os.Chown(p, 65534, 65534); err != nil {
				return 9
			}
		}
	}
	// The argv the stand-in was given (unshare runs it by the copy's path).
	argv := os.Args
	if a := os.Getenv("NODEDNS_FAKE_ARGV0"); a != "" {
		argv = append([]string{a}, os.Args[1:]...)
	}
	_ = syscall.Exec("/run/"+role, argv, env)
	return 10
}

// standIn is a process startInPIDNamespace starts: name (its comm), argv and environment; child,
// RKE2's kubelet's argv; impostor, the flags of nobody's script named kubelet.
type standIn struct {
	name                 string
	argv, env            []string
	child, impostorFlags []string
}

// startInPIDNamespace starts the stand-in as PID 1 of a new PID and mount namespace and returns
// that namespace's /proc as this process sees it, once PID 1 runs from its /run and its child or
// impostor runs too. The namespace dies with the test however it ends: unshare forks PID 1 with a
// parent-death signal (--kill-child) and is itself started tied to the test (tied.Start); the
// death of PID 1 kills the rest. Go's own Pdeathsig cannot tie PID 1 directly: the child checks
// its parent with getppid, which is 0 in a new PID namespace, and kills itself.
func startInPIDNamespace(t *testing.T, s standIn) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, s.name)
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	env := s.env
	if len(s.child) > 0 {
		env = append(env, "NODEDNS_FAKE_CHILD=kubelet", "NODEDNS_FAKE_CHILD_ARGS="+strings.Join(s.child, "\n"))
	}
	if len(s.impostorFlags) > 0 {
		env = append(env, "NODEDNS_FAKE_IMPOSTOR="+strings.Join(s.impostorFlags, "\n"))
	}
	if mark, ok := os.LookupEnv(nstest.MarkEnv); ok {
		env = append(env, nstest.MarkEnv+"="+mark) // TestStandInsDieWithTheTest looks for it
	}
	cmd := exec.Command("unshare", append([]string{"--pid", "--fork", "--kill-child", "--mount", "--propagation", "private", "--", bin}, s.argv[1:]...)...)
	cmd.Env = append(env, "NODEDNS_FAKE_PROCESS="+s.name, "NODEDNS_FAKE_ARGV0="+s.argv[0])
	if err := tied.Start(cmd); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	// unshare shares the new mount namespace with PID 1, so its root shows PID 1's /proc.
	proc := "/proc/" + strconv.Itoa(cmd.Process.Pid) + "/root/proc"
	// The other process to wait for: the child (its PID is not 2: PID 1's threads take PIDs too),
	// or the impostor once it runs its script as nobody (until its exec it is a fork of PID 1,
	// root's, with PID 1's command line).
	other, otherHas := "", ""
	switch {
	case len(s.child) > 0:
		other, otherHas = "kubelet", s.child[0]
	case len(s.impostorFlags) > 0:
		other, otherHas = "kubelet", "/run/x/kubelet"
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		// Until PID 1 has mounted its /proc, the path shows this machine's; until it runs from
		// /run, it is still the copy in the temporary directory.
		cmdline, _ := os.ReadFile(filepath.Join(proc, "1", "cmdline"))
		if exe, err := os.Readlink(filepath.Join(proc, "1", "exe")); err == nil && exe == "/run/"+s.name && len(cmdline) > 0 {
			if other == "" {
				return proc
			}
			if ents, err := os.ReadDir(proc); err == nil {
				// The impostor's script forks sleep: until that fork has exec'd, it is a second
				// process of nobody's named kubelet. Wait for sleep too, so the scan sees one.
				found, sleeping := false, len(s.impostorFlags) == 0
				for _, e := range ents {
					c, _ := os.ReadFile(filepath.Join(proc, e.Name(), "comm"))
					cmdline, _ := os.ReadFile(filepath.Join(proc, e.Name(), "cmdline"))
					status, _ := os.ReadFile(filepath.Join(proc, e.Name(), "status"))
					if e.Name() != "1" && strings.TrimSpace(string(c)) == other && strings.Contains(string(cmdline), otherHas) &&
						(len(s.impostorFlags) == 0 || strings.Contains(string(status), "\nUid:\t65534\t65534\t65534\t65534\n")) {
						found = true
					}
					if strings.TrimSpace(string(c)) == "sleep" {
						sleeping = true
					}
				}
				if found && sleeping {
					return proc
				}
			}
		}
		if time.Now().After(deadline) {
			var ps []string
			ents, _ := os.ReadDir(proc)
			for _, e := range ents {
				c, _ := os.ReadFile(filepath.Join(proc, e.Name(), "comm"))
				cl, _ := os.ReadFile(filepath.Join(proc, e.Name(), "cmdline"))
				exe, _ := os.Readlink(filepath.Join(proc, e.Name(), "exe"))
				if len(c) > 0 {
					ps = append(ps, fmt.Sprintf("%s %s %s %q", e.Name(), strings.TrimSpace(string(c)), exe, cl))
				}
			}
			state := "still running"
			select {
			case err := <-exited:
				state = fmt.Sprintf("exited: %v", err)
				exited <- err
			default:
			}
			t.Fatalf("the %s stand-in did not come up in its PID namespace (%s); its processes:\n%s", s.name, state, strings.Join(ps, "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// standInsChildEnv makes TestStandInsDieWithTheTest the child that starts the stand-ins.
const standInsChildEnv = "NODEDNS_KUBELET_DIES_CHILD"

// standInsReady is the line the child prints once its stand-ins run.
const standInsReady = "kubelet-child: the stand-ins run"

// TestStandInsDieWithTheTest: a test process running the stand-ins (RKE2's with its kubelet child,
// a kubelet with nobody's impostor and its sleep beside it, each in a PID namespace of its own) is
// killed with SIGKILL, which runs none of its cleanups; within a bounded wait nothing of them is
// left on this machine (DEVELOPERS.md "Tests": nothing a test starts may outlive it).
func TestStandInsDieWithTheTest(t *testing.T) {
	if os.Getenv(standInsChildEnv) == "1" {
		startInPIDNamespace(t, standIn{name: "rke2", argv: []string{"/usr/local/bin/rke2", "agent"},
			child: []string{"/var/lib/rancher/rke2/bin/kubelet", "--config=/var/lib/kubelet/config.yaml"}})
		startInPIDNamespace(t, standIn{name: "kubelet", argv: []string{"/usr/bin/kubelet", "--config=/var/lib/kubelet/config.yaml"},
			impostorFlags: []string{"--config=/run/x/config.yaml"}})
		fmt.Println(standInsReady)
		time.Sleep(time.Hour) // until killed
	}
	nstest.Require(t)
	child := nstest.StartChildTest(t, t.Name(), standInsChildEnv+"=1")
	child.WaitFor(t, time.Minute, "the child's stand-ins", func() bool { return strings.Contains(child.Output(), standInsReady) })
	fp, err := nstest.TakeFootprint(child.Marker)
	if err != nil {
		t.Fatal(err)
	}
	// What runs in the stand-ins' PID namespaces: rke2 and its kubelet, the kubelet and nobody's
	// script named kubelet, which runs sleep.
	comms := map[string]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		ns, err := os.Readlink(filepath.Join("/proc", e.Name(), "ns", "pid"))
		var ino uint64
		if _, perr := fmt.Sscanf(ns, "pid:[%d]", &ino); err != nil || perr != nil || !fp.PIDNS[ino] {
			continue
		}
		c, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		comms[strings.TrimSpace(string(c))]++
	}
	if want := map[string]int{"rke2": 1, "kubelet": 3, "sleep": 1}; len(fp.PIDNS) != 2 || !maps.Equal(comms, want) {
		t.Errorf("the child runs %v in %d PID namespaces; want %v in 2: the test would prove nothing of them", comms, len(fp.PIDNS), want)
	}
	child.KillLeavesNothing(t, fp, 30*time.Second)
}

// TestProcessLiveShapes: kubelet as kubeadm, RKE2 and k3s run it, each in its own PID namespace with
// the argv and environment they really have, found through that namespace's /proc: kubeadm's
// kubelet with a --resolv-conf over its config, RKE2's child kubelet (rke2 passes its choice as
// --resolv-conf and the user's kubelet-arg after it: the last wins), and the k3s process, whose
// kubelet is inside it (no kubelet in /proc), with K3S_RESOLV_CONF in its environment.
func TestProcessLiveShapes(t *testing.T) {
	nstest.Require(t)
	trees := "../../cmd/nodedns/testdata/kubelet/"
	t.Run("kubeadm", func(t *testing.T) {
		proc := startInPIDNamespace(t, standIn{name: "kubelet", argv: []string{"/usr/bin/kubelet",
			"--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf", "--kubeconfig=/etc/kubernetes/kubelet.conf",
			"--config=/var/lib/kubelet/config.yaml",
			"--resolv-conf=/etc/resolv.conf"}})
		found := findLive(t, proc)
		k := Load(nodefs.NewReader(trees+"kubeadm-healthy"), Complete(nodefs.NewReader(trees+"kubeadm-healthy"), found))
		if k.Path != KubeadmConfig || k.ResolvConf != "/etc/resolv.conf" || k.ResolvConfFrom != "--resolv-conf of the running kubelet, pid 1" || k.Shape != ShapeKubelet {
			t.Errorf("read as %+v", k)
		}
	})
	t.Run("rke2", func(t *testing.T) {
		// The flags rke2 builds (k3s's agent argsMap, sorted) and a kubelet-arg after them.
		proc := startInPIDNamespace(t, standIn{name: "rke2", argv: []string{"/usr/local/bin/rke2", "agent"}, child: []string{
			"/var/lib/rancher/rke2/bin/kubelet", "--address=0.0.0.0", "--anonymous-auth=false", "--authentication-token-webhook=true",
			"--cgroup-driver=systemd", "--client-ca-file=/var/lib/rancher/rke2/agent/client-ca.crt", "--cloud-provider=external",
			"--cluster-dns=10.43.0.10", "--cluster-domain=cluster.local", "--config-dir=/var/lib/rancher/rke2/agent/etc/kubelet.conf.d",
			"--container-runtime-endpoint=unix:///run/k3s/containerd/containerd.sock", "--hostname-override=node1",
			"--kubeconfig=/var/lib/rancher/rke2/agent/kubelet.kubeconfig", "--node-labels=", "--pod-manifest-path=/var/lib/rancher/rke2/agent/pod-manifests",
			"--read-only-port=0", "--resolv-conf=/run/systemd/resolve/resolv.conf", "--serialize-image-pulls=false",
			"--tls-cert-file=/var/lib/rancher/rke2/agent/serving-kubelet.crt", "--tls-private-key-file=/var/lib/rancher/rke2/agent/serving-kubelet.key",
			"--resolv-conf=/etc/resolv.conf"}})
		found := findLive(t, proc)
		r := nodefs.NewReader(trees + "rke2-healthy")
		k := Load(r, Complete(r, found))
		if k.Shape != ShapeRKE2 || k.ResolvConf != "/etc/resolv.conf" || !strings.HasPrefix(k.ResolvConfFrom, "--resolv-conf of the running kubelet, pid ") ||
			k.ConfigDir != "/var/lib/rancher/rke2/agent/etc/kubelet.conf.d" || len(k.ClusterDNS) != 1 {
			t.Errorf("read as %+v", k)
		}
	})
	t.Run("k3s", func(t *testing.T) {
		proc := startInPIDNamespace(t, standIn{name: "k3s", argv: []string{"/usr/local/bin/k3s", "server"}, env: []string{"K3S_RESOLV_CONF=/etc/resolv.conf", "K3S_TOKEN=x"}})
		found := findLive(t, proc)
		r := nodefs.NewReader(trees + "k3s-healthy")
		k := Load(r, Complete(r, found))
		if k.Shape != ShapeK3s || k.Unit != "k3s.service" || k.ResolvConf != "/etc/resolv.conf" ||
			k.ResolvConfFrom != "K3S_RESOLV_CONF in the environment of the running k3s, pid 1" || !strings.Contains(k.How, "the running k3s server (pid 1) runs kubelet inside itself") {
			t.Errorf("read as %+v", k)
		}
		// Without the variable, k3s's own choice from the node's files: the stub fails its test.
		found.process.env = ""
		if k := Load(r, Complete(r, found)); k.ResolvConf != "/run/systemd/resolve/resolv.conf" {
			t.Errorf("without K3S_RESOLV_CONF: %+v", k)
		}
	})
}

// findLive is FindProcess of a namespace's /proc, which must find root's kubelet and ignore nothing.
func findLive(t *testing.T, proc string) Found {
	t.Helper()
	scan, err := FindProcess(proc, nil)
	if err != nil || !scan.OK || len(scan.Ignored) > 0 {
		t.Fatalf("root's kubelet not found in the namespace's /proc (%v): ignored %q", err, scan.Ignored)
	}
	return scan.Found
}

// TestProcessLiveImpostor (docs/contract.md "Kubelet's config"): in a PID namespace of its own,
// root's kubelet (PID 1, run from a tmpfs of root's) and nobody's shell script named kubelet, run as
// uid and gid 65534 with a --config of its own: the kernel's word (its status, namespaces,
// executable) makes root's the one read and names nobody's as ignored.
func TestProcessLiveImpostor(t *testing.T) {
	nstest.Require(t)
	proc := startInPIDNamespace(t, standIn{name: "kubelet", argv: []string{"/usr/bin/kubelet", "--config=/var/lib/kubelet/config.yaml"},
		impostorFlags: []string{"--config=/run/x/config.yaml"}})
	scan, err := FindProcess(proc, nil)
	if err != nil || !scan.OK {
		t.Fatalf("root's kubelet not found (%v): ignored %q", err, scan.Ignored)
	}
	if scan.Found.PID != 1 || scan.Found.Path != "/var/lib/kubelet/config.yaml" || scan.Found.How != "--config of the running kubelet, pid 1" {
		t.Errorf("found %+v; want root's kubelet, pid 1", scan.Found)
	}
	if len(scan.Ignored) != 1 || !strings.HasSuffix(scan.Ignored[0], " (uid 65534) calls itself kubelet: ignored (not root's)") {
		t.Errorf("ignored %q; want nobody's kubelet, not root's", scan.Ignored)
	}
	t.Logf("%s; ignored: %s", scan.Found.How, scan.Ignored)
}
