package kubelet

import (
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
)

// The live test's stand-ins for kubelet, rke2 and k3s are copies of this test binary: started with
// NODEDNS_FAKE_PROCESS set, it sleeps under whatever argv it was given (kubelet's real flags), and as
// the rke2 stand-in starts its kubelet child first, as rke2 does. As PID 1 of a new PID namespace it
// mounts that namespace's /proc, which the test reads through /proc/PID/root/proc.
func init() {
	role := os.Getenv("NODEDNS_FAKE_PROCESS")
	if role == "" {
		return
	}
	if os.Getpid() == 1 {
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			os.Exit(3)
		}
		if err := unix.Mount("proc", "/proc", "proc", 0, ""); err != nil {
			os.Exit(4)
		}
	}
	if role == "rke2" {
		args := strings.Split(os.Getenv("NODEDNS_FAKE_CHILD_ARGS"), "\n")
		child := &exec.Cmd{Path: os.Getenv("NODEDNS_FAKE_CHILD"), Args: args, Env: []string{"NODEDNS_FAKE_PROCESS=kubelet"}}
		if err := child.Start(); err != nil {
			os.Exit(5)
		}
	}
	time.Sleep(2 * time.Minute)
	os.Exit(0)
}

// startInPIDNamespace starts the stand-in named name (argv as given) as PID 1 of a new PID and mount
// namespace and returns that namespace's /proc as this process sees it.
func startInPIDNamespace(t *testing.T, name string, argv []string, env []string, childArgv []string) string {
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
	bin := filepath.Join(dir, name)
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	role := name
	if len(childArgv) > 0 {
		kb := filepath.Join(dir, "kubelet")
		if err := os.WriteFile(kb, data, 0o755); err != nil {
			t.Fatal(err)
		}
		env = append(env, "NODEDNS_FAKE_CHILD="+kb, "NODEDNS_FAKE_CHILD_ARGS="+strings.Join(childArgv, "\n"))
	}
	cmd := &exec.Cmd{Path: bin, Args: argv, Env: append(env, "NODEDNS_FAKE_PROCESS="+role),
		SysProcAttr: &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	proc := "/proc/" + strconv.Itoa(cmd.Process.Pid) + "/root/proc"
	comm := name
	if len(childArgv) > 0 {
		comm = "kubelet" // the child (its PID is not 2: PID 1's threads take PIDs too)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		// Until PID 1 has mounted its /proc, the path shows this machine's.
		if c, err := os.ReadFile(filepath.Join(proc, "1", "comm")); err == nil && strings.TrimSpace(string(c)) == name {
			if comm == name {
				return proc
			}
			if ents, err := os.ReadDir(proc); err == nil {
				for _, e := range ents {
					if c, err := os.ReadFile(filepath.Join(proc, e.Name(), "comm")); err == nil && strings.TrimSpace(string(c)) == comm {
						return proc
					}
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the %s stand-in did not come up in its PID namespace", name)
		}
		time.Sleep(20 * time.Millisecond)
	}
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
		proc := startInPIDNamespace(t, "kubelet", []string{"/usr/bin/kubelet",
			"--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf", "--kubeconfig=/etc/kubernetes/kubelet.conf",
			"--config=/var/lib/kubelet/config.yaml",
			"--resolv-conf=/etc/resolv.conf"}, nil, nil)
		found, ok, err := FindProcess(proc)
		if err != nil || !ok {
			t.Fatalf("no kubelet in the namespace's /proc: %v", err)
		}
		k := Load(nodefs.NewReader(trees+"kubeadm-healthy"), Complete(nodefs.NewReader(trees+"kubeadm-healthy"), found))
		if k.Path != KubeadmConfig || k.ResolvConf != "/etc/resolv.conf" || k.ResolvConfFrom != "--resolv-conf of the running kubelet, pid 1" || k.Shape != ShapeKubelet {
			t.Errorf("read as %+v", k)
		}
	})
	t.Run("rke2", func(t *testing.T) {
		// The flags rke2 builds (k3s's agent argsMap, sorted) and a kubelet-arg after them.
		proc := startInPIDNamespace(t, "rke2", []string{"/usr/local/bin/rke2", "agent"}, nil, []string{
			"/var/lib/rancher/rke2/bin/kubelet", "--address=0.0.0.0", "--anonymous-auth=false", "--authentication-token-webhook=true",
			"--cgroup-driver=systemd", "--client-ca-file=/var/lib/rancher/rke2/agent/client-ca.crt", "--cloud-provider=external",
			"--cluster-dns=10.43.0.10", "--cluster-domain=cluster.local", "--config-dir=/var/lib/rancher/rke2/agent/etc/kubelet.conf.d",
			"--container-runtime-endpoint=unix:///run/k3s/containerd/containerd.sock", "--hostname-override=node1",
			"--kubeconfig=/var/lib/rancher/rke2/agent/kubelet.kubeconfig", "--node-labels=", "--pod-manifest-path=/var/lib/rancher/rke2/agent/pod-manifests",
			"--read-only-port=0", "--resolv-conf=/run/systemd/resolve/resolv.conf", "--serialize-image-pulls=false",
			"--tls-cert-file=/var/lib/rancher/rke2/agent/serving-kubelet.crt", "--tls-private-key-file=/var/lib/rancher/rke2/agent/serving-kubelet.key",
			"--resolv-conf=/etc/resolv.conf"})
		found, ok, err := FindProcess(proc)
		if err != nil || !ok {
			t.Fatalf("no kubelet in the namespace's /proc: %v", err)
		}
		r := nodefs.NewReader(trees + "rke2-healthy")
		k := Load(r, Complete(r, found))
		if k.Shape != ShapeRKE2 || k.ResolvConf != "/etc/resolv.conf" || !strings.HasPrefix(k.ResolvConfFrom, "--resolv-conf of the running kubelet, pid ") ||
			k.ConfigDir != "/var/lib/rancher/rke2/agent/etc/kubelet.conf.d" || len(k.ClusterDNS) != 1 {
			t.Errorf("read as %+v", k)
		}
	})
	t.Run("k3s", func(t *testing.T) {
		proc := startInPIDNamespace(t, "k3s", []string{"/usr/local/bin/k3s", "server"}, []string{"K3S_RESOLV_CONF=/etc/resolv.conf", "K3S_TOKEN=x"}, nil)
		found, ok, err := FindProcess(proc)
		if err != nil || !ok {
			t.Fatalf("the k3s process was not taken for kubelet's: %v", err)
		}
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
