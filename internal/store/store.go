// Package store is the only code that changes a node's files. It writes atomically (temp file in
// the same directory, fsync, rename, fsync the directory), never replaces a symlink with a file,
// falls back to an in-place rewrite where rename cannot work (a bind-mounted /etc/resolv.conf), backs
// every path up once before its first change, and restores exactly what it backed up (docs/contract.md,
// invariants 3, 4 and 5). Reading is internal/nodefs's; a *Store is a nodefs.Reader too.
//
// Every path given to a Store is a node path ("/etc/resolv.conf") resolved under Store.Root, the way
// `netplan --root-dir` does, so tests and `nodedns --root DIR` work on a fake node.
package store

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nodedns/nodedns/internal/nodefs"
	"golang.org/x/sys/unix"
)

// DefaultStateDir is the node path of nodedns's state directory (docs/contract.md, "Where things live").
const DefaultStateDir = nodefs.DefaultStateDir

// maxBackupSize bounds the bytes kept for one backed-up file. The files nodedns manages are a few
// KiB; anything near this is not a resolver config and is refused rather than copied.
const maxBackupSize = 16 << 20

// backupKind bounds a file nodedns backs up, rewrites in place or restores; manifestKind its
// manifest (a JSON list of a few entries per managed file).
var (
	backupKind   = nodefs.Kind{Name: "managed file", Max: maxBackupSize}
	manifestKind = nodefs.Kind{Name: "backup manifest", Max: 1 << 20}
)

// keepModeBits are the mode bits a backup records: permissions plus setuid, setgid and sticky (what
// chmod(2) can set).
const keepModeBits = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// specialBits are the mode bits nodedns never sets on a file it writes or restores: no managed file
// is a program, and a setuid bit is what a planted manifest entry would be after.
const specialBits = fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// Store manages the files nodedns writes on a node whose filesystem starts at Root ("/" normally,
// a test or --root directory otherwise). All paths given to Store methods are NODE paths
// ("/etc/resolv.conf"), always resolved under Root. A Store must not be copied after first use.
type Store struct {
	// Root is the host directory the node's "/" is at; "" or "/" means the real system.
	Root string
	// FS is the filesystem; nil means nodefs.OS().
	FS nodefs.FS
	// StateDir is a node path, default DefaultStateDir; backups live in StateDir/backup.
	StateDir string
	// Targets are the paths Restore may change; nil means DefaultTargets(StateDir).
	Targets *Targets

	// now stamps backup entries; nil means time.Now (tests pin it).
	now func() time.Time
}

// WriteResult says what Write did.
type WriteResult struct {
	// Path is the node path actually written: the final target when the given path is a symlink.
	Path string
	// InPlace is set when rename was impossible (EBUSY or EXDEV: the file is a bind mount, as
	// Docker and Kubernetes do with /etc/resolv.conf) and the file was rewritten in place.
	InPlace bool
	// Created is set when the file did not exist before.
	Created bool
	// Unchanged is set when the file already held exactly these bytes: nothing was written or
	// backed up.
	Unchanged bool
}

func (s *Store) fsys() nodefs.FS {
	if s.FS == nil {
		return nodefs.OS()
	}
	return s.FS
}

// tree is the read side of the same node.
func (s *Store) tree() *nodefs.Tree { return &nodefs.Tree{Root: s.Root, FS: s.fsys()} }

func (s *Store) host(node string) string { return s.tree().Host(node) }

func (s *Store) resolve(p string, followLast bool) (string, error) {
	return s.tree().Resolve(p, followLast)
}

func (s *Store) lstatNode(p string) (node, hostPath string, fi fs.FileInfo, err error) {
	return s.tree().LstatNode(p)
}

func (s *Store) nodeErr(err error) error { return s.tree().NodeErr(err) }

// ReadFile implements nodefs.Reader.
func (s *Store) ReadFile(p string, k nodefs.Kind) ([]byte, error) { return s.tree().ReadFile(p, k) }

// ReadFileInfo implements nodefs.InfoReader.
func (s *Store) ReadFileInfo(p string, k nodefs.Kind) ([]byte, fs.FileInfo, error) {
	return s.tree().ReadFileInfo(p, k)
}

