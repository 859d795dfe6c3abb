package store

import (
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/internal/testutil/faultfs"
	"github.com/nodedns/nodedns/internal/testutil/labels"
)

// Labels as the kernel hands them out under SELinux: the context and a NUL.
const (
	netConf = "system_u:object_r:net_conf_t:s0\x00"
	etcT    = "system_u:object_r:etc_t:s0\x00"
)

// labelStore is newStore on a root whose filesystem keeps security.selinux (skipped otherwise),
// through the real FS (confined: every open by openat2 from the root) or through the FS seam
// (faultfs failing nothing: the path-based opens of an unconfined store, on *os.File).
func labelStore(t *testing.T, seam bool) *Store {
	t.Helper()
	s := newStore(t)
	labels.Need(t, s.Root)
	if seam {
		s.FS = faultfs.FS{FS: nodefs.OS()}
	}
	return s
}

func labelOfNode(t *testing.T, s *Store, node string) string {
	t.Helper()
	l, ok := labels.Get(t, s.host(node))
	if !ok {
		return "(none)"
	}
	return l
}

// withSELinux makes the store judge a failed relabel as on a kernel with SELinux (on) or without.
func withSELinux(t *testing.T, on bool) {
	t.Helper()
	old := selinuxEnabled
	selinuxEnabled = func() bool { return on }
	t.Cleanup(func() { selinuxEnabled = old })
}

