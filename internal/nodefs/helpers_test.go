package nodefs

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// newTree returns a Tree on a fresh temp root.
func newTree(t *testing.T) *Tree {
	t.Helper()
	root := t.TempDir()
	if holdTestRoots {
		release, err := HoldRoot(root)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(release)
	}
	return &Tree{Root: root}
}

// holdTestRoots makes newTree hold its root (HoldRoot), as the daemon does, for bothWays.
var holdTestRoots bool

func mkfile(t testing.TB, s *Tree, node, content string, mode fs.FileMode) {
	t.Helper()
	hp := s.Host(node)
	if err := os.MkdirAll(filepath.Dir(hp), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hp, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	// WriteFile's mode is filtered by the umask.
	if err := os.Chmod(hp, mode); err != nil {
		t.Fatal(err)
	}
}

func mklink(t testing.TB, s *Tree, node, target string) {
	t.Helper()
	hp := s.Host(node)
	if err := os.MkdirAll(filepath.Dir(hp), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, hp); err != nil {
		t.Fatal(err)
	}
}

// faultFS wraps an FS and fails chosen read operations: fail(op, name) returns the errno to fail
// with, or 0 to let the call through. Ops: lstat, stat, readlink, open, readdir.
type faultFS struct {
	FS
	fail func(op, name string) syscall.Errno
}

func (f faultFS) err(op, name string) error {
	if f.fail == nil {
		return nil
	}
	if e := f.fail(op, name); e != 0 {
		return &fs.PathError{Op: op, Path: name, Err: e}
	}
	return nil
}

func (f faultFS) Lstat(name string) (fs.FileInfo, error) {
	if err := f.err("lstat", name); err != nil {
		return nil, err
	}
	return f.FS.Lstat(name)
}

func (f faultFS) Stat(name string) (fs.FileInfo, error) {
	if err := f.err("stat", name); err != nil {
		return nil, err
	}
	return f.FS.Stat(name)
}

func (f faultFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if err := f.err("readdir", name); err != nil {
		return nil, err
	}
	return f.FS.ReadDir(name)
}

func (f faultFS) Readlink(name string) (string, error) {
	if err := f.err("readlink", name); err != nil {
		return "", err
	}
	return f.FS.Readlink(name)
}

func (f faultFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	if err := f.err("open", name); err != nil {
		return nil, err
	}
	return f.FS.OpenFile(name, flag, perm)
}