// ReadDir implements nodefs.Reader.
func (s *Store) ReadDir(p string) ([]fs.DirEntry, error) { return s.tree().ReadDir(p) }

// Stat implements nodefs.Reader.
func (s *Store) Stat(p string) (fs.FileInfo, error) { return s.tree().Stat(p) }

// Lstat implements nodefs.Reader.
func (s *Store) Lstat(p string) (fs.FileInfo, error) { return s.tree().Lstat(p) }

// Readlink implements nodefs.Reader.
func (s *Store) Readlink(p string) (string, error) { return s.tree().Readlink(p) }

// ResolveVisitInfo implements nodefs.Walker (nodefs.CheckTrusted of a path a process names).
func (s *Store) ResolveVisitInfo(p string, followLast bool, visit func(dir string, fi fs.FileInfo) error) (string, fs.FileInfo, error) {
	return s.tree().ResolveVisitInfo(p, followLast, visit)
}

// ResolveLink implements nodefs.Reader.
func (s *Store) ResolveLink(p string) (string, error) { return s.tree().ResolveLink(p) }

func (s *Store) stateDir() string {
	if s.StateDir == "" {
		return DefaultStateDir
	}
	return path.Clean(s.StateDir)
}

func (s *Store) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

// Write replaces the content of the file at a node path atomically: temp file in the same directory,
// write, fsync, keep the permission bits and uid/gid of the file it replaces (or mode for a new file;
// 0 means 0644), rename, fsync the directory. setuid, setgid and sticky bits are never set. If path
// is a symlink, the final target is written and the symlink stays (a symlinked /etc/resolv.conf is
// never replaced by a file). Before the first change to a path, Write backs it up (see Backup); a
// symlinked path is backed up as a symlink too, and the directories a new file needs are recorded
// before they are created, so restore removes them again. The state lock is held from the backup to
// the rename: a restore never runs in between. If the rename fails with EBUSY or EXDEV (the file is
// a bind mount), Write falls back to rewriting it in place and says so in the result (not atomic: a
// reader may see new bytes followed by the old tail for a moment, but never an empty file; a failed
// in-place write puts the original bytes back). On any error the original is untouched and no temp
// file is left behind; the one exception is an error fsyncing the directory after the rename, when
// the new content is already in place. Empty data is an error: readers must never see an empty file
// (glibc and musl then fall back to a nameserver on 127.0.0.1).
func (s *Store) Write(p string, data []byte, mode fs.FileMode) (WriteResult, error) {
	p, err := nodefs.NodePath(p)
	if err != nil {
		return WriteResult{}, fmt.Errorf("write %s: %w", p, err)
	}
	if len(data) == 0 {
		return WriteResult{}, fmt.Errorf("write %s: refusing to write empty content", p)
	}
	dir, unlock, err := s.lock()
	if err != nil {
		return WriteResult{}, fmt.Errorf("write %s: %w", p, err)
	}
	defer unlock()
	final, fi, err := s.resolveForWriteInfo(p)
	if err != nil {
		return WriteResult{}, fmt.Errorf("write %s: %w", p, err)
	}
	name := p
	if final != p {
		name = p + " (-> " + final + ")"
	}
	res := WriteResult{Path: final}
	hp := s.host(final)
	uid, gid := -1, -1
	if fi == nil {
		// Missing when the walk passed (or made just now): look again, it is what Write acts on.
		fi, err = s.fsys().Lstat(hp)
	}
	switch {
	case err == nil:
		if !fi.Mode().IsRegular() {
			return WriteResult{}, fmt.Errorf("write %s: not a regular file but a %s", name, nodefs.FileType(fi.Mode()))
		}
		if fi.Size() == int64(len(data)) {
			if cur, err := s.tree().ReadHostNoFollow(hp, backupKind.WithMax(int64(len(data)))); err == nil && bytes.Equal(cur, data) {
				res.Unchanged = true
				return res, nil
			}
		}
		mode = fi.Mode().Perm()
		uid, gid = nodefs.Owner(fi)
	case errors.Is(err, fs.ErrNotExist):
		res.Created = true
		if mode == 0 {
			mode = 0o644
		}
		mode = mode.Perm()
	default:
		return WriteResult{}, fmt.Errorf("write %s: %w", name, s.nodeErr(err))
	}

	var newDirs []string
	if res.Created {
		if newDirs, err = s.missingDirs(path.Dir(final)); err != nil {
			return WriteResult{}, fmt.Errorf("write %s: %w", name, err)
		}
	}
	backups := []string{final}
	if final != p {
		// Back up the link itself too, so restore can put it back if something replaces it.
		if _, _, lfi, err := s.lstatNode(p); err == nil && lfi != nil && lfi.Mode()&fs.ModeSymlink != 0 {
			backups = []string{p, final}
		}
	}
	if err := s.backupLocked(dir, newDirs, backups...); err != nil {
		return WriteResult{}, fmt.Errorf("write %s: %w", name, err)
	}
	if err := s.mkdirs(newDirs, 0o755); err != nil {
		return WriteResult{}, fmt.Errorf("write %s: %w", name, err)
	}
	err = s.replace(hp, data, mode, uid, gid, nil)
	if isBindMount(err) && !res.Created {
		if err := s.writeInPlace(hp, data); err != nil {
			return WriteResult{}, fmt.Errorf("write %s in place (rename impossible, a bind mount?): %w", name, s.nodeErr(err))
		}
		res.InPlace = true
		return res, nil
	}
	if err != nil {
		return WriteResult{}, fmt.Errorf("write %s: %w", name, s.nodeErr(err))
	}
	return res, nil
}