// TestWriteKeepsLabel: a file nodedns replaces through a temp file and rename keeps its label (the
// temp file would carry its own), a file written through a symlink keeps the target's, a new file
// gets none from nodedns (the kernel's default, none without SELinux), and restore gives every
// original label back, also to a file relabelled since (as chcon would) whose bytes are already
// the original ones.
func TestWriteKeepsLabel(t *testing.T) {
	for _, seam := range []bool{false, true} {
		name := "confined"
		if seam {
			name = "through the FS seam"
		}
		t.Run(name, func(t *testing.T) {
			s := labelStore(t, seam)
			mkfile(t, s, "/etc/resolv.conf", "nameserver 169.254.25.10\n", 0o644)
			labels.Set(t, s.host("/etc/resolv.conf"), netConf)
			mkfile(t, s, "/data/nm.conf", "[main]\n", 0o600)
			labels.Set(t, s.host("/data/nm.conf"), etcT)
			mklink(t, s, "/etc/NetworkManager/conf.d/zz.conf", "/data/nm.conf")
			mkfile(t, s, "/etc/unlabelled.conf", "a\n", 0o644)
			ino := inode(t, s, "/etc/resolv.conf")

			for p, data := range map[string]string{
				"/etc/resolv.conf":                   "nameserver 10.0.0.2\n",
				"/etc/NetworkManager/conf.d/zz.conf": "[global-dns]\n",
				"/etc/unlabelled.conf":               "b\n",
				"/etc/netplan/90-nodedns.yaml":       "network: {}\n",
			} {
				if _, err := s.Write(p, []byte(data), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if inode(t, s, "/etc/resolv.conf") == ino {
				t.Fatal("/etc/resolv.conf was rewritten in place: the rename this test is about did not happen")
			}
			want := map[string]string{
				"/etc/resolv.conf":             netConf,
				"/data/nm.conf":                etcT,
				"/etc/unlabelled.conf":         "(none)",
				"/etc/netplan/90-nodedns.yaml": "(none)",
			}
			for p, w := range want {
				if got := labelOfNode(t, s, p); got != w {
					t.Errorf("label of %s after Write = %q, want %q", p, got, w)
				}
			}
			backups, err := s.Backups()
			if err != nil {
				t.Fatal(err)
			}
			recordedLabels := map[string]string{}
			for _, e := range backups {
				recordedLabels[e.Path] = e.Label
			}
			for p, w := range map[string]string{"/etc/resolv.conf": netConf, "/data/nm.conf": etcT, "/etc/unlabelled.conf": ""} {
				if recordedLabels[p] != w {
					t.Errorf("backup of %s records label %q, want %q", p, recordedLabels[p], w)
				}
			}

			// Someone relabels the files (the new one as the kernel would have labelled it);
			// nm.conf even gets its original bytes back by hand.
			labels.Set(t, s.host("/etc/resolv.conf"), etcT)
			labels.Set(t, s.host("/data/nm.conf"), netConf)
			mkfile(t, s, "/data/nm.conf", "[main]\n", 0o600)
			labels.Set(t, s.host("/etc/netplan/90-nodedns.yaml"), etcT)
			if _, err := s.Restore(nil); err != nil {
				t.Fatal(err)
			}
			for p, w := range map[string]string{"/etc/resolv.conf": netConf, "/data/nm.conf": etcT, "/etc/unlabelled.conf": "(none)"} {
				if got := labelOfNode(t, s, p); got != w {
					t.Errorf("label of %s after Restore = %q, want %q", p, got, w)
				}
			}
			if got := readNode(t, s, "/etc/resolv.conf"); got != "nameserver 169.254.25.10\n" {
				t.Errorf("restored /etc/resolv.conf = %q", got)
			}
			if st := stateOf(t, s, "/etc/netplan/90-nodedns.yaml"); st.Kind != KindAbsent {
				t.Errorf("the file nodedns created is still there after Restore: %+v", st)
			}
			assertNoTemps(t, s)
		})
	}
}

// TestLongLabelRead: a label longer than the first buffer (fgetxattr says ERANGE) is read whole,
// kept on the file written and recorded in the backup.
func TestLongLabelRead(t *testing.T) {
	s := labelStore(t, false)
	var cats []string
	for i := range 200 {
		cats = append(cats, "c"+strings.Repeat("1", i%4+1))
	}
	long := "system_u:object_r:net_conf_t:s0:" + strings.Join(cats, ",") + "\x00"
	if len(long) < 512 {
		t.Fatalf("label of %d bytes does not outgrow the first buffer", len(long))
	}
	mkfile(t, s, "/etc/resolv.conf", "nameserver 169.254.25.10\n", 0o644)
	labels.Set(t, s.host("/etc/resolv.conf"), long)
	if _, err := s.Write("/etc/resolv.conf", []byte("nameserver 10.0.0.2\n"), 0); err != nil {
		t.Fatal(err)
	}
	if got := labelOfNode(t, s, "/etc/resolv.conf"); got != long {
		t.Errorf("label after Write = %q, want the %d-byte original", got, len(long))
	}
	backups, err := s.Backups()
	if err != nil {
		t.Fatal(err)
	}
	if len(backups) != 1 || backups[0].Label != long {
		t.Errorf("backups = %+v, want the %d-byte label recorded", backups, len(long))
	}
}

// TestLabelFaults: a filesystem that keeps no labels (ENOTSUP) and a kernel without SELinux that
// refuses a security.* attribute to a process without CAP_SYS_ADMIN (EPERM, as under
// nodedns.service) change nothing about the write; under SELinux a refused relabel fails the
// write before its rename, leaving the file with its bytes and label and no temp file.
func TestLabelFaults(t *testing.T) {
	const orig, data = "nameserver 169.254.25.10\n", "nameserver 10.0.0.2\n"
	tests := []struct {
		name      string
		op        string
		errno     syscall.Errno
		selinux   bool
		wantErr   string
		wantLabel string // after the write
	}{
		{name: "getxattr ENOTSUP: no label to keep", op: "getxattr", errno: syscall.ENOTSUP, wantLabel: "(none)"},
		{name: "setxattr ENOTSUP: no label kept", op: "setxattr", errno: syscall.ENOTSUP, wantLabel: "(none)"},
		{name: "setxattr EPERM without SELinux: written without it", op: "setxattr", errno: syscall.EPERM, wantLabel: "(none)"},
		{name: "setxattr EACCES under SELinux: refused", op: "setxattr", errno: syscall.EACCES, selinux: true, wantErr: "write /etc/resolv.conf: set the SELinux label system_u:object_r:net_conf_t:s0 (restorecon sets the policy's): permission denied", wantLabel: netConf},
		{name: "setxattr EINVAL under SELinux: refused", op: "setxattr", errno: syscall.EINVAL, selinux: true, wantErr: "invalid argument", wantLabel: netConf},
		{name: "getxattr EIO: refused", op: "getxattr", errno: syscall.EIO, wantErr: "write /etc/resolv.conf: read the SELinux label", wantLabel: netConf},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			withSELinux(t, tt.selinux)
			s := labelStore(t, false)
			mkfile(t, s, "/etc/resolv.conf", orig, 0o644)
			labels.Set(t, s.host("/etc/resolv.conf"), netConf)
			if err := s.Backup("/etc/resolv.conf"); err != nil {
				t.Fatal(err)
			}
			fails := 0
			s.FS = faultfs.FS{FS: nodefs.OS(), Fail: func(op, name string) syscall.Errno {
				if op == tt.op && strings.HasPrefix(name, s.host("/etc/")) {
					fails++
					return tt.errno
				}
				return 0
			}}
			_, err := s.Write("/etc/resolv.conf", []byte(data), 0)
			s.FS = nil
			if fails == 0 {
				t.Fatalf("no %s was made on /etc/resolv.conf or its temp file", tt.op)
			}
			want := data
			if tt.wantErr != "" {
				want = orig
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("Write error = %v, want one line with %q", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatalf("Write: %v", err)
			}
			if got := readNode(t, s, "/etc/resolv.conf"); got != want {
				t.Errorf("content = %q, want %q", got, want)
			}
			if got := labelOfNode(t, s, "/etc/resolv.conf"); got != tt.wantLabel {
				t.Errorf("label = %q, want %q", got, tt.wantLabel)
			}
			assertNoTemps(t, s)
		})
	}
}

// TestRestoreLabelInPlace: a restore that cannot rename (the file is a bind mount: EBUSY) rewrites
// the file in place and sets the recorded label on it.
func TestRestoreLabelInPlace(t *testing.T) {
	s := labelStore(t, false)
	mkfile(t, s, "/etc/resolv.conf", "nameserver 169.254.25.10\n", 0o644)
	labels.Set(t, s.host("/etc/resolv.conf"), netConf)
	if _, err := s.Write("/etc/resolv.conf", []byte("nameserver 10.0.0.2\n"), 0); err != nil {
		t.Fatal(err)
	}
	labels.Set(t, s.host("/etc/resolv.conf"), etcT)
	ino := inode(t, s, "/etc/resolv.conf")
	s.FS = faultfs.FS{FS: nodefs.OS(), Fail: func(op, name string) syscall.Errno {
		if op == "rename" && name == s.host("/etc/resolv.conf") {
			return syscall.EBUSY
		}
		return 0
	}}
	if _, err := s.Restore(nil); err != nil {
		t.Fatal(err)
	}
	s.FS = nil
	if inode(t, s, "/etc/resolv.conf") != ino {
		t.Fatal("restore renamed over the file: the in-place path this test is about did not run")
	}
	if got := labelOfNode(t, s, "/etc/resolv.conf"); got != netConf {
		t.Errorf("label after an in-place restore = %q, want %q", got, netConf)
	}
	if got := readNode(t, s, "/etc/resolv.conf"); got != "nameserver 169.254.25.10\n" {
		t.Errorf("content = %q", got)
	}
}

// TestRestoreWithoutRecordedLabel: a manifest written before labels were kept (no "label") still
// restores, and the file keeps the label it has; a label that is no SELinux context cannot be
// recorded exactly, so the backup, and the write with it, is refused.
func TestRestoreWithoutRecordedLabel(t *testing.T) {
	s := labelStore(t, false)
	mkfile(t, s, "/etc/resolv.conf", "nameserver 169.254.25.10\n", 0o644)
	labels.Set(t, s.host("/etc/resolv.conf"), netConf)
	if _, err := s.Write("/etc/resolv.conf", []byte("nameserver 10.0.0.2\n"), 0); err != nil {
		t.Fatal(err)
	}
	mp := s.host("/var/lib/nodedns/backup/manifest.json")
	data, err := os.ReadFile(mp)
	if err != nil {
		t.Fatal(err)
	}
	old := strings.Replace(string(data), `"label": "system_u:object_r:net_conf_t:s0\u0000",`, "", 1)
	if old == string(data) {
		t.Fatalf("manifest records no label:\n%s", data)
	}
	if err := os.WriteFile(mp, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	labels.Set(t, s.host("/etc/resolv.conf"), etcT)
	if _, err := s.Restore(nil); err != nil {
		t.Fatal(err)
	}
	if got := readNode(t, s, "/etc/resolv.conf"); got != "nameserver 169.254.25.10\n" {
		t.Errorf("content = %q", got)
	}
	if got := labelOfNode(t, s, "/etc/resolv.conf"); got != etcT {
		t.Errorf("label = %q, want the file's own %q (the manifest recorded none)", got, etcT)
	}

	mkfile(t, s, "/etc/hosts.conf", "x\n", 0o644)
	labels.Set(t, s.host("/etc/hosts.conf"), "\xff\xfe not a context")
	_, err = s.Write("/etc/hosts.conf", []byte("y\n"), 0)
	if err == nil || !strings.Contains(err.Error(), "is not a context") {
		t.Fatalf("Write over a file with a garbage label: %v, want the label refused", err)
	}
	if readNode(t, s, "/etc/hosts.conf") != "x\n" {
		t.Errorf("the file changed although its backup was refused")
	}
}
