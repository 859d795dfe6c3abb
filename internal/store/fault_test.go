package store

import (
	"errors"
	"os"
	"path"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/internal/testutil/faultfs"
)

// TestWriteFaults injects the failures a node really shows: rename onto a bind-mounted
// /etc/resolv.conf (EBUSY, as in Docker and Kubernetes pods; EXDEV across mounts), a full disk
// (ENOSPC), a read-only /etc (EROFS) and a permission problem (EACCES).
func TestWriteFaults(t *testing.T) {
	const (
		orig = "nameserver 169.254.25.10\nsearch example.org\n"
		data = "nameserver 10.0.0.2\n"
	)
	// fail is called with op and the node path (the host path with the root cut off).
	type failFunc func(op, node string, calls map[string]int) syscall.Errno
	on := func(wantOp, wantNode string, errno syscall.Errno) failFunc {
		return func(op, node string, _ map[string]int) syscall.Errno {
			if op == wantOp && (wantNode == "" || node == wantNode || isTempOf(node, wantNode)) {
				return errno
			}
			return 0
		}
	}
	tests := []struct {
		name    string
		path    string
		setup   func(t *testing.T, s *Store)
		fail    failFunc
		want    WriteResult
		wantErr syscall.Errno
		// wantContent is the file content afterwards; "" means the original.
		wantContent string
		// backedUp: whether the failure left a backup entry behind (a backup taken before a failed
		// write is right: it still holds the original).
		backedUp bool
	}{
		{
			name:        "rename EBUSY falls back to an in-place write",
			path:        "/etc/resolv.conf",
			fail:        on("rename", "/etc/resolv.conf", syscall.EBUSY),
			want:        WriteResult{Path: "/etc/resolv.conf", InPlace: true},
			wantContent: data,
			backedUp:    true,
		},
		{
			name:        "rename EXDEV falls back to an in-place write",
			path:        "/etc/resolv.conf",
			fail:        on("rename", "/etc/resolv.conf", syscall.EXDEV),
			want:        WriteResult{Path: "/etc/resolv.conf", InPlace: true},
			wantContent: data,
			backedUp:    true,
		},
		{
			name: "in-place write hitting ENOSPC puts the original back",
			path: "/etc/resolv.conf",
			fail: func(op, node string, calls map[string]int) syscall.Errno {
				switch {
				case op == "rename" && node == "/etc/resolv.conf":
					return syscall.EBUSY
				case op == "writeat" && node == "/etc/resolv.conf":
					calls["writeat"]++
					if calls["writeat"] == 1 {
						return syscall.ENOSPC
					}
				}
				return 0
			},
			wantErr:  syscall.ENOSPC,
			backedUp: true,
		},
		{
			name:     "ENOSPC writing the temp file",
			path:     "/etc/resolv.conf",
			fail:     on("write", "/etc/resolv.conf", syscall.ENOSPC),
			wantErr:  syscall.ENOSPC,
			backedUp: true,
		},
		{
			name:     "EIO on fsync of the temp file",
			path:     "/etc/resolv.conf",
			fail:     on("sync", "/etc/resolv.conf", syscall.EIO),
			wantErr:  syscall.EIO,
			backedUp: true,
		},
		{
			name:    "ENOSPC writing the backup copy",
			path:    "/etc/resolv.conf",
			fail:    on("write", "/var/lib/nodedns/backup/"+sum(orig), syscall.ENOSPC),
			wantErr: syscall.ENOSPC,
		},
		{
			name:    "read-only /etc",
			path:    "/etc/resolv.conf",
			fail:    on("createtemp", "/etc", syscall.EROFS),
			wantErr: syscall.EROFS,
			// The backup under /var/lib/nodedns was taken before /etc refused the temp file.
			backedUp: true,
		},
		{
			name:    "read-only root: the backup store cannot be created",
			path:    "/etc/resolv.conf",
			fail:    on("mkdirall", "", syscall.EROFS),
			wantErr: syscall.EROFS,
		},
		{
			name:     "EACCES on rename",
			path:     "/etc/resolv.conf",
			fail:     on("rename", "/etc/resolv.conf", syscall.EACCES),
			wantErr:  syscall.EACCES,
			backedUp: true,
		},
		{
			name:     "EPERM on chown of the temp file",
			path:     "/etc/resolv.conf",
			setup:    func(t *testing.T, s *Store) { needRoot(t); chown(t, s, "/etc/resolv.conf", 1234, 1234) },
			fail:     on("lchown", "/etc/resolv.conf", syscall.EPERM),
			wantErr:  syscall.EPERM,
			backedUp: true,
		},
		{
			name:     "EACCES through a symlink names both paths",
			path:     "/etc/resolv.conf",
			setup:    func(t *testing.T, s *Store) { relink(t, s) },
			fail:     on("createtemp", "/run/resolvconf", syscall.EACCES),
			wantErr:  syscall.EACCES,
			backedUp: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			mkfile(t, s, "/etc/resolv.conf", orig, 0o644)
			if tt.setup != nil {
				tt.setup(t, s)
			}
			final, err := s.ResolveLink(tt.path)
			if err != nil {
				t.Fatal(err)
			}
			before := stateOf(t, s, final)
			ino := inode(t, s, final)
			calls := map[string]int{}
			s.FS = faultfs.FS{FS: nodefs.OS(), Fail: func(op, name string) syscall.Errno {
				return tt.fail(op, strings.TrimPrefix(name, s.Root), calls)
			}}

			got, err := s.Write(tt.path, []byte(data), 0o644)
			s.FS = nil
			if tt.wantErr != 0 {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Write error = %v, want %v", err, tt.wantErr)
				}
				t.Logf("error: %v", err)
				name := "write " + tt.path
				if final != tt.path {
					name += " (-> " + final + ")"
				}
				if !strings.HasPrefix(err.Error(), name+": ") && !strings.HasPrefix(err.Error(), name+" in place") {
					t.Errorf("Write error %q does not start by naming the path (%q)", err, name)
				}
				if diff := cmp.Diff(before, stateOf(t, s, final)); diff != "" {
					t.Errorf("original changed by a failed Write (-before +after):\n%s", diff)
				}
			} else {
				if err != nil {
					t.Fatalf("Write: %v", err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("Write result (-want +got):\n%s", diff)
				}
				if content := readNode(t, s, final); content != tt.wantContent {
					t.Errorf("content = %q, want %q", content, tt.wantContent)
				}
			}
			// A failed write leaves the very same file; an in-place write keeps its inode; only a
			// successful rename brings a new one.
			sameInode := tt.wantErr != 0 || tt.want.InPlace
			if now := inode(t, s, final); (now == ino) != sameInode {
				t.Errorf("inode before %d, after %d; want same inode: %v", ino, now, sameInode)
			}
			assertNoTemps(t, s)
			entries, err := s.Backups()
			if err != nil {
				t.Fatal(err)
			}
			if (len(entries) > 0) != tt.backedUp {
				t.Errorf("Backups = %+v, want backed up: %v", entries, tt.backedUp)
			}
			// Whatever happened, restore brings back the original.
			if _, err := s.Restore(nil); err != nil {
				t.Fatalf("Restore: %v", err)
			}
			if diff := cmp.Diff(before, stateOf(t, s, final)); diff != "" {
				t.Errorf("Restore after the fault (-before +after):\n%s", diff)
			}
		})
	}
}

