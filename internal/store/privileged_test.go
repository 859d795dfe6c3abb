package store

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// privilegedEnv enables tests that need root and mount a filesystem (CI sets it; .ci/run too).
const privilegedEnv = "NODEDNS_PRIVILEGED"

// childEnv marks the re-executed test binary running inside a private mount namespace; its value is
// the parent's mount namespace, which the child checks it is NOT in before it mounts anything.
const childEnv = "NODEDNS_FILES_MOUNTNS_PARENT"

// TestPrivileged re-executes this test binary under `unshare -m --propagation private` and, in that
// private mount namespace only, mounts a 64 KiB tmpfs to fill the disk for real, and bind-mounts a
// file over /etc/resolv.conf as Docker and Kubernetes do.
func TestPrivileged(t *testing.T) {
	if parent := os.Getenv(childEnv); parent != "" {
		privilegedChild(t, parent)
		return
	}
	if os.Getenv(privilegedEnv) != "1" {
		t.Skip("mounts a tmpfs and a bind mount in a private mount namespace: needs root and " + privilegedEnv + "=1")
	}
	if os.Geteuid() != 0 {
		t.Skip(privilegedEnv + "=1 but not root: mounting needs CAP_SYS_ADMIN")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skipf("no unshare binary (util-linux): %v", err)
	}
	ns, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(unshare, "-m", "--propagation", "private",
		os.Args[0], "-test.run=^TestPrivileged$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+ns)
	out, err := cmd.CombinedOutput()
	t.Logf("child in a private mount namespace:\n%s", out)
	if err != nil {
		t.Fatalf("child failed: %v", err)
	}
	for _, sub := range []string{"full_disk/backup_already_taken", "full_disk/no_backup_yet", "bind-mounted_resolv.conf"} {
		if !strings.Contains(string(out), "--- PASS: TestPrivileged/"+sub) {
			t.Errorf("child did not pass TestPrivileged/%s", sub)
		}
	}
}

func privilegedChild(t *testing.T, parentNS string) {
	ns, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		t.Fatal(err)
	}
	if ns == parentNS {
		t.Fatalf("still in the parent's mount namespace %s: refusing to mount anything", ns)
	}

	t.Run("full disk", func(t *testing.T) {
		for _, tt := range []struct {
			name        string
			backupFirst bool
		}{
			{"backup already taken", true},
			{"no backup yet", false},
		} {
			t.Run(tt.name, func(t *testing.T) {
				root := t.TempDir()
				mount(t, "tmpfs", root, "tmpfs", 0, "size=64k,mode=0755")
				s := &Store{Root: root, Targets: nodeTargets()}
				const orig = "nameserver 169.254.25.10\n"
				mkfile(t, s, "/etc/resolv.conf", orig, 0o644)
				if tt.backupFirst {
					if err := s.Backup("/etc/resolv.conf"); err != nil {
						t.Fatal(err)
					}
				}
				before := stateOf(t, s, "/etc/resolv.conf")
				entriesBefore, err := s.Backups()
				if err != nil {
					t.Fatal(err)
				}
				filler := fill(t, root)

				data := []byte(strings.Repeat("# nodedns\n", 100) + "nameserver 10.0.0.2\n")
				_, err = s.Write("/etc/resolv.conf", data, 0o644)
				t.Logf("Write on a full disk: %v", err)
				if !errors.Is(err, syscall.ENOSPC) || !strings.HasPrefix(err.Error(), "write /etc/resolv.conf: ") {
					t.Fatalf("Write on a full disk = %v, want ENOSPC naming /etc/resolv.conf", err)
				}
				if diff := cmp.Diff(before, stateOf(t, s, "/etc/resolv.conf")); diff != "" {
					t.Errorf("original changed (-before +after):\n%s", diff)
				}
				assertNoTemps(t, s)
				entries, err := s.Backups()
				if err != nil {
					t.Fatalf("manifest unreadable after a full disk: %v", err)
				}
				if diff := cmp.Diff(entriesBefore, entries); diff != "" {
					t.Errorf("manifest changed by a failed Write (-before +after):\n%s", diff)
				}

				// Once there is room again, the same Write works and restore undoes it.
				if err := os.Remove(filler); err != nil {
					t.Fatal(err)
				}
				if _, err := s.Write("/etc/resolv.conf", data, 0o644); err != nil {
					t.Fatalf("Write after freeing space: %v", err)
				}
				if _, err := s.Restore(nil); err != nil {
					t.Fatalf("Restore: %v", err)
				}
				if diff := cmp.Diff(before, stateOf(t, s, "/etc/resolv.conf")); diff != "" {
					t.Errorf("after Restore (-before +after):\n%s", diff)
				}
			})
		}
	})

	t.Run("bind-mounted resolv.conf", func(t *testing.T) {
		root := t.TempDir()
		s := &Store{Root: root, Targets: nodeTargets()}
		mkfile(t, s, "/etc/resolv.conf", "the file under the mount\n", 0o644)
		src := filepath.Join(t.TempDir(), "resolv.conf")
		const orig = "nameserver 169.254.25.10\n"
		if err := os.WriteFile(src, []byte(orig), 0o644); err != nil {
			t.Fatal(err)
		}
		mount(t, src, s.host("/etc/resolv.conf"), "", syscall.MS_BIND, "")
		before := stateOf(t, s, "/etc/resolv.conf")

		got, err := s.Write("/etc/resolv.conf", []byte("nameserver 10.0.0.2\n"), 0o644)
		if err != nil {
			t.Fatalf("Write over a bind mount: %v", err)
		}
		if diff := cmp.Diff(WriteResult{Path: "/etc/resolv.conf", InPlace: true}, got); diff != "" {
			t.Errorf("Write result (-want +got):\n%s", diff)
		}
		if b, err := os.ReadFile(src); err != nil || string(b) != "nameserver 10.0.0.2\n" {
			t.Errorf("bind source = %q, %v; want the new content written through the mount", b, err)
		}
		assertNoTemps(t, s)
		if _, err := s.Restore(nil); err != nil {
			t.Fatalf("Restore over a bind mount: %v", err)
		}
		if diff := cmp.Diff(before, stateOf(t, s, "/etc/resolv.conf")); diff != "" {
			t.Errorf("after Restore (-before +after):\n%s", diff)
		}
	})
}

func mount(t *testing.T, source, target, fstype string, flags uintptr, data string) {
	t.Helper()
	if err := syscall.Mount(source, target, fstype, flags, data); err != nil {
		t.Fatalf("mount %s on %s: %v", source, target, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(target, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", target, err)
		}
	})
}

// fill writes a file until the filesystem at dir answers ENOSPC, down to the last byte.
func fill(t *testing.T, dir string) string {
	t.Helper()
	name := filepath.Join(dir, "filler")
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, chunk := range []int{4096, 1} {
		buf := make([]byte, chunk)
		for {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("filling %s: %v", dir, err)
				}
				break
			}
		}
	}
	// Prove it is full: a new one-byte file cannot be written.
	if err := os.WriteFile(filepath.Join(dir, "probe"), []byte("x"), 0o600); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("disk not full after filling: %v", err)
	}
	os.Remove(filepath.Join(dir, "probe"))
	if fi, err := os.Stat(name); err == nil {
		t.Logf("filled %s with %d bytes", dir, fi.Size())
	}
	return name
}
