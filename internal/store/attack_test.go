package store

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/internal/testutil/noopenat2"
	"github.com/nodedns/nodedns/internal/testutil/tied"
)

// attackerID is the unprivileged uid and gid the attack tests run their loop as. No passwd entry
// is needed (the kernel checks numbers; nothing looks a name up), so no user is added to the
// machine: a uid nobody is given, apart from root's 65534 nobody that other tests use.
const attackerID = 64123

// attackerEnv marks the re-executed test binary that runs the attacker loop; its value is the
// directory attacked, attackerSentinel the file the loop points its symlinks at.
const (
	attackerEnv      = "NODEDNS_ATTACKER_DIR"
	attackerSentinel = "NODEDNS_ATTACKER_SENTINEL"
)

// sentinelBytes is what the file outside the managed set holds: no output may ever show it.
const sentinelBytes = "SENTINEL-root:$6$secret-hash:19000:0:99999:7:::\n"

// TestAttackerLoop is the attacker: run by TestForeignDirectoryAttack as an unprivileged user, it
// plants symlinks to the sentinel at every name nodedns could write in the directory it owns and
// renames symlinks over every temp file nodedns creates there, in a tight loop until killed.
func TestAttackerLoop(t *testing.T) {
	dir := os.Getenv(attackerEnv)
	if dir == "" {
		t.Skip("the attacker loop of TestForeignDirectoryAttack")
	}
	sentinel := os.Getenv(attackerSentinel)
	targets := []string{"nodedns_check.prom", "nodedns.prom", "nodedns"}
	for i := 0; ; i++ {
		link := filepath.Join(dir, ".link-"+strconv.Itoa(i%2))
		_ = os.Remove(link)
		if err := os.Symlink(sentinel, link); err != nil {
			continue
		}
		es, _ := os.ReadDir(dir)
		moved := false
		for _, e := range es {
			if nodefs.IsTemp(e.Name()) {
				_ = os.Rename(link, filepath.Join(dir, e.Name()))
				moved = true
				break
			}
		}
		if !moved {
			_ = os.Rename(link, filepath.Join(dir, targets[i%len(targets)]))
		}
	}
}

// attackerBinary is a copy of this test binary the attacker user may run (go test builds it in a
// directory only root can enter).
func attackerBinary(t *testing.T) string {
	t.Helper()
	dir := worldRoot(t)
	data, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "attacker.test")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// hasSymlink reports whether dir holds a symlink.
func hasSymlink(dir string) bool {
	es, _ := os.ReadDir(dir)
	for _, e := range es {
		if e.Type()&fs.ModeSymlink != 0 {
			return true
		}
	}
	return false
}

