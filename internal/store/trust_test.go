package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/internal/store/manifest"
	"github.com/nodedns/nodedns/internal/testutil/faultfs"
)

// hostile builds a node whose state another user could have written, or that points out of the
// root, and says what nodedns must answer.
type hostile struct {
	name  string
	root  bool // needs root to give a file away
	setup func(t *testing.T, s *Store, outside string)
	// want is in the error of every operation on the state (Write, Restore, Backups).
	want []string
}

func TestUntrustedStateIsRefused(t *testing.T) {
	const backup = "/var/lib/nodedns/backup"
	tests := []hostile{
		{
			name:  "world-writable backup directory",
			setup: func(t *testing.T, s *Store, _ string) { mkdirMode(t, s, backup, 0o777) },
			want:  []string{"refusing untrusted state " + backup + ": it is writable by others", "drwxrwxrwx (0777)", "chmod 0700 " + backup},
		},
		{
			name:  "group-writable state directory",
			setup: func(t *testing.T, s *Store, _ string) { mkdirMode(t, s, "/var/lib/nodedns", 0o775) },
			want:  []string{"refusing untrusted state /var/lib/nodedns: it is writable by its group", "chmod 0755 /var/lib/nodedns"},
		},
		{
			name: "backup directory owned by another user",
			root: true,
			setup: func(t *testing.T, s *Store, _ string) {
				mkdirMode(t, s, backup, 0o700)
				chown(t, s, backup, 1000, 1000)
			},
			want: []string{"refusing untrusted state " + backup + ": it is owned by uid 1000, neither root nor uid 0", "chown 0:0 " + backup},
		},
		{
			name: "backup directory a symlink out of the root",
			setup: func(t *testing.T, s *Store, outside string) {
				mkdirMode(t, s, "/var/lib/nodedns", 0o755)
				mklink(t, s, backup, outside)
			},
			want: []string{"refusing untrusted state " + backup + ": it is a symlink", "rm " + backup},
		},
		{
			name: "state directory a symlink inside the root",
			setup: func(t *testing.T, s *Store, _ string) {
				mkdirMode(t, s, "/srv/state", 0o755)
				mklink(t, s, "/var/lib/nodedns", "/srv/state")
			},
			want: []string{"refusing untrusted state /var/lib/nodedns: it is a symlink"},
		},
		{
			name: "lock file a symlink out of the root",
			setup: func(t *testing.T, s *Store, outside string) {
				mkdirMode(t, s, backup, 0o700)
				mklink(t, s, backup+"/.lock", filepath.Join(outside, "created-by-nodedns"))
			},
			want: []string{"refusing untrusted state " + backup + "/.lock: it is a symlink"},
		},
		{
			name: "world-writable lock file",
			setup: func(t *testing.T, s *Store, _ string) {
				mkdirMode(t, s, backup, 0o700)
				mkfile(t, s, backup+"/.lock", "", 0o666)
			},
			want: []string{"refusing untrusted state " + backup + "/.lock: it is writable by others"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.root {
				needRoot(t)
			}
			s := newStore(t)
			outside := t.TempDir()
			mkfile(t, s, "/etc/resolv.conf", "nameserver 169.254.25.10\n", 0o644)
			tt.setup(t, s, outside)
			before := snapshot(t, s, "/etc/resolv.conf")

			_, werr := s.Write("/etc/resolv.conf", []byte("nameserver 10.0.0.2\n"), 0o644)
			_, rerr := s.Restore(nil)
			_, lerr := s.Lock(time.Second)
			for op, err := range map[string]error{"Write": werr, "Restore": rerr, "Lock": lerr} {
				var ue *UntrustedError
				if !errors.As(err, &ue) {
					t.Errorf("%s error = %v, want an UntrustedError", op, err)
					continue
				}
				for _, w := range tt.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s error = %v\nwant it to say %q", op, err, w)
					}
				}
				if strings.Contains(err.Error(), s.Root) {
					t.Errorf("%s error names the host path: %v", op, err)
				}
			}
			if diff := cmp.Diff(before, snapshot(t, s, "/etc/resolv.conf")); diff != "" {
				t.Errorf("refused state changed the node (-before +after):\n%s", diff)
			}
			if es, _ := os.ReadDir(outside); len(es) > 0 {
				t.Errorf("nodedns created %d file(s) outside the root: %v", len(es), es)
			}
		})
	}
}

