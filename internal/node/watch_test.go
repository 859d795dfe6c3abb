package node_test

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/internal/policy"
)

// recorder is a nodefs.Reader that notes every node path asked for, with the operation.
type recorder struct {
	nodefs.Reader
	mu  sync.Mutex
	ops []op
}

type op struct{ kind, path string }

func (r *recorder) note(kind, p string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, op{kind, path.Clean(p)})
}

func (r *recorder) ReadFile(p string, k nodefs.Kind) ([]byte, error) {
	r.note("read", p)
	return r.Reader.ReadFile(p, k)
}

func (r *recorder) ReadDir(p string) ([]fs.DirEntry, error) {
	r.note("list", p)
	return r.Reader.ReadDir(p)
}

func (r *recorder) Stat(p string) (fs.FileInfo, error) {
	r.note("stat", p)
	return r.Reader.Stat(p)
}

func (r *recorder) Lstat(p string) (fs.FileInfo, error) {
	r.note("stat", p)
	return r.Reader.Lstat(p)
}

func (r *recorder) Readlink(p string) (string, error) {
	r.note("stat", p)
	return r.Reader.Readlink(p)
}

func (r *recorder) ResolveLink(p string) (string, error) {
	r.note("stat", p)
	return r.Reader.ResolveLink(p)
}

// notWatched are the inputs node.Watches leaves out on purpose (see its doc).
func notWatched(p string) bool {
	return strings.HasPrefix(p, nodefs.SysClassNet+"/") || p == nodefs.SysClassNet ||
		strings.Contains(p, node.UnitName) || // the nodedns unit, its drop-ins and .wants links: boot.persistence only
		p == "/etc/systemd/system" || // listed for the .wants links of the nodedns unit
		strings.HasPrefix(p, node.BackupDir+"/") // nodedns's own backups: only its own passes write them
}

// TestWatchesCoverEveryRead walks what Observe reads and what a plan writes on the seed nodes, the
// example node and a networkd node, and fails on any path outside the directories node.Watches
// declares for the daemon: a reader added without its declaration is caught here, not by an
// operator whose edit waits for the 5-minute resync.
func TestWatchesCoverEveryRead(t *testing.T) {
	roots := testRoots(t)
	cfg := config.Default()
	manage := cfg
	manage.Kubelet.Manage = true
	for name, root := range roots {
		t.Run(name, func(t *testing.T) {
			watchesCoverEveryRead(t, root, cfg)
		})
		// kubelet.manage reads the file it edits and nodedns's restart record.
		t.Run(name+" kubelet.manage", func(t *testing.T) {
			watchesCoverEveryRead(t, root, manage)
		})
	}
}

// testRoots are the test node trees: the seeds, the example, kubespray's own output, and nodes
// built here.
func testRoots(t *testing.T) map[string]string {
	roots := map[string]string{
		"seed 001": "../../cmd/nodedns/testdata/seeds/001",
		"seed 002": "../../cmd/nodedns/testdata/seeds/002",
		"seed 003": "../../cmd/nodedns/testdata/seeds/003",
		"example":  "../../examples/kubespray-host-resolvconf",
		// kubespray's own output: kubelet's config found through kubelet.service and kubelet.env,
		// dhclient's history read behind kubespray's supersede.
		"kubespray dhclient":           "../../cmd/nodedns/testdata/kubespray/dhclient",
		"kubespray dhclient-loop-only": "../../cmd/nodedns/testdata/kubespray/dhclient-loop-only",
		"kubespray resolved":           "../../cmd/nodedns/testdata/kubespray/resolved",
		"kubeadm":                      kubeadmNode(t),
		// NetworkManager's configuration, profiles, intern file and device state (issue 12).
		"kubespray networkmanager": "../../cmd/nodedns/testdata/kubespray/networkmanager",
		"networkd":                 networkdNode(t),
		"resolved 262 delegates":   delegatesNode(t),
	}
	// kubelet as kubeadm, RKE2 and k3s start it: units, environment files, --config-dir
	// subdirectories, RKE2's and k3s's config.yaml and their test of /etc/resolv.conf.
	for _, tree := range []string{"kubeadm", "kubeadm-configdir", "rke2", "k3s"} {
		for _, state := range []string{"healthy", "looping"} {
			roots[tree+" "+state] = "../../cmd/nodedns/testdata/kubelet/" + tree + "-" + state
		}
	}
	return roots
}

