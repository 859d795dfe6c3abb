package nodefs

import (
	"io/fs"
	"os"
	"path/filepath"
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
