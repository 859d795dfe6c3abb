package kubelet

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/nodefs"
)

func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, data := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func manageOn(t *testing.T, root string, cfg config.Config) (Edit, bool) {
	t.Helper()
	r := nodefs.NewReader(root)
	found, _, _ := Find(r, cfg)
	return Manage(r, Load(r, found), nodednsFile)
}

// TestManageBlocks: what kubelet.manage leaves alone, and says why.
func TestManageBlocks(t *testing.T) {
	kc := "kind: KubeletConfiguration\nresolvConf: /etc/resolv.conf\n"
	t.Run("a drop-in that sorts after nodedns's still sets resolvConf", func(t *testing.T) {
		root := writeTree(t, map[string]string{
			"/etc/systemd/system/kubelet.service":         "[Service]\nExecStart=/usr/bin/kubelet --config=/var/lib/kubelet/config.yaml --config-dir=/etc/kubernetes/kubelet.conf.d\n",
			"/var/lib/kubelet/config.yaml":                kc,
			"/etc/kubernetes/kubelet.conf.d/zzz-dns.conf": kc,
		})
		e, ok := manageOn(t, root, config.Default())
		if !ok || e.Blocked == "" || e.Target != "/etc/kubernetes/kubelet.conf.d/zzz-dns.conf" || !strings.Contains(e.Blocked, "sorts after nodedns's drop-in") {
			t.Errorf("got %+v", e)
		}
	})
	t.Run("a config nodedns does not declare", func(t *testing.T) {
		root := writeTree(t, map[string]string{
			"/etc/systemd/system/kubelet.service": "[Service]\nExecStart=/usr/bin/kubelet --config=/opt/kubelet/config.yaml\n",
			"/opt/kubelet/config.yaml":            kc,
		})
		e, ok := manageOn(t, root, config.Default())
		if !ok || e.Target != "/opt/kubelet/config.yaml" || !strings.Contains(e.Blocked, "not among the files kubelet.manage may change") {
			t.Errorf("got %+v", e)
		}
	})
	t.Run("Environment= of the unit", func(t *testing.T) {
		root := writeTree(t, map[string]string{
			"/etc/systemd/system/kubelet.service": "[Service]\nEnvironment=\"ARGS=--resolv-conf=/etc/resolv.conf\"\nExecStart=/usr/bin/kubelet --config=/var/lib/kubelet/config.yaml $ARGS\n",
			"/var/lib/kubelet/config.yaml":        kc,
		})
		e, ok := manageOn(t, root, config.Default())
		if !ok || !strings.Contains(e.Blocked, "$ARGS comes from Environment= in /etc/systemd/system/kubelet.service:2") {
			t.Errorf("got %+v", e)
		}
	})
	t.Run("already nodedns's file: nothing to do", func(t *testing.T) {
		root := writeTree(t, map[string]string{"/var/lib/kubelet/config.yaml": "resolvConf: " + nodednsFile + "\n"})
		if e, ok := manageOn(t, root, config.Default()); ok {
			t.Errorf("got %+v", e)
		}
	})
	t.Run("resolvConf disabled: left as the user set it", func(t *testing.T) {
		root := writeTree(t, map[string]string{"/var/lib/kubelet/config.yaml": "resolvConf: \"\"\n"})
		if e, ok := manageOn(t, root, config.Default()); ok {
			t.Errorf("got %+v", e)
		}
	})
}

// TestManageRancherDropInAnyCase: a resolv-conf in a k3s config.yaml.d drop-in whose extension is
// in upper case (k3s reads it: configfilearg's dotDFiles matches .yaml and .yml in any case) is the
// file kubelet.manage edits; adding the key to config.yaml instead would lose to the drop-in.
func TestManageRancherDropInAnyCase(t *testing.T) {
	const dropIn = "/etc/rancher/k3s/config.yaml.d/50-dns.YAML"
	root := writeTree(t, map[string]string{
		"/etc/systemd/system/k3s.service":  "[Service]\nExecStart=/usr/local/bin/k3s server\n",
		"/etc/resolv.conf":                 "nameserver 127.0.0.53\n",
		"/run/systemd/resolve/resolv.conf": "nameserver 10.66.0.53\n",
		"/etc/rancher/k3s/config.yaml":     "write-kubeconfig-mode: \"0644\"\n",
		dropIn:                             "resolv-conf: /etc/resolv.conf\n",
	})
	e, ok := manageOn(t, root, config.Default())
	if !ok || e.Blocked != "" || e.Path != dropIn || string(e.After) != "resolv-conf: "+nodednsFile+"\n" {
		t.Errorf("got %+v (After %q); want %s pointed at %s", e, e.After, dropIn, nodednsFile)
	}
}

// TestManageRancherArgSpelling: kubelet.manage edits the kubelet-arg kubelet gets last and keeps
// its spelling: written as resolv-conf=, a resolv_conf= entry would still be passed after it.
func TestManageRancherArgSpelling(t *testing.T) {
	const cfg = "/etc/rancher/rke2/config.yaml"
	root := writeTree(t, map[string]string{
		"/usr/local/lib/systemd/system/rke2-server.service": "[Service]\nExecStart=/usr/local/bin/rke2 server\n",
		cfg: "kubelet-arg:\n- resolv_conf=/etc/resolv.conf\n- --resolv-conf=/run/systemd/resolve/resolv.conf\n",
	})
	e, ok := manageOn(t, root, config.Default())
	want := "kubelet-arg:\n- resolv_conf=" + nodednsFile + "\n- --resolv-conf=/run/systemd/resolve/resolv.conf\n"
	if !ok || e.Blocked != "" || e.Path != cfg || string(e.After) != want {
		t.Errorf("got %+v (After %q); want %q", e, e.After, want)
	}
}

// TestManageRancherKubeletDropIn: a drop-in of k3s's kubelet --config-dir that sets resolvConf after
// k3s's own wins over anything k3s's config says: kubelet.manage refuses, naming it.
func TestManageRancherKubeletDropIn(t *testing.T) {
	const dropIn = "/var/lib/rancher/k3s/agent/etc/kubelet.conf.d/50-dns.conf"
	root := writeTree(t, map[string]string{
		"/etc/systemd/system/k3s.service":  "[Service]\nExecStart=/usr/local/bin/k3s server\n",
		"/etc/resolv.conf":                 "nameserver 127.0.0.53\n",
		"/run/systemd/resolve/resolv.conf": "nameserver 10.66.0.53\n",
		dropIn:                             "kind: KubeletConfiguration\nresolvConf: /etc/resolv.conf\n",
	})
	e, ok := manageOn(t, root, config.Default())
	if !ok || e.Target != dropIn || !strings.Contains(e.Blocked, dropIn+" sets resolvConf: /etc/resolv.conf") {
		t.Errorf("got %+v", e)
	}
}