func mkdirMode(t *testing.T, s *Store, node string, mode fs.FileMode) {
	t.Helper()
	hp := s.host(node)
	if err := os.MkdirAll(hp, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(hp, mode); err != nil {
		t.Fatal(err)
	}
}

// plant writes a manifest (and the copies it names) as nodedns would, bypassing Write: what an
// attacker, a bug or an older version could leave in a trusted backup directory.
func plant(t *testing.T, s *Store, entries []Entry, copies ...string) {
	t.Helper()
	mkdirMode(t, s, "/var/lib/nodedns/backup", 0o700)
	data, err := manifest.Marshal(entries)
	if err != nil {
		t.Fatal(err)
	}
	mkfile(t, s, "/var/lib/nodedns/backup/manifest.json", string(data), 0o600)
	for _, c := range copies {
		mkfile(t, s, "/var/lib/nodedns/backup/"+sum(c), c, 0o600)
	}
}

func TestRestoreRefusesPlantedEntries(t *testing.T) {
	const evil = "#!/bin/sh\nid > /tmp/owned\n"
	tests := []struct {
		name    string
		entries []Entry
		copies  []string
		// untouched are node paths restore must leave exactly as they are.
		untouched []string
		want      string
	}{
		{
			name:      "a setuid hook",
			entries:   []Entry{{Path: "/etc/dhcp/dhclient-enter-hooks.d/nodedns", Kind: KindFile, Mode: 0o755 | fs.ModeSetuid, SHA256: sum(evil), Time: testTime}},
			copies:    []string{evil},
			untouched: []string{"/etc/dhcp/dhclient-enter-hooks.d/nodedns"},
			want:      "restore /etc/dhcp/dhclient-enter-hooks.d/nodedns: the backup records mode urwxr-xr-x (4755) with setuid, setgid or sticky bits, which nodedns never sets",
		},
		{
			name:      "a sticky resolv.conf",
			entries:   []Entry{{Path: "/etc/resolv.conf", Kind: KindFile, Mode: 0o644 | fs.ModeSticky, SHA256: sum("nameserver 10.0.0.9\n"), Time: testTime}},
			copies:    []string{"nameserver 10.0.0.9\n"},
			untouched: []string{"/etc/resolv.conf"},
			want:      "restore /etc/resolv.conf: the backup records mode trw-r--r-- (1644)",
		},
		{
			name:      "a program nodedns does not manage",
			entries:   []Entry{{Path: "/usr/local/bin/backdoor", Kind: KindFile, Mode: 0o755, SHA256: sum(evil), Time: testTime}},
			copies:    []string{evil},
			untouched: []string{"/usr/local/bin/backdoor"},
			want:      "restore /usr/local/bin/backdoor: not a file nodedns manages",
		},
		{
			name:      "a file to delete that nodedns does not manage",
			entries:   []Entry{{Path: "/etc/passwd", Kind: KindAbsent, Time: testTime}},
			untouched: []string{"/etc/passwd"},
			want:      "restore /etc/passwd: not a file nodedns manages",
		},
		{
			name:      "its own manifest",
			entries:   []Entry{{Path: "/var/lib/nodedns/backup/manifest.json", Kind: KindAbsent, Time: testTime}},
			untouched: []string{"/var/lib/nodedns/backup/manifest.json"},
			want:      "restore /var/lib/nodedns/backup/manifest.json: not a file nodedns manages",
		},
		{
			name:      "a directory nodedns did not create a file in",
			entries:   []Entry{{Path: "/etc", Kind: KindAbsentDir, Time: testTime}},
			untouched: []string{"/etc"},
			want:      "restore /etc: not a file nodedns manages",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Store{Root: t.TempDir(), now: func() time.Time { return testTime }, Targets: nodeTargets()}
			mkfile(t, s, "/etc/resolv.conf", "nameserver 10.0.0.2\n", 0o644)
			mkfile(t, s, "/etc/passwd", "root:x:0:0::/root:/bin/sh\n", 0o644)
			mkdirMode(t, s, "/etc/dhcp/dhclient-enter-hooks.d", 0o755)
			plant(t, s, tt.entries, tt.copies...)
			before := snapshot(t, s, tt.untouched...)

			res, err := s.Restore(nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Restore = %v, %v; want an error saying %q", res, err, tt.want)
			}
			if diff := cmp.Diff(before, snapshot(t, s, tt.untouched...)); diff != "" {
				t.Errorf("Restore changed what it refused (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(tt.entries, mustBackups(t, s)); diff != "" {
				t.Errorf("the refused entry must stay in the manifest (-want +got):\n%s", diff)
			}
			for _, p := range setuidFiles(t, s.Root) {
				t.Errorf("restore left a setuid or setgid file: %s", p)
			}
		})
	}
}

func mustBackups(t *testing.T, s *Store) []Entry {
	t.Helper()
	e, err := s.Backups()
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func setuidFiles(t *testing.T, root string) []string {
	t.Helper()
	var found []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if fi, err := d.Info(); err == nil && fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
			found = append(found, p)
		}
		return nil
	})
	return found
}