// worldRoot is a node root every user can traverse (t.TempDir is root's only).
func worldRoot(t *testing.T) string {
	t.Helper()
	root, err := os.MkdirTemp("", "nodedns-attack-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	return root
}

// tree lists every path under dir (but skip) with its lstat mode, owner and, for files, content.
func tree(t *testing.T, dir, skip string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == skip {
			return filepath.SkipDir
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		v := fi.Mode().String() + " " + strconv.Itoa(int(st.Uid)) + ":" + strconv.Itoa(int(st.Gid))
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += " " + string(b)
		}
		m[p] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestForeignDirectoryAttack: a real unprivileged user owns the directory nodedns writes into (a
// node_exporter textfile directory, a dhclient hook directory) and, while nodedns writes there, plants
// symlinks to a root-only file at the target and renames symlinks over nodedns's temp files in a
// tight loop. Every write is refused with a ForeignDirError naming the directory; no file outside
// the attacker's directory changes (content, mode or owner), the sentinel keeps its mode, and no
// byte of it shows in any error.
func TestForeignDirectoryAttack(t *testing.T) {
	if os.Getenv(privilegedEnv) != "1" || os.Geteuid() != 0 {
		t.Skip("runs an attacker loop as another user: needs root and " + privilegedEnv + "=1")
	}
	uid, gid := attackerID, attackerID
	for _, target := range []string{"/var/lib/node_exporter/textfile_collector/nodedns_check.prom", node.DhclientHook} {
		t.Run(filepath.Base(filepath.Dir(target)), func(t *testing.T) {
			root := worldRoot(t)
			s := &Store{Root: root, Targets: nodeTargets().Add(target)}
			dir := filepath.Join(root, filepath.Dir(target))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(dir, uid, gid); err != nil {
				t.Fatal(err)
			}
			// The sentinel: root's, 0600, in the root and outside the attacker's directory.
			sentinel := filepath.Join(root, "etc/shadow")
			if err := os.MkdirAll(filepath.Dir(sentinel), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(sentinel, []byte(sentinelBytes), 0o600); err != nil {
				t.Fatal(err)
			}
			// Make the state directory first: the attack is on the target, not the state.
			l, err := s.Lock(0)
			if err != nil {
				t.Fatal(err)
			}
			l.Unlock()
			before := tree(t, root, dir)

			cmd := exec.Command(attackerBinary(t), "-test.run=^TestAttackerLoop$", "-test.count=1")
			cmd.Env = append(os.Environ(), attackerEnv+"="+dir, attackerSentinel+"="+sentinel)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
			// The loop runs until killed: tied, it dies with this test however the test ends.
			if err := tied.Start(cmd); err != nil {
				t.Fatal(err)
			}
			defer func() {
				cmd.Process.Kill()
				cmd.Wait()
			}()
			// The loop has begun once it planted its first symlink (as the attacker: the directory
			// is writable by no one else).
			for deadline := time.Now().Add(30 * time.Second); !hasSymlink(dir); time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the attacker loop (uid %d) planted nothing in 30s", uid)
				}
			}

			for i := 0; i < 300; i++ {
				_, err := s.Write(target, []byte("nodedns_check_status 1\n"), 0o644)
				var fe *ForeignDirError
				if !errors.As(err, &fe) {
					t.Fatalf("write %d into a directory uid %d owns = %v, want a ForeignDirError", i, uid, err)
				}
				if fe.Dir != filepath.Dir(target) || fe.UID != uid {
					t.Fatalf("refusal names %s (uid %d), want %s (uid %d)", fe.Dir, fe.UID, filepath.Dir(target), uid)
				}
				if strings.Contains(err.Error(), "SENTINEL") || !strings.Contains(err.Error(), filepath.Dir(target)) {
					t.Fatalf("refusal %q: must name the directory and show no byte of the sentinel", err)
				}
			}
			cmd.Process.Kill()
			cmd.Wait()
			if diff := cmp.Diff(before, tree(t, root, dir)); diff != "" {
				t.Errorf("files outside the attacker's directory changed (-before +after):\n%s", diff)
			}
			fi, err := os.Lstat(sentinel)
			if err != nil || fi.Mode() != 0o600 {
				t.Errorf("sentinel: %v, %v; want a 0600 file", fi, err)
			}
			if b, _ := os.ReadFile(sentinel); !bytes.Equal(b, []byte(sentinelBytes)) {
				t.Errorf("sentinel changed: %q", b)
			}
		})
	}
}

// TestForeignDirectoriesRefused: every directory on the way to a target must be root's (or the
// running user's) and writable by nobody else; else the change is refused, naming the directory,
// its owner and mode, and nothing is written.
func TestForeignDirectoriesRefused(t *testing.T) {
	needRoot(t)
	uid, gid := 65534, 65534
	tests := []struct {
		name  string
		setup func(t *testing.T, s *Store)
		dir   string
	}{
		{"owned by another user", func(t *testing.T, s *Store) {
			mkdirMode(t, s, "/var/lib/textfile", 0o755)
			chown(t, s, "/var/lib/textfile", uid, gid)
		}, "/var/lib/textfile"},
		{"writable by its group", func(t *testing.T, s *Store) { mkdirMode(t, s, "/var/lib/textfile", 0o775) }, "/var/lib/textfile"},
		{"sticky and writable by all", func(t *testing.T, s *Store) { mkdirMode(t, s, "/var/lib/textfile", 0o777|fs.ModeSticky) }, "/var/lib/textfile"},
		{"a parent owned by another user", func(t *testing.T, s *Store) {
			mkdirMode(t, s, "/var/lib/textfile", 0o755)
			chown(t, s, "/var/lib", uid, gid)
		}, "/var/lib"},
		{"a symlink's target directory", func(t *testing.T, s *Store) {
			mkdirMode(t, s, "/srv/prom", 0o755)
			chown(t, s, "/srv/prom", uid, gid)
			mkdirMode(t, s, "/var/lib", 0o755)
			mklink(t, s, "/var/lib/textfile", "../../srv/prom")
		}, "/srv/prom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			tt.setup(t, s)
			_, err := s.Write("/var/lib/textfile/nodedns.prom", []byte("x 1\n"), 0o644)
			var fe *ForeignDirError
			if !errors.As(err, &fe) || fe.Dir != tt.dir {
				t.Fatalf("Write = %v, want a ForeignDirError naming %s", err, tt.dir)
			}
			if !strings.Contains(err.Error(), tt.dir) || !strings.Contains(err.Error(), "mode ") {
				t.Errorf("error %q does not name the directory and its mode", err)
			}
			if es, _ := os.ReadDir(s.host("/var/lib/textfile")); len(es) != 0 {
				t.Errorf("something was written: %v", es)
			}
			// Removing a file there is refused the same way, and leaves it.
			mkfile(t, s, "/var/lib/textfile/nodedns.prom", "x 0\n", 0o644)
			if err := s.Remove("/var/lib/textfile/nodedns.prom"); !errors.As(err, &fe) {
				t.Errorf("Remove = %v, want a ForeignDirError", err)
			}
			if readNode(t, s, "/var/lib/textfile/nodedns.prom") != "x 0\n" {
				t.Error("Remove in a foreign directory changed the file")
			}
		})
	}
	// The same directory, root's and 0755, is fine.
	s := newStore(t)
	mkdirMode(t, s, "/var/lib/textfile", 0o755)
	if _, err := s.Write("/var/lib/textfile/nodedns.prom", []byte("x 1\n"), 0o644); err != nil {
		t.Fatalf("Write into root's 0755 directory: %v", err)
	}
}

// TestSymlinkedManagedDirectory: a managed directory that is root's own symlink
// (/etc/dhcp/dhclient-enter-hooks.d -> ../../data/hooks) is followed on apply, and restore finds
// the file there and puts the node back exactly.
func TestSymlinkedManagedDirectory(t *testing.T) {
	s := &Store{Root: t.TempDir(), now: func() time.Time { return testTime }, Targets: nodeTargets()}
	mkdirMode(t, s, "/data/hooks", 0o755)
	mkfile(t, s, "/data/hooks/other", "# someone else's hook\n", 0o644)
	mklink(t, s, "/etc/dhcp/dhclient-enter-hooks.d", "../../data/hooks")
	before := tree(t, s.Root, filepath.Join(s.Root, "var"))
	res, err := s.Write(node.DhclientHook, []byte("# nodedns hook\n"), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if res.Path != "/data/hooks/nodedns" || readNode(t, s, "/data/hooks/nodedns") != "# nodedns hook\n" {
		t.Fatalf("Write = %+v; want the hook written through the link to /data/hooks/nodedns", res)
	}
	if _, err := s.Restore(nil); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if diff := cmp.Diff(before, tree(t, s.Root, filepath.Join(s.Root, "var"))); diff != "" {
		t.Errorf("restore is not exact (-before +after):\n%s", diff)
	}
}

// TestRootWriteFlipRace: under --root, /etc/resolv.conf flips between a regular file and a symlink
// to a 0600 file outside the root while nodedns writes it, backs it up and restores it, many times.
// No byte of the outside file appears anywhere under the root (targets, backup copies, manifest),
// the outside file keeps its bytes and mode, and nothing is created outside the root.
func TestRootWriteFlipRace(t *testing.T) {
	for _, walk := range []bool{false, true} {
		name := "openat2"
		if walk {
			name = "walk"
		}
		t.Run(name, func(t *testing.T) {
			switch {
			case walk && !noopenat2.Run(t, syscall.ENOSYS):
				return // run in a child process where openat2 fails with ENOSYS: nodefs walks
			case !walk && !noopenat2.Available():
				t.Skip("no openat2 here")
			}
			outside := t.TempDir()
			secret := filepath.Join(outside, "secret")
			if err := os.WriteFile(secret, []byte(sentinelBytes), 0o600); err != nil {
				t.Fatal(err)
			}
			s := &Store{Root: t.TempDir(), Targets: nodeTargets()}
			mkfile(t, s, "/etc/resolv.conf", "nameserver 169.254.25.10\n", 0o644)
			etc := s.host("/etc")
			var stop atomic.Bool
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				// The flipper never writes through the name: a restore may have put a symlink
				// there (the backup of a moment it was one), and following it is what nodedns
				// must not do, not what the test may do.
				name := filepath.Join(etc, "resolv.conf")
				file, link := filepath.Join(etc, ".flip-file"), filepath.Join(etc, ".flip-link")
				for !stop.Load() {
					os.Remove(name)
					os.Remove(link)
					os.Symlink(secret, link)
					os.Rename(link, name)
					os.Remove(name)
					os.WriteFile(file, []byte("nameserver 169.254.25.10\n"), 0o644)
					os.Rename(file, name)
				}
			}()
			for i := 0; i < 400; i++ {
				_, _ = s.Write("/etc/resolv.conf", []byte("nameserver 10.0.0."+strconv.Itoa(i%200+1)+"\n"), 0o644)
				if i%50 == 49 {
					_, _ = s.Restore(nil)
				}
			}
			stop.Store(true)
			wg.Wait()
			err := filepath.WalkDir(s.Root, func(p string, d fs.DirEntry, err error) error {
				if err != nil || !d.Type().IsRegular() {
					return err
				}
				if b, _ := os.ReadFile(p); bytes.Contains(b, []byte("SENTINEL")) {
					t.Errorf("%s holds the outside file's bytes", p)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			fi, err := os.Lstat(secret)
			if b, _ := os.ReadFile(secret); err != nil || fi.Mode() != 0o600 || string(b) != sentinelBytes {
				t.Errorf("the outside file changed: %v %v %q", fi, err, b)
			}
			if es, _ := os.ReadDir(outside); len(es) != 1 {
				t.Errorf("files created outside the root: %v", es)
			}
		})
	}
}
