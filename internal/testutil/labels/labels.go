// Package labels sets and reads SELinux labels in tests. A kernel without SELinux still stores the
// security.selinux extended attribute root sets on ext4 and tmpfs (measured on 6.18: both keep it
// and give it back as written), so the store's and the command's tests prove labels are kept
// across writes, backups and restores without an SELinux machine.
package labels

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// Xattr is the extended attribute SELinux keeps a file's label in.
const Xattr = "security.selinux"

// Need skips the test unless files in dir keep a security.selinux attribute set here: root (a
// kernel without SELinux asks CAP_SYS_ADMIN for any security.* attribute) on a filesystem that
// stores it.
func Need(t testing.TB, dir string) {
	t.Helper()
	probe := filepath.Join(dir, ".label-probe")
	if err := os.WriteFile(probe, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(probe)
	const want = "system_u:object_r:etc_t:s0"
	err := unix.Lsetxattr(probe, Xattr, []byte(want), 0)
	if err == nil {
		var got string
		if got, err = get(probe); err == nil && got != want {
			err = errors.New("the value read back differs")
		}
	}
	if err != nil {
		var st unix.Statfs_t
		_ = unix.Statfs(dir, &st)
		t.Skipf("%s (filesystem magic %#x, euid %d) keeps no %s attribute: %v; labels are tested where the kernel stores them (ext4 or tmpfs, as root)", dir, st.Type, os.Geteuid(), Xattr, err)
	}
}

// Set gives path the label, without following a final symlink.
func Set(t testing.TB, path, label string) {
	t.Helper()
	if err := unix.Lsetxattr(path, Xattr, []byte(label), 0); err != nil {
		t.Fatalf("set the label of %s: %v", path, err)
	}
}

// Get returns the label of path (not following a final symlink); ok is false when it has none.
func Get(t testing.TB, path string) (label string, ok bool) {
	t.Helper()
	label, err := get(path)
	if errors.Is(err, unix.ENODATA) {
		return "", false
	}
	if err != nil {
		t.Fatalf("read the label of %s: %v", path, err)
	}
	return label, true
}

// get reads the label into a buffer of XATTR_SIZE_MAX, the most one attribute can hold.
func get(path string) (string, error) {
	buf := make([]byte, 64<<10)
	n, err := unix.Lgetxattr(path, Xattr, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}
