// Package faultfs wraps nodefs's FS seam to fail chosen operations, for the tests of nodefs and of
// the store that writes through it.
package faultfs

import (
	"io/fs"
	"syscall"
	"time"

	"github.com/nodedns/nodedns/internal/nodefs"
)

// FS wraps a nodefs.FS and fails chosen operations: Fail(op, name) returns the errno to fail
// with, or 0 to let the call through (a nil Fail fails nothing). Ops: lstat, stat, readlink, open,
// createtemp, rename (name is the new path), readdir, remove, symlink, chmod, lchown, mkdirall,
// syncdir, lock, and on files opened through it write, writeat, truncate, sync, getxattr, setxattr.
type FS struct {
	nodefs.FS
	Fail func(op, name string) syscall.Errno
}

func (f FS) err(op, name string) error {
	if f.Fail == nil {
		return nil
	}
	if e := f.Fail(op, name); e != 0 {
		return &fs.PathError{Op: op, Path: name, Err: e}
	}
	return nil
}

func (f FS) Lstat(name string) (fs.FileInfo, error) {
	if err := f.err("lstat", name); err != nil {
		return nil, err
	}
	return f.FS.Lstat(name)
}

func (f FS) Stat(name string) (fs.FileInfo, error) {
	if err := f.err("stat", name); err != nil {
		return nil, err
	}
	return f.FS.Stat(name)
}

func (f FS) ReadDir(name string) ([]fs.DirEntry, error) {
	if err := f.err("readdir", name); err != nil {
		return nil, err
	}
	return f.FS.ReadDir(name)
}

func (f FS) Readlink(name string) (string, error) {
	if err := f.err("readlink", name); err != nil {
		return "", err
	}
	return f.FS.Readlink(name)
}

func (f FS) OpenFile(name string, flag int, perm fs.FileMode) (nodefs.File, error) {
	if err := f.err("open", name); err != nil {
		return nil, err
	}
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return faultFile{file, f}, nil
}

func (f FS) CreateTemp(dir, pattern string) (nodefs.File, error) {
	if err := f.err("createtemp", dir); err != nil {
		return nil, err
	}
	file, err := f.FS.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return faultFile{file, f}, nil
}

func (f FS) Rename(oldpath, newpath string) error {
	if err := f.err("rename", newpath); err != nil {
		return err
	}
	return f.FS.Rename(oldpath, newpath)
}

func (f FS) Remove(name string) error {
	if err := f.err("remove", name); err != nil {
		return err
	}
	return f.FS.Remove(name)
}

func (f FS) Symlink(oldname, newname string) error {
	if err := f.err("symlink", newname); err != nil {
		return err
	}
	return f.FS.Symlink(oldname, newname)
}

func (f FS) Lchown(name string, uid, gid int) error {
	if err := f.err("lchown", name); err != nil {
		return err
	}
	return f.FS.Lchown(name, uid, gid)
}

func (f FS) MkdirAll(name string, perm fs.FileMode) error {
	if err := f.err("mkdirall", name); err != nil {
		return err
	}
	return f.FS.MkdirAll(name, perm)
}

func (f FS) SyncDir(name string) error {
	if err := f.err("syncdir", name); err != nil {
		return err
	}
	return f.FS.SyncDir(name)
}

func (f FS) Lock(name string, wait time.Duration) (func() error, int, error) {
	if err := f.err("lock", name); err != nil {
		return nil, 0, err
	}
	return f.FS.Lock(name, wait)
}

type faultFile struct {
	nodefs.File
	fs FS
}

func (f faultFile) Write(p []byte) (int, error) {
	if err := f.fs.err("write", f.Name()); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}

func (f faultFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.err("writeat", f.Name()); err != nil {
		// Fail half way, as a real ENOSPC does after some blocks went out.
		n, _ := f.File.WriteAt(p[:len(p)/2], off)
		return n, err
	}
	return f.File.WriteAt(p, off)
}

func (f faultFile) Truncate(size int64) error {
	if err := f.fs.err("truncate", f.Name()); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func (f faultFile) Chmod(mode fs.FileMode) error {
	if err := f.fs.err("chmod", f.Name()); err != nil {
		return err
	}
	return f.File.Chmod(mode)
}

func (f faultFile) Chown(uid, gid int) error {
	if err := f.fs.err("lchown", f.Name()); err != nil {
		return err
	}
	return f.File.Chown(uid, gid)
}

func (f faultFile) Getxattr(name string) ([]byte, error) {
	if err := f.fs.err("getxattr", f.Name()); err != nil {
		return nil, err
	}
	return f.File.Getxattr(name)
}

func (f faultFile) Setxattr(name string, value []byte) error {
	if err := f.fs.err("setxattr", f.Name()); err != nil {
		return err
	}
	return f.File.Setxattr(name, value)
}

func (f faultFile) Sync() error {
	if err := f.fs.err("sync", f.Name()); err != nil {
		return err
	}
	return f.File.Sync()
}
