// Package nodefs is how nodedns reads a node's files: a Reader bound to the node's root (Tree),
// the Kinds that bound every read, DropIns, IfNames, ReadKernel, the Watch declarations, and the FS
// seam every read and write goes through. It never writes; internal/store does (atomic writes,
// backups, the state lock, restore), and only the packages that change the node import it.
//
// Every path given to a Reader is a node path ("/etc/resolv.conf") resolved under the Tree's Root,
// the way `netplan --root-dir` does, so tests and `nodedns --root DIR` work on a fake node.
package nodefs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// FS is the seam between nodedns and the filesystem, small enough to wrap for fault injection in
// tests (rename failing with EBUSY as on a bind-mounted /etc/resolv.conf, ENOSPC on write, EROFS,
// EACCES). Names are host paths (already joined under the root). OS returns the real one.
type FS interface {
	// Lstat describes name without following a final symlink.
	Lstat(name string) (fs.FileInfo, error)
	// Stat describes name, following symlinks.
	Stat(name string) (fs.FileInfo, error)
	// ReadDir lists a directory, sorted by name.
	ReadDir(name string) ([]fs.DirEntry, error)
	// Readlink returns a symlink's target as stored.
	Readlink(name string) (string, error)
	// OpenFile opens name as os.OpenFile does.
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	// CreateTemp creates a new file in dir (mode 0600) as os.CreateTemp does.
	CreateTemp(dir, pattern string) (File, error)
	// Rename atomically replaces newpath with oldpath.
	Rename(oldpath, newpath string) error
	// Remove removes a file, a symlink or an empty directory.
	Remove(name string) error
	// Symlink creates newname pointing at oldname.
	Symlink(oldname, newname string) error
	// Lchown sets the owner of name without following a final symlink.
	Lchown(name string, uid, gid int) error
	// MkdirAll creates a directory and its missing parents.
	MkdirAll(name string, perm fs.FileMode) error
	// SyncDir fsyncs a directory, making a rename or removal in it durable.
	SyncDir(name string) error
	// Lock takes an exclusive advisory lock on name (created 0600 if missing, never through a
	// symlink), waiting at most wait, and returns the function that releases it. It serialises
	// changes to nodedns's state between processes. The holder's PID is in the file while it holds
	// the lock and a clean release empties it, so prev, the PID found there on taking it, names a
	// holder that died holding it (0: none did). A file that is not trusted state is an
	// *UntrustedError; a lock still held after wait a *LockedError naming the holder.
	Lock(name string, wait time.Duration) (unlock func() error, prev int, err error)
}

// File is an open file as FS returns it; *os.File implements it.
type File interface {
	io.Reader
	io.Writer
	io.WriterAt
	// Name is the host path the file was opened or created with.
	Name() string
	// Truncate changes the file's size.
	Truncate(size int64) error
	// Stat describes the open file (fstat).
	Stat() (fs.FileInfo, error)
	// Chmod and Chown change the open file's mode and owner (fchmod, fchown): never a path, which a
	// symlink swapped in could redirect.
	Chmod(mode fs.FileMode) error
	Chown(uid, gid int) error
	// Sync flushes the file's data and metadata to stable storage (fsync).
	Sync() error
	// Close closes the file.
	Close() error
}

// OS returns the FS of the real filesystem.
func OS() FS { return osFS{} }

type osFS struct{}

func (osFS) Lstat(name string) (fs.FileInfo, error)     { return os.Lstat(name) }
func (osFS) Stat(name string) (fs.FileInfo, error)      { return os.Stat(name) }
func (osFS) ReadDir(name string) ([]fs.DirEntry, error) { return os.ReadDir(name) }
func (osFS) Readlink(name string) (string, error)       { return os.Readlink(name) }
func (osFS) Rename(oldpath, newpath string) error       { return os.Rename(oldpath, newpath) }
func (osFS) Remove(name string) error                   { return os.Remove(name) }
func (osFS) Symlink(oldname, newname string) error      { return os.Symlink(oldname, newname) }
func (osFS) Lchown(name string, uid, gid int) error     { return os.Lchown(name, uid, gid) }
func (osFS) MkdirAll(name string, perm fs.FileMode) error {
	return os.MkdirAll(name, perm)
}

func (osFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		// Never return a typed nil *os.File inside a non-nil interface.
		return nil, err
	}
	return f, nil
}

func (osFS) CreateTemp(dir, pattern string) (File, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (osFS) SyncDir(name string) error {
	d, err := os.Open(name)
	if err != nil {
		return err
	}
	serr := d.Sync()
	cerr := d.Close()
	if serr != nil {
		return serr
	}
	return cerr
}

func (osFS) Lock(name string, wait time.Duration) (func() error, int, error) {
	// O_NOFOLLOW: a .lock symlink planted in the state directory would make O_CREAT create its
	// target, outside --root or anywhere on the host.
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			if fi, lerr := os.Lstat(name); lerr == nil {
				return nil, 0, Untrusted(name, fi, false, 0o600)
			}
		}
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err == nil {
		err = Untrusted(name, fi, false, 0o600)
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	deadline := time.Now().Add(wait)
	pause := 5 * time.Millisecond
	for {
		var ferr error
		if err := rc.Control(func(fd uintptr) {
			// flock(2) is released by the kernel when the process dies, so a crashed nodedns
			// never leaves the state locked (unlike a lock file that must be cleaned up).
			ferr = syscall.Flock(int(fd), syscall.LOCK_EX|syscall.LOCK_NB)
		}); err != nil {
			f.Close()
			return nil, 0, err
		}
		if ferr == nil {
			break
		}
		if !errors.Is(ferr, syscall.EWOULDBLOCK) && !errors.Is(ferr, syscall.EINTR) {
			f.Close()
			return nil, 0, &fs.PathError{Op: "flock", Path: name, Err: ferr}
		}
		if time.Now().After(deadline) {
			pid := holderPID(f)
			f.Close()
			return nil, 0, &LockedError{Path: name, PID: pid, Waited: wait}
		}
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
	// A PID still in the file is a holder that died holding the lock (a clean release empties it).
	prev := holderPID(f)
	// The holder's PID, for the error of whoever waits next. A failure here only costs that message
	// (and a sweep the next holder need not make).
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() error {
		_ = f.Truncate(0) // released cleanly: nothing for the next holder to sweep up
		return f.Close()
	}, prev, nil
}

// holderPID reads the PID the lock's holder wrote into the lock file; 0 when there is none.
func holderPID(f *os.File) int {
	buf := make([]byte, 32)
	n, _ := f.ReadAt(buf, 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}
