package nodefs

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nodedns/nodedns/internal/testutil/noopenat2"
)

// bothWays runs f with confined opens through openat2 and again through the component walk (in a
// child process where the kernel answers openat2 with ENOSYS, as before Linux 5.6), each with the
// root opened per open and held open (HoldRoot, as the daemon does).
func bothWays(t *testing.T, f func(t *testing.T)) {
	for _, held := range []bool{false, true} {
		name := ""
		if held {
			name = "held root/"
		}
		t.Run(name+"openat2", func(t *testing.T) {
			if !noopenat2.Available() {
				t.Skip("openat2 is not available on this kernel")
			}
			holdTestRoots = held
			defer func() { holdTestRoots = false }()
			f(t)
			if openat2State.Load() != 1 {
				t.Errorf("openat2 state %d after the opens, want 1 (openat2 used)", openat2State.Load())
			}
		})
		t.Run(name+"walk", func(t *testing.T) {
			if !noopenat2.Run(t, unix.ENOSYS) {
				return // run in a child process where openat2 fails with ENOSYS
			}
			holdTestRoots = held
			defer func() { holdTestRoots = false }()
			f(t)
			if openat2State.Load() != 2 {
				t.Errorf("openat2 state %d after the opens, want 2 (the walk)", openat2State.Load())
			}
		})
	}
}

// TestHoldRoot: a held root serves the confined opens under it and is closed when the last hold
// is released; holds nest.
func TestHoldRoot(t *testing.T) {
	s := &Tree{Root: t.TempDir()}
	mkfile(t, s, "/etc/resolv.conf", "nameserver 10.0.0.2\n", 0o644)
	r1, err := HoldRoot(s.Root)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := HoldRoot(s.Root + "/")
	if err != nil {
		t.Fatal(err)
	}
	start := lookupCalls.Load()
	if data, err := s.ReadFile("/etc/resolv.conf", Config); err != nil || string(data) != "nameserver 10.0.0.2\n" {
		t.Fatalf("read under a held root: %q, %v", data, err)
	}
	if n := lookupCalls.Load() - start; n != 1 {
		t.Errorf("a read under a held root made %d lookup calls, want 1 (openat2 from the held descriptor)", n)
	}
	r1()
	r1() // a release counts once
	heldRoots.RLock()
	h := heldRoots.m[filepath.Clean(s.Root)]
	heldRoots.RUnlock()
	if h == nil {
		t.Fatal("the root was let go while a hold remained")
	}
	r2()
	heldRoots.RLock()
	_, still := heldRoots.m[filepath.Clean(s.Root)]
	heldRoots.RUnlock()
	if still {
		t.Error("the root is still held after every hold was released")
	}
	if data, err := s.ReadFile("/etc/resolv.conf", Config); err != nil || len(data) == 0 {
		t.Fatalf("read after the release: %q, %v", data, err)
	}
}

// TestRootEscapesBothWays runs the --root escape tests (symlinks that point out of the root,
// absolute and through "..", loops, non-directories) with openat2 and with the fallback walk.
func TestRootEscapesBothWays(t *testing.T) {
	bothWays(t, func(t *testing.T) {
		TestReadFile(t)
		TestResolveLink(t)
		TestDropIns(t)
		TestIfNames(t)
	})
}

// TestConfinedOpen opens through symlinks that try to leave the root in every way: each lands
// inside it, on the file of the same name under the root, or fails.
func TestConfinedOpen(t *testing.T) {
	bothWays(t, func(t *testing.T) {
		outside := t.TempDir()
		secret := filepath.Join(outside, "secret")
		if err := os.WriteFile(secret, []byte(sentinel), 0o600); err != nil {
			t.Fatal(err)
		}
		s := newTree(t)
		mkfile(t, s, secret, "inside\n", 0o644) // the same path under the root
		mklink(t, s, "/etc/abs", secret)
		mklink(t, s, "/etc/dots", "../../../../../../.."+secret)
		mklink(t, s, "/etc/dir", "/")
		mklink(t, s, "/etc/proc", "/proc/self/root"+secret)
		for _, p := range []string{"/etc/abs", "/etc/dots", "/etc/dir" + secret} {
			f, err := openRoot(s.Root, s.Host(p), os.O_RDONLY, 0)
			if err != nil {
				t.Fatalf("open %s: %v", p, err)
			}
			b := make([]byte, 64)
			n, _ := f.Read(b)
			f.Close()
			if string(b[:n]) != "inside\n" {
				t.Errorf("open %s read %q, want the file inside the root", p, b[:n])
			}
		}
		if f, err := openRoot(s.Root, s.Host("/etc/proc"), os.O_RDONLY, 0); err == nil {
			f.Close()
			t.Errorf("open through /proc/self/root: no error, want it refused or missing inside the root")
		}
		if f, err := openRoot(s.Root, s.Host("/etc/abs"), os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o644); err == nil {
			f.Close()
			t.Error("O_EXCL through a symlink succeeded")
		}
	})
}

