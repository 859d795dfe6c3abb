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

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}
