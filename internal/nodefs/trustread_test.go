package nodefs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestCheckTrusted (docs/contract.md "Kubelet's config"): a path a process names is read only when
// it and every directory on the way to it (symlinks followed, their targets' directories included)
// are root's or the running user's and writable by nobody else; the error says which one is not,
// and why.
func TestCheckTrusted(t *testing.T) {
	s := newTree(t)
	mkfile(t, s, "/etc/kubernetes/kubelet-config.yaml", "kind: KubeletConfiguration\n", 0o644)
	mkfile(t, s, "/srv/open/config.yaml", "x\n", 0o644)
	mkfile(t, s, "/srv/any.yaml", "x\n", 0o666)
	mkfile(t, s, "/srv/group.yaml", "x\n", 0o664)
	if err := os.Chmod(s.Host("/srv/open"), 0o1777); err != nil {
		t.Fatal(err)
	}
	mklink(t, s, "/etc/kubernetes/via-open.yaml", "/srv/open/config.yaml")
	mklink(t, s, "/etc/kubernetes/to-any.yaml", "../../srv/any.yaml")
	for _, tc := range []struct {
		p, want string
	}{
		{"/etc/kubernetes/kubelet-config.yaml", ""},
		{"/etc/kubernetes/missing.yaml", ""},
		{"/etc/kubernetes", ""},
		{"/srv/any.yaml", "refusing to read /srv/any.yaml: it is writable by others"},
		{"/srv/group.yaml", "refusing to read /srv/group.yaml: it is writable by its group"},
		{"/srv/open/config.yaml", "refusing to read /srv/open/config.yaml: the directory /srv/open on the way to it is writable by others (owner uid"},
		{"/srv/open", "refusing to read /srv/open: it is writable by others"},
		{"/etc/kubernetes/via-open.yaml", "refusing to read /etc/kubernetes/via-open.yaml: the directory /srv/open on the way to it is writable by others"},
		{"/etc/kubernetes/to-any.yaml", "refusing to read /etc/kubernetes/to-any.yaml: its target /srv/any.yaml is writable by others"},
	} {
		err := CheckTrusted(s, tc.p)
		var ue *UntrustedReadError
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.p, err)
		case tc.want != "" && (!errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v; want %q", tc.p, err, tc.want)
		}
	}
	if os.Geteuid() == 0 {
		// Another user's file (nobody's), in root's directory.
		mkfile(t, s, "/srv/nobody.yaml", "x\n", 0o644)
		if err := os.Chown(s.Host("/srv/nobody.yaml"), 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if err := CheckTrusted(s, "/srv/nobody.yaml"); err == nil || !strings.Contains(err.Error(), "it is owned by uid 65534") {
			t.Errorf("nobody's file: %v", err)
		}
	}
	// A reader that cannot say who owns a path reads nothing a process names.
	if err := CheckTrusted(readerOnly{s}, "/etc/kubernetes/kubelet-config.yaml"); err == nil {
		t.Error("a reader without the walk was trusted")
	}
}

// readerOnly hides every method of a Tree but the Reader's.
type readerOnly struct{ Reader }

// TestUnixModeBothWays: UnixMode and FileModeOf are each other's inverse over every chmod(2) mode
// (permissions, setuid, setgid, sticky), and UnixMode keeps only those bits of a FileMode.
func TestUnixModeBothWays(t *testing.T) {
	for u := uint32(0); u <= 0o7777; u++ {
		if got := UnixMode(FileModeOf(u)); got != u {
			t.Fatalf("UnixMode(FileModeOf(%04o)) = %04o", u, got)
		}
	}
	m := fs.ModeDir | fs.ModeSetuid | fs.ModeSticky | 0o750
	if got := UnixMode(m); got != syscall.S_ISUID|syscall.S_ISVTX|0o750 {
		t.Errorf("UnixMode(%v) = %04o, want 05750", m, got)
	}
	if got := FileModeOf(0o2644 | syscall.S_IFREG); got != fs.ModeSetgid|0o644 {
		t.Errorf("FileModeOf(0102644) = %v, want only setgid and 0644", got)
	}
}

// TestCheckState: one of nodedns's own records is believed only when it and every directory on the
// way are trusted state: not a symlink, root's (or the running user's), writable by nobody else.
func TestCheckState(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(t *testing.T, root string)
		want string // "" believed
	}{
		{"root's record", nil, ""},
		{"no record", func(t *testing.T, root string) { os.Remove(filepath.Join(root, "var/lib/nodedns/r.json")) }, ""},
		{"a symlink", func(t *testing.T, root string) {
			os.Remove(filepath.Join(root, "var/lib/nodedns/r.json"))
			if err := os.Symlink("/etc/passwd", filepath.Join(root, "var/lib/nodedns/r.json")); err != nil {
				t.Fatal(err)
			}
		}, "refusing untrusted state /var/lib/nodedns/r.json: it is a symlink"},
		{"writable by others", func(t *testing.T, root string) { os.Chmod(filepath.Join(root, "var/lib/nodedns/r.json"), 0o666) }, "it is writable by others"},
		{"its directory writable by its group", func(t *testing.T, root string) { os.Chmod(filepath.Join(root, "var/lib/nodedns"), 0o775) }, "refusing untrusted state /var/lib/nodedns: it is writable by its group"},
		{"another user's", func(t *testing.T, root string) {
			if err := os.Lchown(filepath.Join(root, "var/lib/nodedns/r.json"), 65534, 65534); err != nil {
				t.Skipf("cannot give the record away: %v", err)
			}
		}, "is owned by uid 65534"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if err := os.MkdirAll(filepath.Join(root, "var/lib/nodedns"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, "var/lib/nodedns/r.json"), []byte("{}\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if tc.mod != nil {
				tc.mod(t, root)
			}
			err := CheckState(NewReader(root), "/var/lib/nodedns/r.json")
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("CheckState = %v, want an error saying %q", err, tc.want)
			}
		})
	}
}
