package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nodedns/nodedns/internal/store"
	"github.com/nodedns/nodedns/internal/store/manifest"
)

// Trusted state, tried as a local attacker would: nodedns's state another user can write, symlinks
// planted in it, a manifest entry for a setuid file. nodedns refuses with a clear error, creates
// nothing outside the root and never a setuid file.
func TestHostileState(t *testing.T) {
	const backup = "var/lib/nodedns/backup"
	hook := "/etc/dhcp/dhclient-enter-hooks.d/nodedns"
	evil := "#!/bin/sh\ncp /bin/sh /tmp/rootshell\n"
	tests := []struct {
		name  string
		root  bool
		setup func(t *testing.T, root, outside string)
		// apply's and restore's error says this; "" means apply works and only restore refuses.
		applyErr   string
		restoreErr string
	}{
		{
			name:       "world-writable backup directory",
			setup:      func(t *testing.T, root, _ string) { mkdirAt(t, root, backup, 0o777) },
			applyErr:   "refusing untrusted state /var/lib/nodedns/backup: it is writable by others",
			restoreErr: "refusing untrusted state /var/lib/nodedns/backup: it is writable by others",
		},
		{
			name: "backup directory owned by another user",
			root: true,
			setup: func(t *testing.T, root, _ string) {
				mkdirAt(t, root, backup, 0o700)
				must(t, os.Chown(filepath.Join(root, backup), 65534, 65534))
			},
			applyErr:   "refusing untrusted state /var/lib/nodedns/backup: it is owned by uid 65534",
			restoreErr: "refusing untrusted state /var/lib/nodedns/backup: it is owned by uid 65534",
		},
		{
			name: "backup directory a symlink out of the root",
			setup: func(t *testing.T, root, outside string) {
				mkdirAt(t, root, "var/lib/nodedns", 0o755)
				must(t, os.Symlink(outside, filepath.Join(root, backup)))
			},
			applyErr:   "refusing untrusted state /var/lib/nodedns/backup: it is a symlink",
			restoreErr: "refusing untrusted state /var/lib/nodedns/backup: it is a symlink",
		},
		{
			name: ".lock a symlink out of the root",
			setup: func(t *testing.T, root, outside string) {
				mkdirAt(t, root, backup, 0o700)
				must(t, os.Symlink(filepath.Join(outside, "created-by-nodedns"), filepath.Join(root, backup, ".lock")))
			},
			applyErr:   "refusing untrusted state /var/lib/nodedns/backup/.lock: it is a symlink",
			restoreErr: "refusing untrusted state /var/lib/nodedns/backup/.lock: it is a symlink",
		},
		{
			name: "a planted setuid manifest entry",
			setup: func(t *testing.T, root, _ string) {
				mkdirAt(t, root, backup, 0o700)
				entries := []store.Entry{{Path: hook, Kind: store.KindFile, Mode: 0o755 | fs.ModeSetuid, SHA256: sha(evil)}}
				data, err := manifest.Marshal(entries)
				must(t, err)
				must(t, os.WriteFile(filepath.Join(root, backup, "manifest.json"), data, 0o600))
				must(t, os.WriteFile(filepath.Join(root, backup, sha(evil)), []byte(evil), 0o600))
			},
			restoreErr: "restore " + hook + ": the backup records mode urwxr-xr-x (4755) with setuid, setgid or sticky bits, which nodedns never sets",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.root && os.Geteuid() != 0 {
				t.Skip("giving a directory away needs root")
			}
			root := copyTree(t, "testdata/seeds/002")
			outside := t.TempDir()
			tt.setup(t, root, outside)
			before := nodeState(t, root)

			ap := nodedns(t, "--root", root, "apply")
			if tt.applyErr != "" {
				if ap.code != 1 || !strings.Contains(ap.stderr, tt.applyErr) {
					t.Errorf("apply: exit %d, want 1 saying %q:\n%s", ap.code, tt.applyErr, ap.stderr)
				}
				if diff := cmp.Diff(before, nodeState(t, root)); diff != "" {
					t.Errorf("apply on untrusted state changed the node (-before +after):\n%s", diff)
				}
			} else if ap.code != 0 {
				t.Errorf("apply: exit %d\n%s", ap.code, ap.stderr)
			}
			rs := nodedns(t, "--root", root, "restore")
			if rs.code != 1 || !strings.Contains(rs.stderr, tt.restoreErr) {
				t.Errorf("restore: exit %d, want 1 saying %q:\n%s%s", rs.code, tt.restoreErr, rs.stdout, rs.stderr)
			}
			for _, r := range []result{ap, rs} {
				if strings.Contains(r.stderr, root) {
					t.Errorf("an error names the host path %s:\n%s", root, r.stderr)
				}
			}
			if es, _ := os.ReadDir(outside); len(es) > 0 {
				t.Errorf("nodedns created %d file(s) outside the root", len(es))
			}
			for _, p := range setuidUnder(t, root) {
				t.Errorf("a setuid or setgid file exists: %s", p)
			}
		})
	}
}

