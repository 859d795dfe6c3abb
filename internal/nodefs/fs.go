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

	"golang.org/x/sys/unix"
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

// File is an open file as FS returns it.
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
	// Getxattr returns the value of the open file's extended attribute name (fgetxattr, asked again
	// with a larger buffer while the value outgrows it); a missing attribute is ENODATA, a
	// filesystem that keeps none ENOTSUP. Setxattr sets it (fsetxattr). Never by path, as Chmod.
	Getxattr(name string) ([]byte, error)
	Setxattr(name string, value []byte) error
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
	return osFile{f}, nil
}

func (osFS) CreateTemp(dir, pattern string) (File, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) SyncDir(name string) error {
	// A bare descriptor: open, fsync, close (os.Open adds fcntl calls to decide on polling).
	fd, err := unix.Open(name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return SyncClose(fd, name)
}

// SyncClose fsyncs the directory (or file) descriptor fd and closes it; name is for the error.
func SyncClose(fd int, name string) error {
	d := &rawFile{fd: fd, name: name}
	serr := d.Sync()
	cerr := d.Close()
	if serr != nil {
		return serr
	}
	return cerr
}

func (osFS) Lock(name string, wait time.Duration) (func() error, int, error) {
	// O_NOFOLLOW: a .lock symlink planted in the state directory would make O_CREAT create its
	// target, outside --root or anywhere on the host. A bare descriptor: flock and pread need no
	// poller (os.OpenFile adds fcntl calls to decide on one).
	fd, err := unix.Open(name, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			if fi, lerr := os.Lstat(name); lerr == nil {
				return nil, 0, Untrusted(name, fi, false, 0o600)
			}
		}
		return nil, 0, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	f := &rawFile{fd: fd, name: name}
	fi, err := f.Stat()
	if err == nil {
		err = Untrusted(name, fi, false, 0o600)
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	deadline := time.Now().Add(wait)
	pause := 5 * time.Millisecond
	for {
		// flock(2) is released by the kernel when the process dies, so a crashed nodedns never
		// leaves the state locked (unlike a lock file that must be cleaned up).
		ferr := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
		if ferr == nil {
			break
		}
		if !errors.Is(ferr, syscall.EWOULDBLOCK) && !errors.Is(ferr, syscall.EINTR) {
			f.Close()
			return nil, 0, &fs.PathError{Op: "flock", Path: name, Err: ferr}
		}
		if time.Now().After(deadline) {
			pid := holderPID(fd)
			f.Close()
			return nil, 0, &LockedError{Path: name, PID: pid, Waited: wait}
		}
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
	// A PID still in the file is a holder that died holding the lock (a clean release empties it).
	prev := holderPID(fd)
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

// holderPID reads the PID the lock's holder wrote into the lock file fd; 0 when there is none.
func holderPID(fd int) int {
	buf := make([]byte, 32)
	n, _ := unix.Pread(fd, buf, 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(buf[:max(n, 0)])))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}
