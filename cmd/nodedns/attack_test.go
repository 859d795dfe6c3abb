package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodedns/nodedns/internal/testutil/nstest"
)

// The attacker's tests: what an unprivileged user (uid 65534, nobody, no passwd entry added) can
// do to nodedns's inputs and outputs when something on the node is theirs, each attack run as that
// user, its effect measured before the fix in the test's comment.

// asNobody runs a shell script as uid and gid 65534 in dir (setpriv, as SysProcAttr.Credential
// would), failing the test if it fails: the attack itself must work.
func asNobody(t *testing.T, dir, script string) {
	t.Helper()
	cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-ec", script)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the attack as nobody: %v\n%s\n%s", err, script, out)
	}
}

// attackTree copies a fixture tree for an attack: the temporary directories above it opened for
// walking (0755), so that nobody reaches the parts of the tree that are theirs.
func attackTree(t *testing.T, src string) string {
	t.Helper()
	root := copyTree(t, src)
	for d := root; d != "/" && strings.HasPrefix(d, os.TempDir()); d = filepath.Dir(d) {
		if d == filepath.Clean(os.TempDir()) {
			break
		}
		must(t, os.Chmod(d, 0o755))
	}
	return root
}

// TestAttackKubeletManageEdits (docs/contract.md "kubelet.manage"; "Where things live"): a place
// kubelet.manage edits that another user can change (its directory theirs, or the file itself) is
// refused, named, and nothing is written through it: nobody plants a symlink to a file of root's
// (/etc/victim, 0600) where apply would write, or owns the file apply would edit, or adds a drop-in
// of their own that would win, in /etc/sysconfig and /etc/default (kubeadm's environment files),
// /etc/rancher/k3s/config.yaml.d, /etc/rancher/rke2 and a kubelet --config-dir; or root's own link
// leads to a file of nobody's. apply exits 1 with the target blocked, naming it: plan says so too.
//
// Measured before: every link planted in a directory of nobody's, and root's link to a file in
// one, was refused by the store at write time ("write failed ... the directory /etc/sysconfig on the
// way to it is owned by uid 65534"; plan still proposed the edit), root's file behind it unchanged;
// but the file of nobody's in /etc/sysconfig (root's) was edited, exit 0, and kept nobody's (the
// store keeps a rewritten file's owner): its owner could point kubelet elsewhere again at once, and
// restore would hand the original back to them.
func TestAttackKubeletManageEdits(t *testing.T) {
	nstest.Require(t)
	cfg := manageConfig(t, "")
	for _, tc := range []struct {
		name, tree string
		setup      string // as root, in the tree: what makes the place another user's
		attack     string // as nobody, in the tree
		refused    string // what apply's output names
	}{
		{"/etc/sysconfig is nobody's: the environment file a link to root's file", "kubelet/kubeadm-looping",
			"chown 65534:65534 etc/sysconfig && cp etc/sysconfig/kubelet etc/victim && chmod 0600 etc/victim",
			"rm etc/sysconfig/kubelet && ln -s /etc/victim etc/sysconfig/kubelet", "/etc/sysconfig"},
		{"/etc/sysconfig/kubelet is nobody's", "kubelet/kubeadm-looping",
			"chown 65534:65534 etc/sysconfig/kubelet && : > etc/victim",
			"printf 'KUBELET_EXTRA_ARGS=--resolv-conf=/etc/resolv.conf\\n' > etc/sysconfig/kubelet", "/etc/sysconfig/kubelet"},
		{"/etc/sysconfig/kubelet root's link to a file of nobody's", "kubelet/kubeadm-looping",
			"mkdir -p srv/x && mv etc/sysconfig/kubelet srv/x/kubelet && ln -s /srv/x/kubelet etc/sysconfig/kubelet && chown -R 65534:65534 srv/x && : > etc/victim",
			"printf 'KUBELET_EXTRA_ARGS=--resolv-conf=/etc/resolv.conf\n' > srv/x/kubelet", "/etc/sysconfig/kubelet"},
		{"/etc/default is nobody's: the environment file a link to root's file", "kubelet/kubeadm-looping",
			"mkdir -p etc/default && mv etc/sysconfig/kubelet etc/default/kubelet && sed -i 's|/etc/sysconfig/kubelet|/etc/default/kubelet|' usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf && " +
				"chown 65534:65534 etc/default && cp etc/default/kubelet etc/victim && chmod 0600 etc/victim",
			"rm etc/default/kubelet && ln -s /etc/victim etc/default/kubelet", "/etc/default"},
		{"k3s's config.yaml.d is nobody's: the drop-in a link to root's file", "kubelet/k3s-dropin-uppercase",
			"chown 65534:65534 etc/rancher/k3s/config.yaml.d && cp etc/rancher/k3s/config.yaml.d/50-dns.YAML etc/victim && chmod 0600 etc/victim",
			"rm etc/rancher/k3s/config.yaml.d/50-dns.YAML && ln -s /etc/victim etc/rancher/k3s/config.yaml.d/50-dns.YAML", "/etc/rancher/k3s/config.yaml.d"},
		{"k3s's config.yaml.d is nobody's: a drop-in of theirs that wins", "kubelet/k3s-dropin-uppercase",
			"chown 65534:65534 etc/rancher/k3s/config.yaml.d && : > etc/victim",
			"printf 'resolv-conf: /etc/resolv.conf\\n' > etc/rancher/k3s/config.yaml.d/90-mine.yaml", "/etc/rancher/k3s/config.yaml.d"},
		{"/etc/rancher/rke2 is nobody's: config.yaml a link to root's file", "kubelet/rke2-looping",
			"chown 65534:65534 etc/rancher/rke2 && cp etc/rancher/rke2/config.yaml etc/victim && chmod 0600 etc/victim",
			"rm etc/rancher/rke2/config.yaml && ln -s /etc/victim etc/rancher/rke2/config.yaml", "/etc/rancher/rke2"},
		{"the --config-dir is nobody's: zz-nodedns.conf a link to root's file", "kubelet/kubeadm-configdir-looping",
			"chown 65534:65534 etc/kubernetes/kubelet.conf.d && : > etc/victim && chmod 0600 etc/victim",
			"ln -s /etc/victim etc/kubernetes/kubelet.conf.d/zz-nodedns.conf", "/etc/kubernetes/kubelet.conf.d"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := attackTree(t, "testdata/"+tc.tree)
			run := exec.Command("sh", "-ec", tc.setup)
			run.Dir = root
			if out, err := run.CombinedOutput(); err != nil {
				t.Fatalf("setup: %v\n%s", err, out)
			}
			// root's file an attacker wants written through a link (a copy of the file apply would
			// edit, so that the plan is the same through the link), 0600: it must not change.
			victim := filepath.Join(root, "etc/victim")
			victimData, err := os.ReadFile(victim)
			must(t, err)
			asNobody(t, root, tc.attack)
			before := treeState(t, root)
			r := nodedns(t, "--config", cfg, "--root", root, "apply")
			t.Logf("apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			if data, err := os.ReadFile(victim); err != nil || string(data) != string(victimData) {
				t.Errorf("root's file behind the link was changed (%v): %q", err, data)
			}
			if r.code == 0 {
				t.Errorf("apply exit 0: it did not refuse the place nobody can change")
			}
			if !strings.Contains(r.stdout+r.stderr, tc.refused) {
				t.Errorf("apply does not name %s", tc.refused)
			}
			if !strings.Contains(r.stdout, "blocked "+tc.refused) && !strings.Contains(r.stdout, "blocked /"+strings.TrimPrefix(tc.refused, "/")) {
				t.Errorf("apply does not block the target in %s: %s", tc.refused, r.stdout)
			}
			after := treeState(t, root)
			for _, p := range changedFiles(before, after) {
				if strings.HasPrefix(p, strings.TrimPrefix(tc.refused, "/")) {
					t.Errorf("apply changed %s, in the place nobody can change", p)
				}
			}
		})
	}
}
