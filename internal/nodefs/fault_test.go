package nodefs_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/internal/testutil/faultfs"
)

// TestReadsGoThroughTheFS: reads use the FS seam, so a fault injected there reaches the reader
// (and the error names the node path, not the host one). An external test: faultfs imports
// nodefs.
func TestReadsGoThroughTheFS(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/resolv.conf"), []byte("nameserver 10.0.0.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &nodefs.Tree{Root: root, FS: faultfs.FS{FS: nodefs.OS(), Fail: func(op, name string) syscall.Errno {
		if (op == "open" || op == "readdir") && strings.HasPrefix(name, root) {
			return syscall.EIO
		}
		return 0
	}}}
	if _, err := s.ReadFile("/etc/resolv.conf", nodefs.Config); !errors.Is(err, syscall.EIO) || err.Error() != "read /etc/resolv.conf: input/output error" {
		t.Errorf("ReadFile with a failing open: %v", err)
	}
	if _, err := s.ReadDir("/etc"); !errors.Is(err, syscall.EIO) || err.Error() != "list /etc: input/output error" {
		t.Errorf("ReadDir with a failing readdir: %v", err)
	}
}