// relink makes /etc/resolv.conf a symlink into /run/resolvconf (the resolvconf package's layout).
func relink(t *testing.T, s *Store) {
	t.Helper()
	mkfile(t, s, "/run/resolvconf/resolv.conf", readNode(t, s, "/etc/resolv.conf"), 0o644)
	if err := removeNode(s, "/etc/resolv.conf"); err != nil {
		t.Fatal(err)
	}
	mklink(t, s, "/etc/resolv.conf", "../run/resolvconf/resolv.conf")
}

// isTempOf reports whether name is one of replace's temp files for node.
func isTempOf(name, node string) bool {
	return path.Dir(name) == path.Dir(node) && strings.HasPrefix(path.Base(name), "."+path.Base(node)+".nodedns-")
}

func removeNode(s *Store, node string) error { return nodefs.OS().Remove(s.host(node)) }

// TestWriteNewFileEBUSY: a file that does not exist cannot be a bind mount; EBUSY is then a plain
// error, not a reason to write in place.
func TestWriteNewFileEBUSY(t *testing.T) {
	s := newStore(t)
	s.FS = faultfs.FS{FS: nodefs.OS(), Fail: func(op, name string) syscall.Errno {
		if op == "rename" && name == s.host("/etc/netplan/90-nodedns.yaml") {
			return syscall.EBUSY
		}
		return 0
	}}
	_, err := s.Write("/etc/netplan/90-nodedns.yaml", []byte("network: {}\n"), 0o600)
	if !errors.Is(err, syscall.EBUSY) || !strings.HasPrefix(err.Error(), "write /etc/netplan/90-nodedns.yaml: ") {
		t.Fatalf("Write error = %v, want EBUSY naming the path", err)
	}
	if st := stateOf(t, s, "/etc/netplan/90-nodedns.yaml"); st.Kind != KindAbsent {
		t.Errorf("file after a failed create: %+v, want absent", st)
	}
	assertNoTemps(t, s)
}

// TestRestoreInPlace restores a bind-mounted file (rename EBUSY) in place, with its mode.
func TestRestoreInPlace(t *testing.T) {
	s := newStore(t)
	mkfile(t, s, "/etc/resolv.conf", "nameserver 169.254.25.10\n", 0o644)
	before := stateOf(t, s, "/etc/resolv.conf")
	if _, err := s.Write("/etc/resolv.conf", []byte("nameserver 10.0.0.2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(s.host("/etc/resolv.conf"), 0o600); err != nil {
		t.Fatal(err)
	}
	ino := inode(t, s, "/etc/resolv.conf")
	s.FS = faultfs.FS{FS: nodefs.OS(), Fail: func(op, name string) syscall.Errno {
		if op == "rename" && name == s.host("/etc/resolv.conf") {
			return syscall.EBUSY
		}
		return 0
	}}
	got, err := s.Restore(nil)
	if err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if diff := cmp.Diff([]RestoreResult{{Path: "/etc/resolv.conf", Action: ActionRestored}}, got); diff != "" {
		t.Errorf("Restore results (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, stateOf(t, s, "/etc/resolv.conf")); diff != "" {
		t.Errorf("state after an in-place Restore (-want +got):\n%s", diff)
	}
	if inode(t, s, "/etc/resolv.conf") != ino {
		t.Error("in-place Restore replaced the inode")
	}
	assertNoTemps(t, s)
}