// TestRestoreFollowsTheLinkedTarget: the final target of a symlinked /etc/resolv.conf is a target,
// where the link points now and where it pointed when it was backed up.
func TestRestoreFollowsTheLinkedTarget(t *testing.T) {
	s := &Store{Root: t.TempDir(), now: func() time.Time { return testTime }, Targets: nodeTargets()}
	mkfile(t, s, "/etc/resolvconf/run/resolv.conf", "nameserver 169.254.25.10\n", 0o644)
	mklink(t, s, "/etc/resolv.conf", "resolvconf/run/resolv.conf")
	if _, err := s.Write("/etc/resolv.conf", []byte("nameserver 10.0.0.2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Someone points the link elsewhere: the recorded target is still restored, the link too.
	if err := os.Remove(s.host("/etc/resolv.conf")); err != nil {
		t.Fatal(err)
	}
	mklink(t, s, "/etc/resolv.conf", "/elsewhere")
	res, err := s.Restore(nil)
	if err != nil {
		t.Fatalf("Restore: %v", err)
	}
	want := []RestoreResult{
		{Path: "/etc/resolvconf/run/resolv.conf", Action: ActionRestored},
		{Path: "/etc/resolv.conf", Action: ActionRestored},
	}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := readNode(t, s, "/etc/resolvconf/run/resolv.conf"); got != "nameserver 169.254.25.10\n" {
		t.Errorf("target = %q, want the original", got)
	}
}

func TestRestoreKeepsANonEmptyCreatedDirectory(t *testing.T) {
	s := newStore(t)
	mkdirMode(t, s, "/etc", 0o755)
	if _, err := s.Write("/etc/systemd/resolved.conf.d/zz-nodedns.conf", []byte("[Resolve]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mkfile(t, s, "/etc/systemd/resolved.conf.d/admin.conf", "[Resolve]\nDNSSEC=no\n", 0o644)
	res, err := s.Restore(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []RestoreResult{
		{Path: "/etc/systemd/resolved.conf.d/zz-nodedns.conf", Action: ActionRemoved},
		{Path: "/etc/systemd/resolved.conf.d", Action: ActionKept, Reason: "nodedns created this directory, but it is not empty now: left as it is"},
		{Path: "/etc/systemd", Action: ActionKept, Reason: "nodedns created this directory, but it is not empty now: left as it is"},
	}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := readNode(t, s, "/etc/systemd/resolved.conf.d/admin.conf"); got == "" {
		t.Error("the admin's file is gone")
	}
	if e := mustBackups(t, s); len(e) != 0 {
		t.Errorf("manifest after restore = %+v, want empty", e)
	}
}

func TestErrorsNameNodePaths(t *testing.T) {
	s := newStore(t)
	mkdirMode(t, s, "/etc", 0o755)
	s.FS = faultfs.FS{FS: nodefs.OS(), Fail: func(op, name string) syscall.Errno {
		if op == "createtemp" && strings.HasSuffix(name, "/etc") {
			return syscall.EACCES
		}
		return 0
	}}
	_, err := s.Write("/etc/resolv.conf", []byte("nameserver 10.0.0.2\n"), 0o644)
	if err == nil || !errors.Is(err, syscall.EACCES) {
		t.Fatalf("Write = %v, want EACCES", err)
	}
	if strings.Contains(err.Error(), s.Root) {
		t.Errorf("the error names the host path: %v", err)
	}
	if !strings.Contains(err.Error(), "/etc") {
		t.Errorf("the error does not name the node directory: %v", err)
	}
}

func TestReadState(t *testing.T) {
	s := newStore(t)
	const p = "/var/lib/nodedns/resolved-links.json"
	mkfile(t, s, p, "{}\n", 0o600)
	if got, err := s.ReadState(p, nodefs.State); err != nil || string(got) != "{}\n" {
		t.Fatalf("ReadState = %q, %v", got, err)
	}
	if err := os.Chmod(s.host(p), 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadState(p, nodefs.State); err == nil || !strings.Contains(err.Error(), "writable by others") {
		t.Errorf("ReadState of a world-writable file = %v", err)
	}
	if err := os.Remove(s.host(p)); err != nil {
		t.Fatal(err)
	}
	mkfile(t, s, "/srv/links.json", "{}\n", 0o600)
	mklink(t, s, p, "/srv/links.json")
	if _, err := s.ReadState(p, nodefs.State); err == nil || !strings.Contains(err.Error(), "is a symlink") {
		t.Errorf("ReadState of a symlink = %v", err)
	}
	if _, err := s.ReadState("/etc/passwd", nodefs.State); err == nil {
		t.Error("ReadState read a file outside the state directory")
	}
	if _, err := s.ReadState("/var/lib/nodedns/missing.json", nodefs.State); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadState of a missing file = %v, want ErrNotExist", err)
	}
}

// TestLockNamesItsHolder: a second process waits for the state lock, bounded, then names the PID
// of the process that holds it.
func TestLockNamesItsHolder(t *testing.T) {
	root := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockHolderProcess$")
	cmd.Env = append(os.Environ(), "NODEDNS_TEST_LOCK_ROOT="+root)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("helper said %q, %v", line, err)
	}

	s := &Store{Root: root}
	_, err = s.Lock(200 * time.Millisecond)
	var le *LockedError
	if !errors.As(err, &le) {
		t.Fatalf("Lock while another process holds it = %v, want a LockedError", err)
	}
	if le.PID != cmd.Process.Pid || le.Waited != 200*time.Millisecond {
		t.Errorf("LockedError = %+v, want pid %d after 200ms", le, cmd.Process.Pid)
	}
	for _, w := range []string{fmt.Sprintf("held by nodedns process %d", cmd.Process.Pid), "/var/lib/nodedns/backup/.lock"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	if strings.Contains(err.Error(), root) {
		t.Errorf("error names the host path: %v", err)
	}
	// A wait that is called off (the daemon's SIGTERM) ends then, not when the wait runs out.
	lockCancelled(t, s)

	stdin.Close() // the helper unlocks and exits
	l, err := s.Lock(30 * time.Second)
	if err != nil {
		t.Fatalf("Lock after the holder let go: %v", err)
	}
	// Under the Lock, this process's own Store operations go ahead without waiting for it.
	if _, err := s.Write("/etc/resolv.conf", []byte("nameserver 10.0.0.2\n"), 0o644); err != nil {
		t.Fatalf("Write under this process's Lock: %v", err)
	}
	if pid := readNode(t, s, "/var/lib/nodedns/backup/.lock"); pid != fmt.Sprintf("%d\n", os.Getpid()) {
		t.Errorf("lock file holds %q while held, want this process's pid", pid)
	}
	if l.Interrupted != 0 {
		t.Errorf("Interrupted = %d after a holder that let go cleanly, want 0", l.Interrupted)
	}
	// The same inside this process, where the wait is for the in-process gate.
	lockCancelled(t, &Store{Root: root})
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	if pid := readNode(t, s, "/var/lib/nodedns/backup/.lock"); pid != "" {
		t.Errorf("lock file holds %q after a clean release, want it empty", pid)
	}
}

// lockCancelled checks that LockContext gives up when its context is cancelled while the lock is
// held elsewhere: with cancel's cause, well before its 30 s wait.
func lockCancelled(t *testing.T, s *Store) {
	t.Helper()
	stop := errors.New("stopping")
	ctx, cancel := context.WithCancelCause(context.Background())
	timer := time.AfterFunc(100*time.Millisecond, func() { cancel(stop) })
	defer timer.Stop()
	start := time.Now()
	l, err := s.LockContext(ctx, 30*time.Second)
	took := time.Since(start)
	if err == nil {
		_ = l.Unlock()
		t.Fatal("LockContext took a lock held elsewhere")
	}
	if !errors.Is(err, stop) {
		t.Errorf("LockContext cancelled = %v, want the cancel's cause", err)
	}
	if took > 10*time.Second {
		t.Errorf("LockContext returned %v after its context was cancelled at 100ms", took)
	}
}

// TestLockInterrupted: a PID left in the lock file names a holder that died holding the lock (a
// clean release empties it), so the next holder knows to sweep; after a clean release the next one
// knows it need not.
func TestLockInterrupted(t *testing.T) {
	s := newStore(t)
	l, err := s.Lock(time.Second)
	must(t, err)
	must(t, l.Unlock())
	mkfile(t, s, "/var/lib/nodedns/backup/.lock", "4242\n", 0o600) // as a holder killed mid-change leaves it
	l, err = s.Lock(time.Second)
	must(t, err)
	if l.Interrupted != 4242 {
		t.Errorf("Interrupted = %d, want the dead holder's 4242", l.Interrupted)
	}
	must(t, l.Unlock())
	l, err = s.Lock(time.Second)
	must(t, err)
	if l.Interrupted != 0 {
		t.Errorf("Interrupted = %d after a clean release, want 0", l.Interrupted)
	}
	must(t, l.Unlock())
}

// TestLockHolderProcess is TestLockNamesItsHolder's other process: it holds the lock until its
// stdin closes.
func TestLockHolderProcess(t *testing.T) {
	root := os.Getenv("NODEDNS_TEST_LOCK_ROOT")
	if root == "" {
		t.Skip("the helper process of TestLockNamesItsHolder")
	}
	l, err := (&Store{Root: root}).Lock(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("locked")
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
}

func TestSweep(t *testing.T) {
	s := &Store{Root: t.TempDir(), now: func() time.Time { return testTime }, Targets: nodeTargets()}
	mkfile(t, s, "/etc/resolv.conf", "nameserver 10.0.0.2\n", 0o644)
	old := time.Now().Add(-time.Hour)
	stale := []string{
		"/etc/.resolv.conf.nodedns-123.tmp",
		"/etc/systemd/network/eth0.network.d/.nodedns.conf.nodedns-9.tmp",
		"/var/lib/nodedns/backup/.manifest.json.nodedns-77.tmp",
		"/var/lib/nodedns/.resolv.conf.nodedns-5.tmp",
	}
	keep := []string{
		"/etc/.hosts.nodedns-1.tmp",             // not a target: someone else's
		"/etc/netplan/.50-cloud.yaml.swp",       // an editor's
		"/etc/systemd/network/eth0.network.d/x", // not a temp file
	}
	for _, p := range append(append([]string{}, stale...), keep...) {
		mkfile(t, s, p, "x", 0o600)
		if err := os.Chtimes(s.host(p), old, old); err != nil {
			t.Fatal(err)
		}
	}
	mkdirMode(t, s, "/var/lib/nodedns/tmp", 0o700)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	work := []string{
		fmt.Sprintf("/var/lib/nodedns/tmp/nodedns-netplan-%d-1", dead.Process.Pid),
		fmt.Sprintf("/var/lib/nodedns/tmp/nodedns-netplan-%d-2", os.Getpid()),
	}
	liveWork := fmt.Sprintf("/var/lib/nodedns/tmp/nodedns-netplan-%d-3", os.Getppid())
	for _, d := range append(work, liveWork) {
		mkfile(t, s, d+"/etc/netplan/a.yaml", "x", 0o600)
	}

	l, err := s.Lock(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	// Made under this lock: in use. (Its time is set past the lock's: file times come from a coarse
	// clock, a few milliseconds behind time.Now.)
	fresh := "/etc/.resolv.conf.nodedns-456.tmp"
	mkfile(t, s, fresh, "x", 0o600)
	if err := os.Chtimes(s.host(fresh), l.Since().Add(time.Second), l.Since().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	removed, err := s.Sweep(l)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(append(append([]string{}, stale...), work...), removed, sortStrings); diff != "" {
		t.Errorf("Sweep removed (-want +got):\n%s", diff)
	}
	for _, p := range append(append(keep, fresh), liveWork) {
		if _, err := os.Lstat(s.host(p)); err != nil {
			t.Errorf("Sweep removed %s: %v", p, err)
		}
	}
}

var sortStrings = cmp.Transformer("sort", func(in []string) []string {
	out := append([]string(nil), in...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
})

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// nodeTargets is what reconcile.Targets allows without a config: the state directory and what the
// mechanisms declare they write.
func nodeTargets() *Targets {
	return DefaultTargets(DefaultStateDir).Add(node.Writes()...).AddLinked(node.LinkedWrites()...)
}

// TestForeignDirMessage: the refusal says how to fix it for who runs nodedns: root makes the
// directory root's; a user (on a copy of the node's files under --root) cannot give it to root, and
// is told that nodedns runs as root on a node and how to make the copy theirs.
func TestForeignDirMessage(t *testing.T) {
	e := &ForeignDirError{Path: "/etc/resolv.conf", Dir: "/etc", UID: 0, GID: 0, Mode: fs.ModeDir | 0o775}
	defer func(f func() int) { nodefs.Euid = f }(nodefs.Euid)
	for _, tt := range []struct {
		euid int
		want string
	}{
		{0, "refusing to change /etc/resolv.conf: the directory /etc on the way to it is writable by its group (owner 0:0, mode drwxrwxr-x (0775)), so another user could plant a symlink there and turn nodedns's write against any file of the node; make it root's and writable by root only (chown root:root /etc && chmod go-w /etc), or point nodedns elsewhere"},
		{1000, "refusing to change /etc/resolv.conf: the directory /etc on the way to it is writable by its group (owner 0:0, mode drwxrwxr-x (0775)), so another user could plant a symlink there and turn nodedns's write against any file of the node; nodedns must run as root on a node; on a copy of the node's files (--root), make it uid 1000's and writable by it only (chmod go-w /etc)"},
	} {
		nodefs.Euid = func() int { return tt.euid }
		if got := e.Error(); got != tt.want {
			t.Errorf("as uid %d:\n got %s\nwant %s", tt.euid, got, tt.want)
		}
	}
}