// TestPlannedWritesAreDeclared plans every test node tree and fails on a change whose path is not
// among what the mechanisms declare they write (node.Writes, the linked targets of LinkedWrites),
// the files the config names, or the state directory: restore may change exactly that set
// (reconcile.Targets), so a mechanism that writes a file it did not declare would leave it behind
// on restore, and no config key would be refused for naming it.
func TestPlannedWritesAreDeclared(t *testing.T) {
	cfg := config.Default()
	declared := func(st nodefs.Reader, p string) bool {
		pats := node.Writes()
		for _, ps := range cfg.WrittenPaths() {
			pats = append(pats, ps...)
		}
		pats = append(pats, path.Join(config.StateDir, "*"))
		for _, l := range node.LinkedWrites() {
			if final, err := st.ResolveLink(l); err == nil {
				pats = append(pats, final)
			}
		}
		for _, pat := range pats {
			if ok, _ := path.Match(pat, p); ok {
				return true
			}
		}
		return false
	}
	if declared(nodefs.NewReader(t.TempDir()), "/etc/hosts") {
		t.Fatal("/etc/hosts counts as declared: the check cannot fail")
	}
	total, kubeletEdits := 0, 0
	// kubelet.manage's edits of kubelet's configuration too (docs/contract.md "kubelet.manage").
	manage := config.Default()
	manage.Kubelet.Manage = true
	for name, root := range testRoots(t) {
		for _, c := range []struct {
			name string
			cfg  config.Config
		}{{"", cfg}, {" kubelet.manage", manage}} {
			t.Run(name+c.name, func(t *testing.T) {
				st := nodefs.NewReader(root)
				s := node.Observe(st, c.cfg, time.Now())
				p := policy.Compute(s, c.cfg)
				if s.KubeletManage != nil && s.KubeletManage.Path != "" {
					kubeletEdits++
				}
				for _, c := range p.Changes {
					total++
					for _, q := range []string{c.Path, c.Target} {
						if q != "" && !declared(st, q) {
							t.Errorf("the plan writes %s, which no mechanism declares in node.Writes (nor the config or the state directory)", q)
						}
					}
				}
			})
		}
	}
	if kubeletEdits < 8 {
		t.Errorf("kubelet.manage edited kubelet's configuration on only %d test trees: the check saw too little", kubeletEdits)
	}
	if total < 10 {
		t.Errorf("only %d planned changes over the test trees: the check saw too little", total)
	}
}

func watchesCoverEveryRead(t *testing.T, root string, cfg config.Config) {
	{
		{
			st := nodefs.NewReader(root)
			rec := &recorder{Reader: st}
			s := node.Observe(rec, cfg, time.Now())
			p := policy.Compute(s, cfg)
			for _, c := range p.Changes {
				rec.note("write", c.Path)
				rec.note("write", c.Target)
			}
			ws := node.Watches(cfg, s)
			resolve := func(p string) string {
				if r, err := st.ResolveLink(p); err == nil {
					return r
				}
				return p
			}
			watchedDir := func(d string) bool {
				for _, w := range ws {
					if resolve(w.Dir) == resolve(d) {
						return true
					}
				}
				return false
			}
			watchedFile := func(p string) bool {
				for _, w := range ws {
					if resolve(w.Dir) == resolve(path.Dir(p)) && w.Match(path.Base(p)) {
						return true
					}
				}
				return false
			}
			if len(rec.ops) < 20 {
				t.Fatalf("only %d reads recorded: the recorder does not see Observe", len(rec.ops))
			}
			for _, o := range rec.ops {
				if notWatched(o.path) {
					continue
				}
				ok := false
				switch o.kind {
				case "list":
					ok = watchedDir(o.path)
				case "read", "write":
					ok = watchedFile(o.path)
				case "stat":
					ok = watchedDir(o.path) || watchedFile(o.path)
				}
				if !ok {
					t.Errorf("%s %s: no declared watch covers it (node.Watches)", o.kind, o.path)
				}
			}
		}
	}
}