// Remove deletes a file nodedns created (backing up first like Write). A symlink at path is removed
// itself, not its target. Missing is fine; a directory is refused.
func (s *Store) Remove(p string) error {
	p, err := nodefs.NodePath(p)
	if err != nil {
		return fmt.Errorf("remove %s: %w", p, err)
	}
	_, hp, fi, err := s.lstatForWrite(p)
	if err != nil {
		return fmt.Errorf("remove %s: %w", p, err)
	}
	if fi == nil {
		return nil
	}
	if fi.IsDir() {
		return fmt.Errorf("remove %s: is a directory", p)
	}
	dir, unlock, err := s.lock()
	if err != nil {
		return fmt.Errorf("remove %s: %w", p, err)
	}
	defer unlock()
	if err := s.backupLocked(dir, nil, p); err != nil {
		return fmt.Errorf("remove %s: %w", p, err)
	}
	fsys := s.fsys()
	if err := s.remove(hp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", p, s.nodeErr(err))
	}
	if err := syncDir(fsys, filepath.Dir(hp)); err != nil {
		return fmt.Errorf("remove %s: %w", p, s.nodeErr(err))
	}
	return nil
}

// renameError marks the rename step of replace, so Write can tell a bind mount (rename fails with
// EBUSY or EXDEV) from a failure anywhere else.
type renameError struct{ err error }

func (e *renameError) Error() string { return e.err.Error() }
func (e *renameError) Unwrap() error { return e.err }

// isBindMount reports whether err is replace's rename failing the way it does on a file that is a
// mount point: rename(2) onto a mount point is EBUSY; across mounts it is EXDEV.
func isBindMount(err error) bool {
	var re *renameError
	return errors.As(err, &re) && (errors.Is(re.err, syscall.EBUSY) || errors.Is(re.err, syscall.EXDEV))
}

