package main

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodedns/nodedns/internal/testutil/labels"
)

// TestLabelsKeptAcrossApplyAndRestore runs apply, a second apply after the node or the config
// changed, and restore over fixture nodes whose every file carries an SELinux label (set as the
// security.selinux attribute, which this kernel stores without SELinux), as on a RHEL-like node
// (docs/contract.md "SELinux labels"). Every file nodedns replaces keeps its label (and is really
// replaced: a new inode, so the label did not just stay on a file rewritten in place); a file it
// creates gets none from nodedns (the kernel's default: none without SELinux), and keeps the one
// the kernel gave it when the second apply rewrites it; restore gives every file its bytes and
// original label back, also to a file relabelled in between.
func TestLabelsKeptAcrossApplyAndRestore(t *testing.T) {
	tests := []struct {
		name, tree string
		netplan    bool
		// created and replaced are what the first apply creates and writes over an existing file;
		// rewritten what the second one writes over a file (created by the first, or the node's).
		created, replaced, rewritten []string
		// second is the environment of the second apply; change changes the node before it and
		// names the files it changed (restore leaves them as they are now).
		second map[string]string
		change func(t *testing.T, root string) []string
	}{
		{
			name:      "a regular /etc/resolv.conf, dhclient, kubelet.manage",
			tree:      "../../examples/kubespray-host-resolvconf",
			replaced:  []string{"etc/resolv.conf"},
			created:   []string{"var/lib/nodedns/resolv.conf", "etc/dhcp/dhclient-enter-hooks.d/nodedns"},
			second:    map[string]string{"NODEDNS_UPSTREAMS": "192.0.2.53 192.0.2.54", "NODEDNS_KUBELET_MANAGE": "true"},
			rewritten: []string{"var/lib/nodedns/resolv.conf", "etc/dhcp/dhclient-enter-hooks.d/nodedns", "var/lib/kubelet/config.yaml"},
		},
		{
			name:    "systemd-resolved's drop-in and netplan's YAML",
			tree:    "testdata/seeds/001",
			netplan: true,
			created: []string{"var/lib/nodedns/resolv.conf", "etc/systemd/resolved.conf.d/zz-nodedns.conf", "etc/netplan/90-nodedns.yaml"},
			// kubespray's drop-in gains a real server: nodedns's drop-in lists it; the pin
			// replaces the override.
			change: func(t *testing.T, root string) []string {
				p := filepath.Join(root, "etc/systemd/resolved.conf.d/kubespray.conf")
				f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
				must(t, err)
				_, err = f.WriteString("DNS=192.0.2.9\n")
				must(t, err)
				must(t, f.Close())
				return []string{"etc/systemd/resolved.conf.d/kubespray.conf"}
			},
			second:    map[string]string{"NODEDNS_NETPLAN_MODE": "pin"},
			rewritten: []string{"etc/systemd/resolved.conf.d/zz-nodedns.conf", "etc/netplan/90-nodedns.yaml"},
		},
		{
			name:      "NetworkManager's conf.d, kubespray's kubelet config",
			tree:      "testdata/kubespray/networkmanager",
			created:   []string{"var/lib/nodedns/resolv.conf", "etc/NetworkManager/conf.d/zz-nodedns.conf"},
			second:    map[string]string{"NODEDNS_UPSTREAMS": "192.0.2.53 192.0.2.54", "NODEDNS_KUBELET_MANAGE": "true"},
			rewritten: []string{"var/lib/nodedns/resolv.conf", "etc/NetworkManager/conf.d/zz-nodedns.conf", "etc/kubernetes/kubelet-config.yaml"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := exec.LookPath("netplan"); err != nil && tc.netplan {
				t.Skip("netplan is not installed (apt-get install --no-install-recommends netplan.io)")
			}
			root := t.TempDir()
			copyDir(t, tc.tree, root)
			if _, err := os.Lstat(filepath.Join(root, "lib/systemd/system/nodedns.service")); err != nil {
				installUnit(t, root)
			}
			labels.Need(t, root)
			orig := labelTree(t, root)
			want := treeState(t, root)

			ino := inodes(t, root, tc.replaced)
			r := nodedns(t, "--root", root, "apply")
			if r.code != 0 {
				t.Fatalf("apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			wrote(t, r, root, ino, append(tc.replaced, tc.created...))
			assertLabels(t, root, orig, "after apply")
			for _, p := range tc.created {
				if l, ok := labels.Get(t, filepath.Join(root, p)); ok {
					t.Errorf("%s, which apply created, has label %q from nodedns; want the kernel's (none here)", p, l)
				}
			}

			// The kernel labels the new files from policy (restorecon would too): the second
			// apply must keep those labels as well.
			now := map[string]string{}
			for k, v := range orig {
				now[k] = v
			}
			for i, p := range tc.created {
				now[p] = fmt.Sprintf("system_u:object_r:etc_t:s0:c%d\x00", 500+i)
				labels.Set(t, filepath.Join(root, p), now[p])
			}
			if tc.change != nil {
				for _, p := range tc.change(t, root) {
					want[p] = treeState(t, root)[p]
				}
			}
			for k, v := range tc.second {
				t.Setenv(k, v)
			}
			ino = inodes(t, root, tc.rewritten)
			r = nodedns(t, "--root", root, "apply")
			if r.code != 0 {
				t.Fatalf("second apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			wrote(t, r, root, ino, tc.rewritten)
			assertLabels(t, root, now, "after the second apply")

			// Files relabelled since (by hand, or a relabel with another policy) get their
			// original labels back.
			for _, p := range append(tc.replaced, tc.rewritten...) {
				if _, ok := orig[p]; ok {
					labels.Set(t, filepath.Join(root, p), "unconfined_u:object_r:user_tmp_t:s0\x00")
				}
			}
			r = nodedns(t, "--root", root, "restore")
			if r.code != 0 {
				t.Fatalf("restore: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			if diff := cmp.Diff(want, treeState(t, root)); diff != "" {
				t.Errorf("restore did not give the files back (-want +got):\n%s\n%s", diff, r.stdout)
			}
			assertLabels(t, root, orig, "after restore")
		})
	}
}

// labelTree gives every file and symlink under root (nodedns's state directory aside) a label of
// its own, as a labelled node has (/etc/resolv.conf net_conf_t, the rest etc_t with a category
// each, so a label copied onto the wrong file shows), and returns them by relative path.
func labelTree(t *testing.T, root string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		l := fmt.Sprintf("system_u:object_r:etc_t:s0:c%d\x00", len(m))
		if rel == "etc/resolv.conf" {
			l = "system_u:object_r:net_conf_t:s0\x00"
		}
		labels.Set(t, p, l)
		m[rel] = l
		return nil
	})
	must(t, err)
	return m
}

// assertLabels fails for every file of want whose label differs (a file no longer there is
// treeState's to judge).
func assertLabels(t *testing.T, root string, want map[string]string, when string) {
	t.Helper()
	for p, w := range want {
		if _, err := os.Lstat(filepath.Join(root, p)); err != nil {
			continue
		}
		got, ok := labels.Get(t, filepath.Join(root, p))
		if !ok {
			got = "(none)"
		}
		if got != w {
			t.Errorf("%s: label of %s = %q, want %q", when, p, got, w)
		}
	}
}

// inodes records the inode of each existing path (relative to root).
func inodes(t *testing.T, root string, paths []string) map[string]uint64 {
	t.Helper()
	m := map[string]uint64{}
	for _, p := range paths {
		if fi, err := os.Lstat(filepath.Join(root, p)); err == nil {
			m[p] = fi.Sys().(*syscall.Stat_t).Ino
		}
	}
	return m
}

// wrote fails unless apply said it wrote each path, and those that existed before (ino) are new
// inodes now: replaced by a rename, which is what loses a label.
func wrote(t *testing.T, r result, root string, ino map[string]uint64, paths []string) {
	t.Helper()
	for _, p := range paths {
		contains(t, "apply output", r.stdout, "wrote /"+p+"\n")
		before, ok := ino[p]
		if !ok {
			continue
		}
		if after := inodes(t, root, []string{p})[p]; after == before {
			t.Errorf("%s keeps inode %d: rewritten in place, not replaced by a rename", p, before)
		}
	}
}