// networkdNode is a node with networkd DHCP and no netplan: a .network file, nodedns's drop-in for
// it, per-link state of both daemons and a lease.
func networkdNode(t *testing.T) string {
	root := node.WriteTree(t, map[string]string{
		"/etc/systemd/network/50-eth0.network":                "[Match]\nName=eth0\n[Network]\nDHCP=yes\n",
		"/etc/systemd/network/50-eth0.network.d/nodedns.conf": "# nodedns\n[DHCPv4]\nUseDomains=no\n",
		"/run/systemd/netif/links/2":                          "ADMIN_STATE=configured\nNETWORK_FILE=/etc/systemd/network/50-eth0.network\nDNS=10.0.0.2\nDOMAINS=example.org\n",
		"/run/systemd/resolve/netif/3":                        "DNS=169.254.25.10\n",
		"/run/systemd/netif/leases/2":                         "ADDRESS=10.0.0.5\nDNS=10.0.0.2\nDOMAINNAME=example.org\n",
		"/run/systemd/resolve/resolv.conf":                    "nameserver 10.0.0.2\nsearch example.org\n",
		"/run/systemd/resolve/stub-resolv.conf":               "nameserver 127.0.0.53\nsearch example.org\n",
		"/etc/systemd/resolved.conf.d/kubespray.conf":         "[Resolve]\nDNS=169.254.25.10\n",
		"/sys/class/net/eth0/ifindex":                         "2\n",
		"/var/lib/kubelet/config.yaml":                        "kind: KubeletConfiguration\nclusterDNS: [169.254.25.10]\nresolvConf: /run/systemd/resolve/resolv.conf\n",
	})
	if err := os.Symlink("../run/systemd/resolve/stub-resolv.conf", filepath.Join(root, "etc/resolv.conf")); err != nil {
		t.Fatal(err)
	}
	return root
}

// delegatesNode is a systemd 262 node whose resolved has DNS delegates in /etc, /run and /usr/lib,
// with drop-ins, one of them pointing at the cache: the plan edits one and masks another.
func delegatesNode(t *testing.T) string {
	root := node.WriteTree(t, map[string]string{
		"/usr/lib/x86_64-linux-gnu/systemd/libsystemd-shared-262.so":                   "",
		"/etc/systemd/dns-delegate.d/kubespray.dns-delegate":                           "[Delegate]\nDNS=169.254.25.10\nDomains=~.\nDefaultRoute=yes\n",
		"/usr/lib/systemd/dns-delegate.d/lab.dns-delegate":                             "[Delegate]\nDNS=10.0.0.9\nDomains=~lab\n",
		"/run/systemd/dns-delegate.d/lab.dns-delegate.d/10-cache.conf":                 "[Delegate]\nDNS=169.254.25.10\n",
		"/usr/local/lib/systemd/dns-delegate.d/kubespray.dns-delegate.d/20-extra.conf": "[Delegate]\nDomains=example.org\n",
		"/run/systemd/resolve/resolv.conf":                                             "nameserver 10.0.0.2\nnameserver 169.254.25.10\n",
		"/run/systemd/resolve/stub-resolv.conf":                                        "nameserver 127.0.0.53\n",
		"/etc/systemd/resolved.conf":                                                   "[Resolve]\nDNS=10.0.0.2\n",
	})
	if err := os.Symlink("../run/systemd/resolve/stub-resolv.conf", filepath.Join(root, "etc/resolv.conf")); err != nil {
		t.Fatal(err)
	}
	return root
}

// kubeadmNode is a node as kubeadm's packages leave it: kubelet.service with 10-kubeadm.conf naming
// kubeadm-flags.env and /etc/default/kubelet, and --config-dir drop-ins.
func kubeadmNode(t *testing.T) string {
	root := t.TempDir()
	for p, data := range map[string]string{
		"/lib/systemd/system/kubelet.service": "[Service]\nExecStart=/usr/bin/kubelet\nRestart=always\n",
		"/etc/systemd/system/kubelet.service.d/10-kubeadm.conf": "[Service]\n" +
			"Environment=\"KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf\"\n" +
			"Environment=\"KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml --config-dir=/etc/kubernetes/kubelet.conf.d\"\n" +
			"EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env\nEnvironmentFile=-/etc/default/kubelet\nExecStart=\n" +
			"ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS\n",
		"/var/lib/kubelet/kubeadm-flags.env":             "KUBELET_KUBEADM_ARGS=\"--container-runtime-endpoint=unix:///var/run/containerd/containerd.sock\"\n",
		"/var/lib/kubelet/config.yaml":                   "kind: KubeletConfiguration\nclusterDNS: [10.96.0.10]\nresolvConf: /run/systemd/resolve/resolv.conf\n",
		"/etc/kubernetes/kubelet.conf.d/50-nodedns.conf": "kind: KubeletConfiguration\nresolvConf: /var/lib/nodedns/resolv.conf\n",
		"/etc/resolv.conf":                               "nameserver 10.0.0.2\n",
	} {
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
