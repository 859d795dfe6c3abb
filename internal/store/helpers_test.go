package store

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/nodefs"
)

var testTime = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// newStore returns a Store on a fresh temp root with a pinned clock, whose restore may change any
// path the tests use (the allow-list itself is tested in trust_test.go).
func newStore(t *testing.T) *Store {
	t.Helper()
	return &Store{Root: t.TempDir(), now: func() time.Time { return testTime }, Targets: anyTarget()}
}

// anyTarget allows every path up to eight components deep.
func anyTarget() *Targets {
	t := NewTargets()
	for p := ""; len(p) < 16; p += "/*" {
		t.Add(p + "/*")
	}
	return t
}

func mkfile(t *testing.T, s *Store, node, content string, mode fs.FileMode) {
	t.Helper()
	hp := s.host(node)
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

func mklink(t *testing.T, s *Store, node, target string) {
	t.Helper()
	hp := s.host(node)
	if err := os.MkdirAll(filepath.Dir(hp), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, hp); err != nil {
		t.Fatal(err)
	}
}

func chown(t *testing.T, s *Store, node string, uid, gid int) {
	t.Helper()
	if err := os.Lchown(s.host(node), uid, gid); err != nil {
		t.Fatal(err)
	}
}

func readNode(t *testing.T, s *Store, node string) string {
	t.Helper()
	b, err := os.ReadFile(s.host(node))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// state is what restore must put back exactly, as seen with lstat.
type state struct {
	Kind     string
	Mode     fs.FileMode
	UID, GID int
	Target   string
	SHA256   string
}

func stateOf(t *testing.T, s *Store, node string) state {
	t.Helper()
	hp := s.host(node)
	fi, err := os.Lstat(hp)
	if errors.Is(err, fs.ErrNotExist) {
		return state{Kind: KindAbsent}
	}
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.IsDir() {
		return state{Kind: "dir", Mode: fi.Mode() & keepModeBits, UID: int(st.Uid), GID: int(st.Gid)}
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, err := os.Readlink(hp)
		if err != nil {
			t.Fatal(err)
		}
		return state{Kind: KindSymlink, UID: int(st.Uid), GID: int(st.Gid), Target: target}
	}
	b, err := os.ReadFile(hp)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return state{Kind: KindFile, Mode: fi.Mode() & keepModeBits, UID: int(st.Uid), GID: int(st.Gid), SHA256: hex.EncodeToString(sum[:])}
}

func snapshot(t *testing.T, s *Store, nodes ...string) map[string]state {
	t.Helper()
	m := make(map[string]state, len(nodes))
	for _, n := range nodes {
		m[n] = stateOf(t, s, n)
	}
	return m
}

// tempFiles lists every temp file this package could have left anywhere under the root.
func tempFiles(t *testing.T, root string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.Contains(d.Name(), ".nodedns-") && strings.HasSuffix(d.Name(), ".tmp") {
			found = append(found, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func assertNoTemps(t *testing.T, s *Store) {
	t.Helper()
	if left := tempFiles(t, s.Root); len(left) > 0 {
		t.Errorf("temp files left behind: %q", left)
	}
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("changing a file's owner needs root")
	}
}

func inode(t *testing.T, s *Store, node string) uint64 {
	t.Helper()
	fi, err := os.Lstat(s.host(node))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// faultFS wraps a nodefs.FS and fails chosen operations: fail(op, name) returns the errno to fail with,
// or 0 to let the call through. Ops: lstat, stat, readlink, open, createtemp, rename
// (name is the new path), readdir, remove, symlink, chmod, lchown, mkdirall, syncdir, lock, and on files
// opened through it write, writeat, truncate, sync.
type faultFS struct {
	nodefs.FS
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

func (f faultFS) OpenFile(name string, flag int, perm fs.FileMode) (nodefs.File, error) {
	if err := f.err("open", name); err != nil {
		return nil, err
	}
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return faultFile{file, f}, nil
}

func (f faultFS) CreateTemp(dir, pattern string) (nodefs.File, error) {
	if err := f.err("createtemp", dir); err != nil {
		return nil, err
	}
	file, err := f.FS.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return faultFile{file, f}, nil
}

func (f faultFS) Rename(oldpath, newpath string) error {
	if err := f.err("rename", newpath); err != nil {
		return err
	}
	return f.FS.Rename(oldpath, newpath)
}

func (f faultFS) Remove(name string) error {
	if err := f.err("remove", name); err != nil {
		return err
	}
	return f.FS.Remove(name)
}

func (f faultFS) Symlink(oldname, newname string) error {
	if err := f.err("symlink", newname); err != nil {
		return err
	}
	return f.FS.Symlink(oldname, newname)
}

func (f faultFS) Lchown(name string, uid, gid int) error {
	if err := f.err("lchown", name); err != nil {
		return err
	}
	return f.FS.Lchown(name, uid, gid)
}

func (f faultFS) MkdirAll(name string, perm fs.FileMode) error {
	if err := f.err("mkdirall", name); err != nil {
		return err
	}
	return f.FS.MkdirAll(name, perm)
}

func (f faultFS) SyncDir(name string) error {
	if err := f.err("syncdir", name); err != nil {
		return err
	}
	return f.FS.SyncDir(name)
}

func (f faultFS) Lock(name string, wait time.Duration) (func() error, int, error) {
	if err := f.err("lock", name); err != nil {
		return nil, 0, err
	}
	return f.FS.Lock(name, wait)
}

type faultFile struct {
	nodefs.File
	fs faultFS
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

func (f faultFile) Sync() error {
	if err := f.fs.err("sync", f.Name()); err != nil {
		return err
	}
	return f.File.Sync()
}

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}