func mkdirAt(t *testing.T, root, rel string, mode fs.FileMode) {
	t.Helper()
	p := filepath.Join(root, rel)
	must(t, os.MkdirAll(p, 0o755))
	must(t, os.Chmod(p, mode))
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func setuidUnder(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if fi, err := d.Info(); err == nil && fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// TestConfigPathsThatCollide: a path key naming a managed file or nodedns's state is a config error
// naming the key, and nothing changes.
func TestConfigPathsThatCollide(t *testing.T) {
	for _, tc := range []struct{ yaml, key string }{
		{"metrics:\n  textfile: /etc/resolv.conf\n", "metrics.textfile"},
		{"kubelet:\n  resolvConf: /var/lib/nodedns/backup/manifest.json\n", "kubelet.resolvConf"},
		{"kubelet:\n  resolvConf: /etc/dhcp/dhclient-enter-hooks.d/nodedns\n", "kubelet.resolvConf"},
	} {
		t.Run(tc.key, func(t *testing.T) {
			root := copyTree(t, "testdata/seeds/002")
			must(t, os.MkdirAll(filepath.Join(root, "etc/nodedns"), 0o755))
			must(t, os.WriteFile(filepath.Join(root, "etc/nodedns/config.yaml"), []byte(tc.yaml), 0o644))
			before := nodeState(t, root)
			for _, cmd := range []string{"apply", "restore"} {
				r := nodedns(t, "--root", root, cmd)
				if r.code != 1 || !strings.Contains(r.stderr, "config key "+tc.key+": ") {
					t.Errorf("%s: exit %d, want 1 with a config error naming %s:\n%s", cmd, r.code, tc.key, r.stderr)
				}
			}
			if diff := cmp.Diff(before, nodeState(t, root)); diff != "" {
				t.Errorf("a config error changed the node (-before +after):\n%s", diff)
			}
			if _, err := os.Lstat(filepath.Join(root, "var/lib/nodedns")); err == nil {
				t.Error("a config error created the state directory")
			}
		})
	}
}

// TestUntrustedConfigFile: a config file others can write is refused, naming its mode.
func TestUntrustedConfigFile(t *testing.T) {
	root := copyTree(t, "testdata/seeds/002")
	p := filepath.Join(root, "etc/nodedns/config.yaml")
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.WriteFile(p, []byte("upstreams: [10.9.9.9]\n"), 0o644))
	must(t, os.Chmod(p, 0o666))
	before := nodeState(t, root)
	r := nodedns(t, "--root", root, "apply")
	if r.code != 1 || !strings.Contains(r.stderr, "refusing config") || !strings.Contains(r.stderr, "writable by others (mode -rw-rw-rw- (0666)") {
		t.Errorf("apply with a world-writable config: exit %d\n%s", r.code, r.stderr)
	}
	if diff := cmp.Diff(before, nodeState(t, root)); diff != "" {
		t.Errorf("the node changed (-before +after):\n%s", diff)
	}
}

// TestLostBackups: with the backups gone, restore must not say "nothing to restore" while nodedns's
// files and header are still there: it exits 1 naming them; --forget then drops them knowingly.
func TestLostBackups(t *testing.T) {
	tests := []struct {
		seed string
		lost []string
	}{
		{"002", []string{"/etc/dhcp/dhclient-enter-hooks.d/nodedns", "/etc/resolv.conf", "/var/lib/nodedns/resolv.conf"}},
		{"001", []string{"/etc/netplan/90-nodedns.yaml", "/etc/systemd/resolved.conf.d/zz-nodedns.conf", "/var/lib/nodedns/dhcp-domains.json", "/var/lib/nodedns/resolv.conf"}},
	}
	for _, tt := range tests {
		t.Run(tt.seed, func(t *testing.T) {
			if _, err := exec.LookPath("netplan"); err != nil && tt.seed == "001" {
				t.Skip("netplan is not installed (apt-get install --no-install-recommends netplan.io)")
			}
			root := copyTree(t, filepath.Join("testdata/seeds", tt.seed))
			orig := nodeState(t, root)
			if ap := nodedns(t, "--root", root, "apply"); ap.code != 0 {
				t.Fatalf("apply: exit %d\n%s", ap.code, ap.stderr)
			}
			must(t, os.RemoveAll(filepath.Join(root, "var/lib/nodedns/backup")))

			rs := nodedns(t, "--root", root, "restore")
			if rs.code != 1 {
				t.Errorf("restore with lost backups: exit %d, want 1\n%s%s", rs.code, rs.stdout, rs.stderr)
			}
			want := fmt.Sprintf("no backup of %d file(s) nodedns changed, so their originals cannot be put back: %s", len(tt.lost), strings.Join(tt.lost, ", "))
			for _, w := range []string{want, "nodedns restore --forget", "packages' defaults"} {
				if !strings.Contains(rs.stderr, w) {
					t.Errorf("restore does not say %q:\n%s", w, rs.stderr)
				}
			}
			if strings.Contains(rs.stdout, "nothing to restore") {
				t.Errorf("restore says nothing to restore:\n%s", rs.stdout)
			}

			fg := nodedns(t, "--root", root, "restore", "--forget")
			if fg.code != 0 {
				t.Fatalf("restore --forget: exit %d\n%s%s", fg.code, fg.stdout, fg.stderr)
			}
			var left []string
			filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					if data, err := os.ReadFile(p); err == nil && strings.Contains(string(data), "by nodedns") {
						left = append(left, p)
					}
				}
				return nil
			})
			if len(left) > 0 {
				t.Errorf("files still carry nodedns's mark after --forget: %q\n%s", left, fg.stdout)
			}
			// The files nodedns created are gone (not the directories: without the backup nodedns
			// cannot tell which it made); what it edited keeps its edit, without the header.
			now := nodeState(t, root)
			var created []string
			for p, st := range now {
				if _, ok := orig[p]; !ok && !strings.HasPrefix(p, "/var/lib/nodedns") && !strings.HasPrefix(st, "dir ") {
					created = append(created, p)
				}
			}
			sort.Strings(created)
			if len(created) > 0 {
				t.Errorf("files nodedns created are still there after --forget: %q", created)
			}
			again := nodedns(t, "--root", root, "restore")
			if again.code != 0 || !strings.Contains(again.stdout, "nothing to restore") {
				t.Errorf("restore after --forget: exit %d\n%s%s", again.code, again.stdout, again.stderr)
			}
		})
	}
}

