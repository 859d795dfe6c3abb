package reconcile

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/nodefs"
)

// roFS makes every rename into one directory fail with EROFS, as a read-only /etc would; the rest of
// the node stays writable. (Injected: the privileged cmd test does the same with a real mount.)
type roFS struct {
	nodefs.FS
	dir string
}

func (f roFS) Rename(oldpath, newpath string) error {
	if filepath.Dir(newpath) == f.dir {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: syscall.EROFS}
	}
	return f.FS.Rename(oldpath, newpath)
}

func TestApplyGoesOnAfterAFailedTarget(t *testing.T) {
	root := t.TempDir()
	write := func(p, data string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	orig := "nameserver 169.254.25.10\nnameserver 10.0.0.2\n"
	write("etc/resolv.conf", orig)
	n := &Node{Root: root, Config: config.Default(), Store: NewStore(root, roFS{FS: nodefs.OS(), dir: filepath.Join(root, "etc")}, config.Default()), Now: time.Now}
	_, p := n.Observe(context.Background())
	if len(p.Changes) != 2 {
		t.Fatalf("want 2 changes (kubelet file, /etc/resolv.conf), got %+v", p.Changes)
	}
	o := n.Apply(context.Background(), p)
	if !o.Failed() || len(o.Errors) != 1 || !errors.Is(o.Errors[0], syscall.EROFS) || !strings.Contains(o.Errors[0].Error(), "/etc/resolv.conf") {
		t.Fatalf("errors = %v, want one EROFS naming /etc/resolv.conf", o.Errors)
	}
	if len(o.Written) != 1 || o.Written[0].Path != config.DefaultKubeletResolvConf {
		t.Errorf("written = %+v, want the kubelet file", o.Written)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "etc/resolv.conf")); string(got) != orig {
		t.Errorf("/etc/resolv.conf changed: %q", got)
	}
	// A restore afterwards removes what was created and leaves the untouched file as it is.
	res, err := (&Node{Root: root, Config: config.Default()}).RestoreWith(context.Background(), RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, config.DefaultKubeletResolvConf)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("kubelet file still there after restore (%v): %+v", err, res)
	}
}
