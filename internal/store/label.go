package store

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"syscall"

	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/internal/store/manifest"
)

// SELinux labels (docs/contract.md, "SELinux labels"): RHEL, Rocky, Alma and Fedora run SELinux
// enforcing, and a file written through a temp file and rename(2) carries the temp file's label,
// which the kernel gave it from the directory's policy: /etc/resolv.conf replaced that way lost
// net_conf_t for etc_t, and NetworkManager was denied when it next wrote the file (tailscale met
// the same in net/dns/direct.go and runs restorecon after its rename since tailscale/tailscale
// PR #20167; NetworkManager's denials on an etc_t resolv.conf: cockpit-project/cockpit #4980,
// CentOS/sig-atomic-buildscripts #195). So every file nodedns writes in place of an existing one gets that
// file's label on its temp file (fsetxattr) before the rename: no moment with the wrong label, no
// restorecon to run, and a label an administrator chose (semanage fcontext, chcon) stays. The
// backup records the label, and restore sets the recorded one. A file nodedns creates is left to the
// kernel: it labels a new file from policy (the directory's type transition), which is what
// restorecon would give it and nodedns cannot compute. Only security.selinux is kept: SMACK's and
// IMA's attributes (security.SMACK64, security.ima) belong to other LSMs that no distribution
// nodedns ships for enables by default, and IMA's signature must not be copied onto new bytes.

// selinuxXattr is the extended attribute SELinux keeps a file's label in.
const selinuxXattr = "security.selinux"

// selinuxEnabled reports whether this kernel runs SELinux: it registers the selinuxfs filesystem
// only then (init_sel_fs, security/selinux/selinuxfs.c), and libselinux asks /proc/filesystems the
// same question (selinuxfs_exists, libselinux/src/init.c). Tests replace it.
var selinuxEnabled = sync.OnceValue(func() bool {
	data, err := nodefs.ReadKernel("/proc/filesystems", nodefs.Proc)
	return err == nil && bytes.Contains(data, []byte("\tselinuxfs\n"))
})

// fileLabel returns the SELinux label of an open file: nil when it has none (ENODATA) or its
// filesystem keeps none (ENOTSUP).
func fileLabel(f nodefs.File) ([]byte, error) {
	label, err := f.Getxattr(selinuxXattr)
	if errors.Is(err, syscall.ENODATA) || errors.Is(err, syscall.ENOTSUP) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return label, nil
}

// labelOf returns the SELinux label of the regular file at a host path (opened without following
// a final symlink, confined under --root): nil when nothing is there, it has no label, or it is no
// regular file (a symlink, or a FIFO or device restore is to replace, which is never opened: its
// driver would see the open).
func (s *Store) labelOf(hp string) ([]byte, error) {
	fi, err := s.fsys().Lstat(hp)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, nil
	}
	f, err := s.tree().OpenHost(hp, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ELOOP) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, err // swapped since the lstat
	}
	return fileLabel(f)
}

// setLabel gives the open file f the SELinux label label. A filesystem that keeps no labels
// (ENOTSUP) has nothing to keep. A kernel without SELinux asks CAP_SYS_ADMIN for any security.*
// attribute (cap_inode_setxattr, security/commoncap.c), which nodedns.service does not grant; a
// label there means nothing to the kernel, and the file is written without it, as before labels
// were kept. Under SELinux a label that cannot be set (the policy denies the relabel, or no longer
// knows the label) is an error: the write stops before its rename, and the file keeps its old
// bytes and label.
func setLabel(f nodefs.File, label []byte) error {
	err := f.Setxattr(selinuxXattr, label)
	switch {
	case err == nil, errors.Is(err, syscall.ENOTSUP):
		return nil
	case errors.Is(err, fs.ErrPermission) && !selinuxEnabled():
		return nil
	}
	return fmt.Errorf("set the SELinux label %s (restorecon sets the policy's): %w", bytes.TrimSuffix(label, []byte{0}), nodefs.UnwrapPath(err))
}

// captureLabel is the label a backup of the regular file at host path hp records: "" when it has
// none. A value that is no SELinux context cannot be recorded exactly, and is refused.
func (s *Store) captureLabel(hp string) (string, error) {
	label, err := s.labelOf(hp)
	if err != nil || label == nil {
		return "", err
	}
	if err := manifest.CheckLabel(string(label)); err != nil {
		return "", err
	}
	return string(label), nil
}

// sameLabel reports whether the file at host path hp has the label a backup recorded; a backup
// that recorded none asks for nothing.
func (s *Store) sameLabel(hp, label string) bool {
	if label == "" {
		return true
	}
	cur, err := s.labelOf(hp)
	return err == nil && string(cur) == label
}

// recorded is a backup's label as replace takes it: nil (keep the label of the file replaced) when
// none was recorded.
func recorded(label string) []byte {
	if label == "" {
		return nil
	}
	return []byte(label)
}