// TestRestoreOutputAndErrors: the restore of a manifest entry for a file nodedns does not manage
// names the path once, without "restore: restore:", and the host path never appears.
func TestRestoreOutputAndErrors(t *testing.T) {
	root := copyTree(t, "testdata/seeds/002")
	mkdirAt(t, root, "var/lib/nodedns/backup", 0o700)
	data, err := json.Marshal(map[string]any{"version": 1, "entries": []map[string]any{{"path": "/etc/passwd", "kind": "absent", "uid": 0, "gid": 0, "time": "2025-03-01T12:00:00Z"}}})
	must(t, err)
	must(t, os.WriteFile(filepath.Join(root, "var/lib/nodedns/backup/manifest.json"), data, 0o600))
	must(t, os.WriteFile(filepath.Join(root, "etc/passwd"), []byte("root:x:0:0::/root:/bin/sh\n"), 0o644))
	rs := nodedns(t, "--root", root, "restore")
	if rs.code != 1 || !strings.Contains(rs.stderr, "nodedns: restore /etc/passwd: not a file nodedns manages") {
		t.Errorf("restore: exit %d\n%s", rs.code, rs.stderr)
	}
	for _, bad := range []string{"restore: restore", root} {
		if strings.Contains(rs.stderr, bad) {
			t.Errorf("restore's error says %q:\n%s", bad, rs.stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "etc/passwd")); err != nil {
		t.Errorf("restore removed /etc/passwd: %v", err)
	}
}