// replace writes data to a temp file next to hostPath, sets its SELinux label, mode and (uid, gid
// >= 0) owner, fsyncs it, renames it over hostPath and fsyncs the directory. Until the rename the
// target is untouched, and any failure before it removes the temp file. The label is label, or with
// nil the label of the file replaced (none for a new file: the kernel's, from policy); see label.go.
func (s *Store) replace(hostPath string, data []byte, mode fs.FileMode, uid, gid int, label []byte) (err error) {
	dir, base := filepath.Split(hostPath)
	dir = filepath.Clean(dir)
	if label == nil {
		if label, err = s.labelOf(hostPath); err != nil {
			return fmt.Errorf("read the SELinux label: %w", err)
		}
	}
	// A leading dot and a .tmp suffix keep a temp file left by a crash out of every directory
	// scan that matters: netplan reads *.yaml, resolved *.conf, dhclient-script runs
	// `run-parts --list` (names with dots are skipped) on its hook directories.
	f, err := s.createTemp(dir, "."+base+".nodedns-*.tmp")
	if err != nil {
		return fmt.Errorf("create temp file: %w", err)
	}
	tmp := f.Name()
	closed := false
	defer func() {
		if err != nil {
			if !closed {
				f.Close()
			}
			s.remove(tmp)
		}
	}()
	// The label first: once the file belongs to another user, SELinux asks CAP_FOWNER for a relabel
	// too (selinux_inode_setxattr: inode_owner_or_capable).
	if label != nil {
		if err := setLabel(f, label); err != nil {
			return err
		}
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	// Mode first, owner second: once the file belongs to another user, chmod(2) needs CAP_FOWNER,
	// which the unit does not grant. (The other order mattered only for setuid and setgid bits, which
	// chown(2) clears and nodedns never sets.)
	// On the open file (fchmod, fchown), never by path: another name renamed over the temp file's
	// would otherwise get the mode.
	if err := f.Chmod(mode &^ specialBits); err != nil {
		return err
	}
	if uid >= 0 && gid >= 0 {
		// Only chown when needed: a non-root caller (a test) can create files but not give them away.
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		if tu, tg := nodefs.Owner(fi); tu != uid || tg != gid {
			if err := f.Chown(uid, gid); err != nil {
				return err
			}
		}
	}
	if err := f.Sync(); err != nil {
		return err
	}
	closed = true
	if err := f.Close(); err != nil {
		return err
	}
	return s.renameSync(tmp, hostPath)
}

// renameSync renames the temp file oldpath over newpath (both in one host directory) and fsyncs the
// directory. Under --root one descriptor of the directory, opened confined to the root, serves both
// (renameat, then fsync): a directory swapped for a symlink that leaves the root between the temp
// file's creation and the rename cannot move the rename outside. A failing rename is a
// *renameError; once it is done the new content is in place, and a failing directory fsync only
// means the rename may not survive a crash, which the caller still hears about.
func (s *Store) renameSync(oldpath, newpath string) error {
	dir := filepath.Dir(newpath)
	if !s.tree().Confined() || filepath.Dir(oldpath) != dir {
		if err := s.rename(oldpath, newpath); err != nil {
			return &renameError{err}
		}
		if err := syncDir(s.fsys(), dir); err != nil {
			return fmt.Errorf("file replaced, but %w", err)
		}
		return nil
	}
	d, err := nodefs.OpenInRootFd(s.Root, dir, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return &renameError{err}
	}
	if err := unix.Renameat(d, filepath.Base(oldpath), d, filepath.Base(newpath)); err != nil {
		unix.Close(d)
		return &renameError{&os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}}
	}
	if err := nodefs.SyncClose(d, dir); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOTSUP) {
		return fmt.Errorf("file replaced, but sync directory: %w", err)
	}
	return nil
}

// writeInPlace rewrites a file that cannot be renamed over (a bind mount). The new bytes go over the
// old ones before the file is cut to size, so a reader never sees an empty file; if anything fails,
// the original bytes are written back.
func (s *Store) writeInPlace(hostPath string, data []byte) error {
	orig, err := s.tree().ReadHostNoFollow(hostPath, backupKind)
	if err != nil {
		return err
	}
	f, err := s.tree().OpenHost(hostPath, os.O_WRONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	if err := overwrite(f, data); err != nil {
		rerr := overwrite(f, orig)
		f.Close()
		if rerr != nil {
			return fmt.Errorf("%w; putting the original back also failed: %v", err, rerr)
		}
		return fmt.Errorf("%w (original content put back)", err)
	}
	return f.Close()
}

func overwrite(f nodefs.File, data []byte) error {
	if _, err := f.WriteAt(data, 0); err != nil {
		return err
	}
	if err := f.Truncate(int64(len(data))); err != nil {
		return err
	}
	return f.Sync()
}

// syncDir fsyncs a directory so a rename or removal in it is durable. Filesystems that cannot fsync
// a directory (EINVAL, ENOTSUP: some FUSE and network filesystems) are accepted as they are.
func syncDir(fsys nodefs.FS, dir string) error {
	err := fsys.SyncDir(dir)
	if err == nil || errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOTSUP) {
		return nil
	}
	return fmt.Errorf("sync directory: %w", err)
}