// TestWalkWhereOpenat2IsRefused: a seccomp profile that answers openat2 with EPERM (older Docker
// profiles do, where newer ones and kernels before 5.6 answer ENOSYS) makes the confined opens take
// the walk too, and the walk still keeps a symlink that leaves the root inside it.
func TestWalkWhereOpenat2IsRefused(t *testing.T) {
	if !noopenat2.Run(t, unix.EPERM) {
		return // run in a child process where openat2 fails with EPERM
	}
	s := newTree(t)
	mkfile(t, s, "/etc/hosts", "inside\n", 0o644)
	mklink(t, s, "/etc/abs", "/etc/hosts")
	mklink(t, s, "/etc/dots", "../../../../etc/hosts")
	for _, p := range []string{"/etc/hosts", "/etc/abs", "/etc/dots"} {
		if data, err := s.ReadFile(p, Config); err != nil || string(data) != "inside\n" {
			t.Errorf("read %s = %q, %v; want the file inside the root", p, data, err)
		}
	}
	if openat2State.Load() != 2 {
		t.Errorf("openat2 state %d after the reads, want 2 (the walk)", openat2State.Load())
	}
}

const sentinel = "SENTINEL outside the root\n"

// TestRootFlipRace: under --root, /etc/resolv.conf flips between a regular file and a symlink
// pointing at a 0600 file outside the root, many times, while it is read. Resolution and the open
// are one confined step, so no read ever returns the outside file's bytes. (The same loop through
// a path-based open, resolve then open, read the outside file in 14 of 20,000 reads.)
func TestRootFlipRace(t *testing.T) {
	bothWays(t, func(t *testing.T) {
		outside := t.TempDir()
		secret := filepath.Join(outside, "secret")
		if err := os.WriteFile(secret, []byte(sentinel), 0o600); err != nil {
			t.Fatal(err)
		}
		s := newTree(t)
		mkfile(t, s, "/etc/resolv.conf", "nameserver 10.0.0.1\n", 0o644)
		mkfile(t, s, "/etc/.file", "nameserver 10.0.0.1\n", 0o644)
		etc := s.Host("/etc")
		var stop atomic.Bool
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				name := filepath.Join(etc, "resolv.conf")
				if i%2 == 0 {
					// Replaced in place: removed, a symlink leaving the root, removed, a file.
					os.Remove(name)
					os.Symlink(secret, name)
					os.Remove(name)
					os.WriteFile(name, []byte("nameserver 10.0.0.1\n"), 0o644)
					continue
				}
				// Renamed over: a symlink and a regular file take turns at the name.
				tmp := filepath.Join(etc, ".flip")
				os.Remove(tmp)
				if i%4 == 1 {
					os.Symlink(secret, tmp)
				} else {
					os.Link(filepath.Join(etc, ".file"), tmp)
				}
				os.Rename(tmp, name)
			}
		}()
		var leaks, reads, ok int
		for i := 0; i < 10000; i++ {
			data, err := s.ReadFile("/etc/resolv.conf", Config)
			reads++
			if bytes.Contains(data, []byte("SENTINEL")) || err != nil && strings.Contains(err.Error(), "SENTINEL") {
				leaks++
			}
			if err == nil {
				ok++
			}
			if d, err := s.Stat("/etc/resolv.conf"); err == nil && d.Mode().Perm() == 0o600 {
				leaks++ // the outside file's metadata
			}
		}
		stop.Store(true)
		wg.Wait()
		if leaks > 0 {
			t.Errorf("%d of %d reads showed the outside file", leaks, reads)
		}
		if ok == 0 {
			t.Errorf("no read of %d succeeded: the race was not exercised", reads)
		}
		t.Logf("%d reads, %d read the file inside the root", reads, ok)
	})
}
