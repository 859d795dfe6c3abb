package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/internal/testutil/faultfs"
)

func TestBackupOnce(t *testing.T) {
	s := newStore(t)
	const orig = "nameserver 169.254.25.10\nsearch example.org\n"
	mkfile(t, s, "/etc/resolv.conf", orig, 0o644)

	for i, data := range []string{"nameserver 10.0.0.1\n", "nameserver 10.0.0.2\n", "nameserver 10.0.0.3\n"} {
		if _, err := s.Write("/etc/resolv.conf", []byte(data), 0o644); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		if err := s.Backup("/etc/resolv.conf"); err != nil {
			t.Fatalf("explicit Backup %d: %v", i, err)
		}
	}
	got, err := s.Backups()
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{{
		Path: "/etc/resolv.conf", Kind: KindFile, Mode: 0o644,
		UID: os.Geteuid(), GID: os.Getegid(), SHA256: sum(orig), Time: testTime,
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Backups (-want +got):\n%s", diff)
	}
	// The copy holds the original bytes, named by their digest, and is private.
	copyPath := s.host("/var/lib/nodedns/backup/" + sum(orig))
	b, err := os.ReadFile(copyPath)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != orig {
		t.Errorf("backup copy = %q, want %q", b, orig)
	}
	for node, wantMode := range map[string]fs.FileMode{
		"/var/lib/nodedns":                      fs.ModeDir | 0o755,
		"/var/lib/nodedns/backup":               fs.ModeDir | 0o700,
		"/var/lib/nodedns/backup/manifest.json": 0o600,
		"/var/lib/nodedns/backup/" + sum(orig):  0o600,
	} {
		fi, err := os.Stat(s.host(node))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != wantMode {
			t.Errorf("%s mode = %v, want %v", node, fi.Mode(), wantMode)
		}
	}
}

func TestBackupKinds(t *testing.T) {
	s := newStore(t)
	mklink(t, s, "/etc/resolv.conf", "../run/systemd/resolve/stub-resolv.conf")
	mkfile(t, s, "/etc/netplan/50-cloud-init.yaml", "network: {}\n", 0o600)
	if err := os.MkdirAll(s.host("/etc/dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/etc/resolv.conf", "/etc/netplan/50-cloud-init.yaml", "/etc/netplan/90-nodedns.yaml"} {
		if err := s.Backup(p); err != nil {
			t.Fatalf("Backup(%s): %v", p, err)
		}
	}
	if err := s.Backup("/etc/dir"); err == nil || err.Error() != "back up /etc/dir: cannot back up a directory: only regular files and symlinks" {
		t.Errorf("Backup of a directory = %v, want a refusal", err)
	}
	uid, gid := os.Geteuid(), os.Getegid()
	want := []Entry{
		{Path: "/etc/resolv.conf", Kind: KindSymlink, UID: uid, GID: gid, Target: "../run/systemd/resolve/stub-resolv.conf", Time: testTime},
		{Path: "/etc/netplan/50-cloud-init.yaml", Kind: KindFile, Mode: 0o600, UID: uid, GID: gid, SHA256: sum("network: {}\n"), Time: testTime},
		{Path: "/etc/netplan/90-nodedns.yaml", Kind: KindAbsent, Time: testTime},
	}
	got, err := s.Backups()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Backups (-want +got):\n%s", diff)
	}
	// The manifest on disk is the documented JSON.
	b, err := os.ReadFile(s.host("/var/lib/nodedns/backup/manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, frag := range []string{`"version": 1`, `"kind": "symlink"`, `"mode": "0600"`, `"target": "../run/systemd/resolve/stub-resolv.conf"`} {
		if !strings.Contains(string(b), frag) {
			t.Errorf("manifest lacks %s:\n%s", frag, b)
		}
	}
}

// TestBackupConcurrent runs Backups from two Stores (as two nodedns processes would) on one root:
// no entry may be lost to a read-modify-write race on the manifest.
func TestBackupConcurrent(t *testing.T) {
	root := t.TempDir()
	stores := []*Store{{Root: root}, {Root: root}}
	var wg sync.WaitGroup
	const n = 20
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := stores[i%2].Backup(fmt.Sprintf("/etc/f%02d", i)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	got, err := stores[0].Backups()
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, e := range got {
		paths = append(paths, e.Path)
	}
	sort.Strings(paths)
	var want []string
	for i := 0; i < n; i++ {
		want = append(want, fmt.Sprintf("/etc/f%02d", i))
	}
	if diff := cmp.Diff(want, paths); diff != "" {
		t.Errorf("backed-up paths (-want +got):\n%s", diff)
	}
}

// nodeTree is the fake node of the restore tests: every kind of original state.
var nodeTree = []string{
	"/etc/resolv.conf",
	"/run/systemd/resolve/stub-resolv.conf",
	"/etc/netplan/50-cloud-init.yaml",
	"/etc/netplan/90-nodedns.yaml",
	"/var/lib/nodedns/resolv.conf",
	"/etc/systemd/resolved.conf.d/zz-nodedns.conf",
	"/etc/dhcp/dhclient-enter-hooks.d/nodedns",
	"/etc/hosts.d/link",
	"/etc/systemd", // absent before: a directory Write creates
}

func setupNode(t *testing.T, s *Store, owners bool) {
	t.Helper()
	mklink(t, s, "/etc/resolv.conf", "../run/systemd/resolve/stub-resolv.conf")
	mkfile(t, s, "/run/systemd/resolve/stub-resolv.conf", "nameserver 127.0.0.53\noptions edns0 trust-ad\n", 0o644)
	mkfile(t, s, "/etc/netplan/50-cloud-init.yaml", "network:\n  version: 2\n", 0o600)
	mkfile(t, s, "/etc/dhcp/dhclient-enter-hooks.d/nodedns", "#!/bin/sh\n# old\n", 0o750)
	mklink(t, s, "/etc/hosts.d/link", "/nowhere")
	if owners {
		chown(t, s, "/etc/netplan/50-cloud-init.yaml", 1000, 1001)
		chown(t, s, "/etc/hosts.d/link", 2000, 2001)
		chown(t, s, "/etc/dhcp/dhclient-enter-hooks.d/nodedns", 3000, 3001)
	}
}

// changeNode does what a nodedns apply would do, and more.
func changeNode(t *testing.T, s *Store) {
	t.Helper()
	writes := []struct {
		path string
		data string
		mode fs.FileMode
	}{
		{"/etc/resolv.conf", "nameserver 10.0.0.2\n", 0o644},
		{"/etc/netplan/50-cloud-init.yaml", "network:\n  version: 2\n  ethernets: {}\n", 0o644},
		{"/etc/netplan/90-nodedns.yaml", "# managed by nodedns\nnetwork: {version: 2}\n", 0o600},
		{"/var/lib/nodedns/resolv.conf", "# managed by nodedns\nnameserver 10.0.0.2\n", 0o644},
		{"/etc/systemd/resolved.conf.d/zz-nodedns.conf", "# managed by nodedns\n[Resolve]\nDNS=\n", 0o644},
		{"/etc/dhcp/dhclient-enter-hooks.d/nodedns", "#!/bin/sh\n# managed by nodedns\n", 0o755},
	}
	for _, w := range writes {
		if _, err := s.Write(w.path, []byte(w.data), w.mode); err != nil {
			t.Fatalf("Write(%s): %v", w.path, err)
		}
	}
	// Something replaced a symlink with a file: restore must put the link back.
	if err := s.Remove("/etc/hosts.d/link"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write("/etc/hosts.d/link", []byte("now a file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Owner and mode drift after the backup must be undone too.
	if err := os.Chmod(s.host("/run/systemd/resolve/stub-resolv.conf"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestRestoreExact(t *testing.T) {
	owners := os.Geteuid() == 0
	s := newStore(t)
	setupNode(t, s, owners)
	before := snapshot(t, s, nodeTree...)
	changeNode(t, s)
	if diff := cmp.Diff(before, snapshot(t, s, nodeTree...)); diff == "" {
		t.Fatal("changeNode changed nothing: the test proves nothing")
	}

	got, err := s.Restore(nil)
	if err != nil {
		t.Fatalf("Restore: %v", err)
	}
	want := []RestoreResult{
		{Path: "/etc/hosts.d/link", Action: ActionRestored},
		{Path: "/etc/dhcp/dhclient-enter-hooks.d/nodedns", Action: ActionRestored},
		{Path: "/etc/systemd/resolved.conf.d/zz-nodedns.conf", Action: ActionRemoved},
		// The directories Write created for it go too.
		{Path: "/etc/systemd/resolved.conf.d", Action: ActionRemoved},
		{Path: "/etc/systemd", Action: ActionRemoved},
		{Path: "/var/lib/nodedns/resolv.conf", Action: ActionRemoved},
		{Path: "/etc/netplan/90-nodedns.yaml", Action: ActionRemoved},
		{Path: "/etc/netplan/50-cloud-init.yaml", Action: ActionRestored},
		{Path: "/run/systemd/resolve/stub-resolv.conf", Action: ActionRestored},
		{Path: "/etc/resolv.conf", Action: ActionRestored},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Restore results (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, snapshot(t, s, nodeTree...)); diff != "" {
		t.Errorf("node after Restore differs from before (-before +after):\n%s", diff)
	}
	assertNoTemps(t, s)
	// The manifest and every copy are gone; only the (empty) directory and its lock remain.
	left, err := os.ReadDir(s.host("/var/lib/nodedns/backup"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	if diff := cmp.Diff([]string{".lock"}, names); diff != "" {
		t.Errorf("backup directory after Restore (-want +got):\n%s", diff)
	}

	// A second restore is a no-op that returns nothing.
	again, err := s.Restore(nil)
	if err != nil || again != nil {
		t.Errorf("second Restore = %v, %v; want nil, nil", again, err)
	}
	if diff := cmp.Diff(before, snapshot(t, s, nodeTree...)); diff != "" {
		t.Errorf("second Restore changed the node (-before +after):\n%s", diff)
	}
}

func TestRestoreNothing(t *testing.T) {
	s := newStore(t)
	got, err := s.Restore(func(string) (bool, string) {
		t.Error("keep called with no backups")
		return false, ""
	})
	if err != nil || got != nil {
		t.Errorf("Restore with no backups = %v, %v; want nil, nil", got, err)
	}
}

func TestRestoreVeto(t *testing.T) {
	s := newStore(t)
	mkfile(t, s, "/etc/resolv.conf", "nameserver 169.254.25.10\n", 0o644)
	for _, p := range []string{"/etc/resolv.conf", "/var/lib/nodedns/resolv.conf"} {
		if _, err := s.Write(p, []byte("nameserver 10.0.0.2\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const reason = "kubelet's config still points at /var/lib/nodedns/resolv.conf"
	kubeletUsesIt := true
	keep := func(p string) (bool, string) {
		if p == "/var/lib/nodedns/resolv.conf" && kubeletUsesIt {
			return true, reason
		}
		return false, ""
	}
	got, err := s.Restore(keep)
	if err != nil {
		t.Fatalf("Restore: %v", err)
	}
	want := []RestoreResult{
		{Path: "/var/lib/nodedns/resolv.conf", Action: ActionKept, Reason: reason},
		{Path: "/etc/resolv.conf", Action: ActionRestored},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Restore results (-want +got):\n%s", diff)
	}
	if got := readNode(t, s, "/var/lib/nodedns/resolv.conf"); got != "nameserver 10.0.0.2\n" {
		t.Errorf("kept file = %q, want it untouched", got)
	}
	if got := readNode(t, s, "/etc/resolv.conf"); got != "nameserver 169.254.25.10\n" {
		t.Errorf("/etc/resolv.conf = %q, want the original", got)
	}
	// The kept path stays backed up, so a later restore can finish the job.
	entries, err := s.Backups()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Entry{{Path: "/var/lib/nodedns/resolv.conf", Kind: KindAbsent, Time: testTime}}, entries); diff != "" {
		t.Errorf("Backups after a veto (-want +got):\n%s", diff)
	}

	kubeletUsesIt = false
	got, err = s.Restore(keep)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]RestoreResult{{Path: "/var/lib/nodedns/resolv.conf", Action: ActionRemoved}}, got); diff != "" {
		t.Errorf("second Restore (-want +got):\n%s", diff)
	}
	if st := stateOf(t, s, "/var/lib/nodedns/resolv.conf"); st.Kind != KindAbsent {
		t.Errorf("kubelet file after the second Restore: %+v, want absent", st)
	}
}

func TestRestorePartialFailure(t *testing.T) {
	s := newStore(t)
	mkfile(t, s, "/etc/resolv.conf", "nameserver 169.254.25.10\n", 0o644)
	mkfile(t, s, "/etc/netplan/50-cloud-init.yaml", "network: {}\n", 0o600)
	for _, p := range []string{"/etc/resolv.conf", "/etc/netplan/50-cloud-init.yaml"} {
		if _, err := s.Write(p, []byte("changed\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	netplan := s.host("/etc/netplan/50-cloud-init.yaml")
	s.FS = faultfs.FS{FS: nodefs.OS(), Fail: func(op, name string) syscall.Errno {
		if op == "rename" && name == netplan {
			return syscall.EROFS
		}
		return 0
	}}
	got, err := s.Restore(nil)
	if err == nil || !strings.HasPrefix(err.Error(), "restore /etc/netplan/50-cloud-init.yaml: ") || !errors.Is(err, syscall.EROFS) {
		t.Fatalf("Restore error = %v, want EROFS naming /etc/netplan/50-cloud-init.yaml", err)
	}
	if diff := cmp.Diff([]RestoreResult{{Path: "/etc/resolv.conf", Action: ActionRestored}}, got); diff != "" {
		t.Errorf("Restore results (-want +got):\n%s", diff)
	}
	if got := readNode(t, s, "/etc/resolv.conf"); got != "nameserver 169.254.25.10\n" {
		t.Errorf("/etc/resolv.conf = %q: the failure on another path stopped its restore", got)
	}
	entries, err := s.Backups()
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Path != "/etc/netplan/50-cloud-init.yaml" {
		t.Errorf("Backups after a partial restore = %+v, want only the failed path", entries)
	}
	assertNoTemps(t, s)

	s.FS = nil
	got, err = s.Restore(nil)
	if err != nil {
		t.Fatalf("second Restore: %v", err)
	}
	if diff := cmp.Diff([]RestoreResult{{Path: "/etc/netplan/50-cloud-init.yaml", Action: ActionRestored}}, got); diff != "" {
		t.Errorf("second Restore (-want +got):\n%s", diff)
	}
	if st, want := stateOf(t, s, "/etc/netplan/50-cloud-init.yaml"), (state{Kind: KindFile, Mode: 0o600, UID: os.Geteuid(), GID: os.Getegid(), SHA256: sum("network: {}\n")}); st != want {
		t.Errorf("netplan file after the second Restore = %+v, want %+v", st, want)
	}
}

func TestRestoreCorruptCopy(t *testing.T) {
	s := newStore(t)
	mkfile(t, s, "/etc/resolv.conf", "nameserver 169.254.25.10\n", 0o644)
	if _, err := s.Write("/etc/resolv.conf", []byte("nameserver 10.0.0.2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	copyPath := s.host("/var/lib/nodedns/backup/" + sum("nameserver 169.254.25.10\n"))
	if err := os.WriteFile(copyPath, []byte("garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := s.Restore(nil)
	if err == nil || !strings.Contains(err.Error(), "restore /etc/resolv.conf: backup copy") || !strings.Contains(err.Error(), "is corrupt") {
		t.Fatalf("Restore error = %v, want a corrupt-copy error naming the path", err)
	}
	if got := readNode(t, s, "/etc/resolv.conf"); got != "nameserver 10.0.0.2\n" {
		t.Errorf("/etc/resolv.conf = %q: a corrupt copy must not be restored", got)
	}
}

func TestBackupsBadManifest(t *testing.T) {
	s := newStore(t)
	mkfile(t, s, "/var/lib/nodedns/backup/manifest.json", "{\n  \"version\": 1,\n  \"entries\": [\n    {\"path\": \"/etc/x\", \"kind\": \"file\",}\n  ]\n}\n", 0o600)
	manifest := "/var/lib/nodedns/backup/manifest.json" // named as a node path, never the host one
	_, err := s.Backups()
	want := "list backups: " + manifest + ":4:39: invalid character '}' looking for beginning of object key string"
	if err == nil || err.Error() != want {
		t.Errorf("Backups error =\n%v\nwant\n%s", err, want)
	}
	// A bad manifest blocks new backups (and so every Write) instead of being overwritten.
	_, err = s.Write("/etc/resolv.conf", []byte("x\n"), 0o644)
	if err == nil || !strings.Contains(err.Error(), manifest+":4:39") {
		t.Errorf("Write with a bad manifest = %v, want the manifest error", err)
	}
	if st := stateOf(t, s, "/etc/resolv.conf"); st.Kind != KindAbsent {
		t.Errorf("Write went ahead without a backup: %+v", st)
	}
}

// TestManifestRemembered: a manifest older than a second is read once and then known by its lstat;
// any change to it (rewritten by another process, its mode made untrusted) is seen at once.
func TestManifestRemembered(t *testing.T) {
	s := newStore(t)
	mkfile(t, s, "/etc/a", "a\n", 0o644)
	mkfile(t, s, "/etc/b", "b\n", 0o644)
	if err := s.Backup("/etc/a"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // past the racily-clean second
	if es, err := s.Backups(); err != nil || len(es) != 1 {
		t.Fatalf("Backups = %v, %v; want the entry of /etc/a", es, err)
	}
	mhp := s.host("/var/lib/nodedns/backup/" + ManifestName)
	fi, err := os.Lstat(mhp)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := manifests.get(mhp, fi); !ok {
		t.Fatal("a manifest read more than a second after its last change is not remembered")
	}
	// Remembered: the same entries, a copy the caller may append to.
	if es, err := s.Backups(); err != nil || len(es) != 1 || es[0].Path != "/etc/a" {
		t.Fatalf("Backups from memory = %v, %v", es, err)
	}
	// Another process rewrites it (restore clearing it, here to an empty list): seen.
	data, err := os.ReadFile(mhp)
	if err != nil {
		t.Fatal(err)
	}
	empty := strings.Replace(string(data), string(data[strings.Index(string(data), "["):strings.LastIndex(string(data), "]")+1]), "[]", 1)
	tmp := mhp + ".other"
	if err := os.WriteFile(tmp, []byte(empty), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, mhp); err != nil {
		t.Fatal(err)
	}
	if es, err := s.Backups(); err != nil || len(es) != 0 {
		t.Fatalf("after another writer emptied the manifest, Backups = %v, %v; want none", es, err)
	}
	// Made writable by others: refused, remembered or not.
	if err := s.Backup("/etc/b"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	if _, err := s.Backups(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(mhp, 0o606); err != nil {
		t.Fatal(err)
	}
	var ue *UntrustedError
	if _, err := s.Backups(); !errors.As(err, &ue) {
		t.Fatalf("a manifest writable by others: err = %v, want an UntrustedError", err)
	}
}