// createTemp creates a new temp file in the host directory dir (mode 0600, O_EXCL: never through a
// name that exists, a symlink included). Under --root it is created confined to the root, so a
// directory swapped for a symlink that leaves the root cannot take it outside.
func (s *Store) createTemp(dir, pattern string) (nodefs.File, error) {
	t := s.tree()
	if !t.Confined() {
		return s.fsys().CreateTemp(dir, pattern)
	}
	prefix, suffix, _ := strings.Cut(pattern, "*")
	for try := 0; ; try++ {
		name := filepath.Join(dir, prefix+strconv.FormatUint(uint64(rand.Uint32()), 10)+suffix)
		f, err := t.OpenHost(name, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
		if err == nil || !errors.Is(err, fs.ErrExist) || try >= 100 {
			return f, err
		}
	}
}

// rename renames oldpath over newpath, both in one host directory. Under --root the rename is made
// relative to that directory opened confined to the root (renameat), so a directory swapped for a
// symlink that leaves the root between the temp file's creation and the rename cannot move the
// rename outside.
func (s *Store) rename(oldpath, newpath string) error {
	t := s.tree()
	dir := filepath.Dir(newpath)
	if !t.Confined() || filepath.Dir(oldpath) != dir {
		return s.fsys().Rename(oldpath, newpath)
	}
	d, err := nodefs.OpenInRootFd(s.Root, dir, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return err
	}
	defer unix.Close(d)
	if err := unix.Renameat(d, filepath.Base(oldpath), d, filepath.Base(newpath)); err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	return nil
}

// chmodChown sets the SELinux label (unless nil), the mode, then the owner, of the regular file at
// a host path, on an fd opened without following a symlink (fsetxattr, fchmod, fchown).
func (s *Store) chmodChown(hp string, label []byte, mode fs.FileMode, uid, gid int) error {
	f, err := s.tree().OpenHost(hp, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if label != nil {
		if err := setLabel(f, label); err != nil {
			return err
		}
	}
	if err := f.Chmod(mode); err != nil {
		return err
	}
	return f.Chown(uid, gid)
}

// atDir runs f with an fd of the host directory of hp opened confined to the root and the base
// name of hp: the *at system calls then act in that directory, wherever a symlink swapped in on
// the way would lead. ok is false when the store is not confined (the real root, or an FS wrapped
// for fault injection): the caller uses the FS seam then.
func (s *Store) atDir(hp string, f func(dfd int, base string) error) (ok bool, err error) {
	if !s.tree().Confined() {
		return false, nil
	}
	d, err := nodefs.OpenInRootFd(s.Root, filepath.Dir(hp), unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return true, err
	}
	defer unix.Close(d)
	return true, f(d, filepath.Base(hp))
}

// remove removes the file, symlink or empty directory at a host path without following it
// (unlinkat relative to its directory, confined under --root).
func (s *Store) remove(hp string) error {
	ok, err := s.atDir(hp, func(dfd int, base string) error {
		err := unix.Unlinkat(dfd, base, 0)
		if errors.Is(err, unix.EISDIR) {
			err = unix.Unlinkat(dfd, base, unix.AT_REMOVEDIR)
		}
		if err != nil {
			return &fs.PathError{Op: "remove", Path: hp, Err: err}
		}
		return nil
	})
	if !ok {
		return s.fsys().Remove(hp)
	}
	return err
}

// symlink creates a symlink at a host path (symlinkat, confined under --root).
func (s *Store) symlink(target, hp string) error {
	ok, err := s.atDir(hp, func(dfd int, base string) error {
		if err := unix.Symlinkat(target, dfd, base); err != nil {
			return &os.LinkError{Op: "symlink", Old: target, New: hp, Err: err}
		}
		return nil
	})
	if !ok {
		return s.fsys().Symlink(target, hp)
	}
	return err
}

// lchown sets the owner of a host path without following a final symlink (fchownat with
// AT_SYMLINK_NOFOLLOW, confined under --root).
func (s *Store) lchown(hp string, uid, gid int) error {
	ok, err := s.atDir(hp, func(dfd int, base string) error {
		if err := unix.Fchownat(dfd, base, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return &fs.PathError{Op: "lchown", Path: hp, Err: err}
		}
		return nil
	})
	if !ok {
		return s.fsys().Lchown(hp, uid, gid)
	}
	return err
}
