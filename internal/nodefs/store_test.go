package nodefs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestResolveLink(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, s *Store)
		path    string
		want    string
		wantErr string
	}{
		{
			name:  "regular file is itself",
			setup: func(t *testing.T, s *Store) { mkfile(t, s, "/etc/resolv.conf", "x", 0o644) },
			path:  "/etc/resolv.conf",
			want:  "/etc/resolv.conf",
		},
		{
			name: "missing path is itself",
			path: "/etc/nothing/here",
			want: "/etc/nothing/here",
		},
		{
			name: "unclean path is cleaned",
			setup: func(t *testing.T, s *Store) {
				mkfile(t, s, "/etc/resolv.conf", "x", 0o644)
			},
			path: "/etc/./x/../resolv.conf",
			want: "/etc/resolv.conf",
		},
		{
			name: "absolute target is inside root",
			setup: func(t *testing.T, s *Store) {
				mklink(t, s, "/etc/resolv.conf", "/run/systemd/resolve/stub-resolv.conf")
			},
			path: "/etc/resolv.conf",
			want: "/run/systemd/resolve/stub-resolv.conf",
		},
		{
			name: "relative target is relative to the link's directory",
			setup: func(t *testing.T, s *Store) {
				mklink(t, s, "/etc/resolv.conf", "../run/resolvconf/resolv.conf")
			},
			path: "/etc/resolv.conf",
			want: "/run/resolvconf/resolv.conf",
		},
		{
			name: "chain of absolute and relative links",
			setup: func(t *testing.T, s *Store) {
				mklink(t, s, "/etc/resolv.conf", "/etc/alt/resolv.conf")
				mklink(t, s, "/etc/alt/resolv.conf", "../../run/a")
				mklink(t, s, "/run/a", "b")
				mkfile(t, s, "/run/b", "x", 0o644)
			},
			path: "/etc/resolv.conf",
			want: "/run/b",
		},
		{
			name: "directory symlink with absolute target (Debian /var/run -> /run)",
			setup: func(t *testing.T, s *Store) {
				mklink(t, s, "/var/run", "/run")
				mkfile(t, s, "/run/nodedns/x", "x", 0o644)
			},
			path: "/var/run/nodedns/x",
			want: "/run/nodedns/x",
		},
		{
			name: "dot-dot in a target never leaves root",
			setup: func(t *testing.T, s *Store) {
				mklink(t, s, "/etc/resolv.conf", "../../../../../../etc/passwd")
			},
			path: "/etc/resolv.conf",
			want: "/etc/passwd",
		},
		{
			name: "dot-dot in a target after a symlinked directory is physical",
			setup: func(t *testing.T, s *Store) {
				mklink(t, s, "/etc/link", "/usr/lib/deep")
				mklink(t, s, "/etc/up", "link/../x")
				if err := os.MkdirAll(s.host("/usr/lib/deep"), 0o755); err != nil {
					t.Fatal(err)
				}
			},
			path: "/etc/up",
			want: "/usr/lib/x",
		},
		{
			name: "exactly 40 hops is fine",
			setup: func(t *testing.T, s *Store) {
				for i := 0; i < MaxSymlinks; i++ {
					mklink(t, s, fmt.Sprintf("/l%d", i), fmt.Sprintf("/l%d", i+1))
				}
			},
			path: "/l0",
			want: fmt.Sprintf("/l%d", MaxSymlinks),
		},
		{
			name: "41 hops is too many",
			setup: func(t *testing.T, s *Store) {
				for i := 0; i <= MaxSymlinks; i++ {
					mklink(t, s, fmt.Sprintf("/l%d", i), fmt.Sprintf("/l%d", i+1))
				}
			},
			path:    "/l0",
			wantErr: "resolve /l0: more than 40 symlinks (a symlink loop?): too many levels of symbolic links",
		},
		{
			name: "loop",
			setup: func(t *testing.T, s *Store) {
				mklink(t, s, "/etc/resolv.conf", "resolv.conf.b")
				mklink(t, s, "/etc/resolv.conf.b", "/etc/resolv.conf")
			},
			path:    "/etc/resolv.conf",
			wantErr: "resolve /etc/resolv.conf: more than 40 symlinks (a symlink loop?): too many levels of symbolic links",
		},
		{
			name:    "self loop",
			setup:   func(t *testing.T, s *Store) { mklink(t, s, "/etc/resolv.conf", "resolv.conf") },
			path:    "/etc/resolv.conf",
			wantErr: "resolve /etc/resolv.conf: more than 40 symlinks (a symlink loop?): too many levels of symbolic links",
		},
		{
			name:    "file used as a directory",
			setup:   func(t *testing.T, s *Store) { mkfile(t, s, "/etc/resolv.conf", "x", 0o644) },
			path:    "/etc/resolv.conf/x",
			wantErr: "resolve /etc/resolv.conf/x: /etc/resolv.conf is not a directory",
		},
		{
			name:    "relative node path",
			path:    "etc/resolv.conf",
			wantErr: `resolve etc/resolv.conf: node path "etc/resolv.conf" is not absolute`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			if tt.setup != nil {
				tt.setup(t, s)
			}
			got, err := s.ResolveLink(tt.path)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("ResolveLink(%q) = %q, %v; want error %q", tt.path, got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ResolveLink(%q): %v", tt.path, err)
			}
			if got != tt.want {
				t.Errorf("ResolveLink(%q) = %q, want %q", tt.path, got, tt.want)
			}
		})
	}
}

// TestResolveLinkRealRoot checks that root "" and "/" mean the real system (read-only calls only).
func TestResolveLinkRealRoot(t *testing.T) {
	dir := t.TempDir()
	if err := os.Symlink("target", dir+"/link"); err != nil {
		t.Fatal(err)
	}
	for _, root := range []string{"", "/"} {
		s := &Store{Root: root}
		got, err := s.ResolveLink(dir + "/link")
		if err != nil {
			t.Fatalf("root %q: %v", root, err)
		}
		// t.TempDir may itself sit under a symlinked directory: compare with the kernel's view.
		want, err := filepath.EvalSymlinks(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got != want+"/target" {
			t.Errorf("root %q: ResolveLink = %q, want %q", root, got, want+"/target")
		}
	}
}

func TestWrite(t *testing.T) {
	const old, data = "nameserver 169.254.25.10\n", "nameserver 10.0.0.2\n"
	tests := []struct {
		name  string
		root  bool // needs root to set up owners
		setup func(t *testing.T, s *Store)
		path  string
		mode  fs.FileMode
		want  WriteResult
		// after: the state of each node path after the write (SHA256 of data unless noted)
		after map[string]state
	}{
		{
			name: "new file in a new directory gets mode",
			path: "/etc/netplan/90-nodedns.yaml",
			mode: 0o600,
			want: WriteResult{Path: "/etc/netplan/90-nodedns.yaml", Created: true},
			after: map[string]state{
				"/etc/netplan/90-nodedns.yaml": {Kind: KindFile, Mode: 0o600, SHA256: sum(data)},
			},
		},
		{
			name: "new file with mode 0 is 0644",
			path: "/var/lib/nodedns/resolv.conf",
			want: WriteResult{Path: "/var/lib/nodedns/resolv.conf", Created: true},
			after: map[string]state{
				"/var/lib/nodedns/resolv.conf": {Kind: KindFile, Mode: 0o644, SHA256: sum(data)},
			},
		},
		{
			name:  "replace keeps the old mode, not the given one",
			setup: func(t *testing.T, s *Store) { mkfile(t, s, "/etc/resolv.conf", old, 0o640) },
			path:  "/etc/resolv.conf",
			mode:  0o600,
			want:  WriteResult{Path: "/etc/resolv.conf"},
			after: map[string]state{
				"/etc/resolv.conf": {Kind: KindFile, Mode: 0o640, SHA256: sum(data)},
			},
		},
		{
			name: "replace keeps owner and permissions, never setuid/setgid bits",
			root: true,
			setup: func(t *testing.T, s *Store) {
				mkfile(t, s, "/etc/resolv.conf", old, 0o750)
				chown(t, s, "/etc/resolv.conf", 1234, 5678)
				// After the chown, which clears setuid and setgid.
				if err := os.Chmod(s.host("/etc/resolv.conf"), 0o750|fs.ModeSetuid|fs.ModeSetgid); err != nil {
					t.Fatal(err)
				}
			},
			path: "/etc/resolv.conf",
			mode: 0o644,
			want: WriteResult{Path: "/etc/resolv.conf"},
			after: map[string]state{
				"/etc/resolv.conf": {Kind: KindFile, Mode: 0o750, UID: 1234, GID: 5678, SHA256: sum(data)},
			},
		},
		{
			name:  "same content is left alone",
			setup: func(t *testing.T, s *Store) { mkfile(t, s, "/etc/resolv.conf", data, 0o600) },
			path:  "/etc/resolv.conf",
			mode:  0o644,
			want:  WriteResult{Path: "/etc/resolv.conf", Unchanged: true},
			after: map[string]state{
				"/etc/resolv.conf": {Kind: KindFile, Mode: 0o600, SHA256: sum(data)},
			},
		},
		{
			name: "absolute symlink: target written, link kept",
			setup: func(t *testing.T, s *Store) {
				mklink(t, s, "/etc/resolv.conf", "/run/systemd/resolve/resolv.conf")
				mkfile(t, s, "/run/systemd/resolve/resolv.conf", old, 0o644)
			},
			path: "/etc/resolv.conf",
			want: WriteResult{Path: "/run/systemd/resolve/resolv.conf"},
			after: map[string]state{
				"/etc/resolv.conf":                 {Kind: KindSymlink, Target: "/run/systemd/resolve/resolv.conf"},
				"/run/systemd/resolve/resolv.conf": {Kind: KindFile, Mode: 0o644, SHA256: sum(data)},
			},
		},
		{
			name: "relative symlink: target written, link kept",
			setup: func(t *testing.T, s *Store) {
				mklink(t, s, "/etc/resolv.conf", "../run/resolvconf/resolv.conf")
				mkfile(t, s, "/run/resolvconf/resolv.conf", old, 0o644)
			},
			path: "/etc/resolv.conf",
			want: WriteResult{Path: "/run/resolvconf/resolv.conf"},
			after: map[string]state{
				"/etc/resolv.conf":            {Kind: KindSymlink, Target: "../run/resolvconf/resolv.conf"},
				"/run/resolvconf/resolv.conf": {Kind: KindFile, Mode: 0o644, SHA256: sum(data)},
			},
		},
		{
			name: "chain: final target written, every link kept",
			setup: func(t *testing.T, s *Store) {
				mklink(t, s, "/etc/resolv.conf", "/etc/alt/resolv.conf")
				mklink(t, s, "/etc/alt/resolv.conf", "../../run/x")
				mkfile(t, s, "/run/x", old, 0o644)
			},
			path: "/etc/resolv.conf",
			want: WriteResult{Path: "/run/x"},
			after: map[string]state{
				"/etc/resolv.conf":     {Kind: KindSymlink, Target: "/etc/alt/resolv.conf"},
				"/etc/alt/resolv.conf": {Kind: KindSymlink, Target: "../../run/x"},
				"/run/x":               {Kind: KindFile, Mode: 0o644, SHA256: sum(data)},
			},
		},
		{
			name: "dangling symlink: target created, link kept",
			setup: func(t *testing.T, s *Store) {
				mklink(t, s, "/etc/resolv.conf", "/run/systemd/resolve/stub-resolv.conf")
			},
			path: "/etc/resolv.conf",
			mode: 0o644,
			want: WriteResult{Path: "/run/systemd/resolve/stub-resolv.conf", Created: true},
			after: map[string]state{
				"/etc/resolv.conf":                      {Kind: KindSymlink, Target: "/run/systemd/resolve/stub-resolv.conf"},
				"/run/systemd/resolve/stub-resolv.conf": {Kind: KindFile, Mode: 0o644, SHA256: sum(data)},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.root {
				needRoot(t)
			}
			s := newStore(t)
			if tt.setup != nil {
				tt.setup(t, s)
			}
			got, err := s.Write(tt.path, []byte(data), tt.mode)
			if err != nil {
				t.Fatalf("Write: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Write result (-want +got):\n%s", diff)
			}
			paths := make([]string, 0, len(tt.after))
			for p := range tt.after {
				paths = append(paths, p)
			}
			gotState := snapshot(t, s, paths...)
			want := ownedBy(tt.after, tt.root)
			if diff := cmp.Diff(want, gotState); diff != "" {
				t.Errorf("state after Write (-want +got):\n%s", diff)
			}
			assertNoTemps(t, s)
		})
	}
}

// ownedBy fills in this process's uid and gid where a test did not set an owner.
func ownedBy(m map[string]state, explicit bool) map[string]state {
	out := make(map[string]state, len(m))
	for p, st := range m {
		if !explicit {
			st.UID, st.GID = os.Geteuid(), os.Getegid()
		}
		out[p] = st
	}
	return out
}

func TestWriteErrors(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, s *Store)
		path    string
		data    string
		wantErr string
	}{
		{
			name:    "empty content",
			setup:   func(t *testing.T, s *Store) { mkfile(t, s, "/etc/resolv.conf", "nameserver 10.0.0.1\n", 0o644) },
			path:    "/etc/resolv.conf",
			data:    "",
			wantErr: "write /etc/resolv.conf: refusing to write empty content",
		},
		{
			name:    "relative path",
			path:    "etc/resolv.conf",
			data:    "x",
			wantErr: `write etc/resolv.conf: node path "etc/resolv.conf" is not absolute`,
		},
		{
			name: "directory",
			setup: func(t *testing.T, s *Store) {
				if err := os.MkdirAll(s.host("/etc/resolv.conf"), 0o755); err != nil {
					t.Fatal(err)
				}
			},
			path:    "/etc/resolv.conf",
			data:    "x",
			wantErr: "write /etc/resolv.conf: not a regular file but a directory",
		},
		{
			name: "symlink loop",
			setup: func(t *testing.T, s *Store) {
				mklink(t, s, "/etc/resolv.conf", "/etc/resolv.conf")
			},
			path:    "/etc/resolv.conf",
			data:    "x",
			wantErr: "write /etc/resolv.conf: resolve /etc/resolv.conf: more than 40 symlinks (a symlink loop?): too many levels of symbolic links",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			if tt.setup != nil {
				tt.setup(t, s)
			}
			before := snapshot(t, s, "/etc/resolv.conf")
			_, err := s.Write(tt.path, []byte(tt.data), 0o644)
			if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("Write error = %v, want %q", err, tt.wantErr)
			}
			if diff := cmp.Diff(before, snapshot(t, s, "/etc/resolv.conf")); diff != "" {
				t.Errorf("file changed by a failed Write (-before +after):\n%s", diff)
			}
			if b, err := s.Backups(); err != nil || len(b) != 0 {
				t.Errorf("Backups after a refused Write = %v, %v; want none", b, err)
			}
			assertNoTemps(t, s)
		})
	}
}

func TestReadFile(t *testing.T) {
	s := newStore(t)
	mkfile(t, s, "/run/systemd/resolve/resolv.conf", "nameserver 10.0.0.1\n", 0o644)
	mklink(t, s, "/etc/resolv.conf", "../run/systemd/resolve/resolv.conf")
	mklink(t, s, "/etc/systemd/resolved.conf.d/masked.conf", "/dev/null")
	if err := os.MkdirAll(s.host("/etc/netplan"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(s.host("/etc/netplan/60-fifo.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A sparse 1 GiB file costs no disk and must cost no memory either.
	big, err := os.Create(s.host("/etc/netplan/70-big.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := big.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	big.Close()
	kind := func(max int64) Kind { return Kind{Name: "test file", Max: max} }
	tests := []struct {
		name    string
		path    string
		kind    Kind
		want    string
		wantErr string
		is      error
	}{
		{name: "through a symlink", path: "/etc/resolv.conf", kind: kind(1024), want: "nameserver 10.0.0.1\n"},
		{name: "exactly at the limit", path: "/etc/resolv.conf", kind: kind(20), want: "nameserver 10.0.0.1\n"},
		{name: "over the limit", path: "/etc/resolv.conf", kind: kind(19), is: ErrTooLarge,
			wantErr: "read /etc/resolv.conf: 20 bytes, over the 19-byte limit of a test file"},
		{name: "sparse 1 GiB", path: "/etc/netplan/70-big.yaml", kind: Config, is: ErrTooLarge,
			wantErr: "read /etc/netplan/70-big.yaml: 1073741824 bytes, over the 1 MiB limit of a configuration file"},
		{name: "directory", path: "/etc/netplan", kind: kind(10), is: ErrNotRegular,
			wantErr: "read /etc/netplan: not a regular file but a directory"},
		{name: "FIFO, refused without blocking", path: "/etc/netplan/60-fifo.yaml", kind: Config, is: ErrNotRegular,
			wantErr: "read /etc/netplan/60-fifo.yaml: not a regular file but a named pipe"},
		{name: "systemd mask", path: "/etc/systemd/resolved.conf.d/masked.conf", kind: Config, want: ""},
		{name: "bad limit", path: "/etc/resolv.conf", kind: kind(0), wantErr: "read /etc/resolv.conf: invalid size limit 0 for a test file"},
		{name: "missing", path: "/etc/nope", kind: kind(10), is: fs.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.ReadFile(tt.path, tt.kind)
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Fatalf("ReadFile(%q) error = %v, want one matching %v", tt.path, err, tt.is)
			}
			switch {
			case tt.wantErr != "":
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("ReadFile(%q) = %q, %v; want error %q", tt.path, got, err, tt.wantErr)
				}
			case tt.is != nil:
				if !strings.Contains(err.Error(), tt.path) {
					t.Errorf("error %v does not name %s", err, tt.path)
				}
			default:
				if err != nil {
					t.Fatalf("ReadFile(%q): %v", tt.path, err)
				}
				if string(got) != tt.want {
					t.Errorf("ReadFile(%q) = %q, want %q", tt.path, got, tt.want)
				}
			}
		})
	}
}

// TestReadsGoThroughTheFS: reads use the FS seam, so a fault injected there reaches the reader
// (and the error names the node path, not the host one).
func TestReadsGoThroughTheFS(t *testing.T) {
	s := newStore(t)
	mkfile(t, s, "/etc/resolv.conf", "nameserver 10.0.0.1\n", 0o644)
	s.FS = faultFS{FS: OS(), fail: func(op, name string) syscall.Errno {
		if (op == "open" || op == "readdir") && strings.HasPrefix(name, s.Root) {
			return syscall.EIO
		}
		return 0
	}}
	if _, err := s.ReadFile("/etc/resolv.conf", Config); !errors.Is(err, syscall.EIO) || err.Error() != "read /etc/resolv.conf: input/output error" {
		t.Errorf("ReadFile with a failing open: %v", err)
	}
	if _, err := s.ReadDir("/etc"); !errors.Is(err, syscall.EIO) || err.Error() != "list /etc: input/output error" {
		t.Errorf("ReadDir with a failing readdir: %v", err)
	}
}

// TestDropIns: systemd's order for configuration directories: sorted by file name across
// directories, an earlier directory's file shadowing a later one's of the same name, hidden and
// other-suffix files skipped, a missing directory fine.
func TestDropIns(t *testing.T) {
	s := newStore(t)
	mkfile(t, s, "/etc/x.d/50-b.conf", "etc", 0o644)
	mkfile(t, s, "/run/x.d/50-b.conf", "run", 0o644)
	mkfile(t, s, "/run/x.d/10-a.conf", "run", 0o644)
	mkfile(t, s, "/lib/x.d/90-c.conf", "lib", 0o644)
	mkfile(t, s, "/lib/x.d/.90-c.conf.nodedns-1.tmp", "tmp", 0o644)
	mkfile(t, s, "/lib/x.d/README", "doc", 0o644)
	got, errs := DropIns(s, []string{"/etc/x.d", "/run/x.d", "/missing/x.d", "/lib/x.d"}, ".conf")
	want := []DropIn{
		{Name: "10-a.conf", Path: "/run/x.d/10-a.conf"},
		{Name: "50-b.conf", Path: "/etc/x.d/50-b.conf", Shadowed: []string{"/run/x.d/50-b.conf"}},
		{Name: "90-c.conf", Path: "/lib/x.d/90-c.conf"},
	}
	if diff := cmp.Diff(want, got); diff != "" || len(errs) != 0 {
		t.Errorf("DropIns (-want +got):\n%s\nerrors: %v", diff, errs)
	}
}

func TestRemove(t *testing.T) {
	s := newStore(t)
	mkfile(t, s, "/etc/dhcp/dhclient-enter-hooks.d/nodedns", "#!/bin/sh\n", 0o755)
	if err := s.Remove("/etc/dhcp/dhclient-enter-hooks.d/nodedns"); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if got := stateOf(t, s, "/etc/dhcp/dhclient-enter-hooks.d/nodedns"); got.Kind != KindAbsent {
		t.Errorf("after Remove the file is %+v, want absent", got)
	}
	if err := s.Remove("/etc/dhcp/dhclient-enter-hooks.d/nodedns"); err != nil {
		t.Errorf("Remove of a missing file: %v", err)
	}
	if err := s.Remove("/etc/dhcp"); err == nil || err.Error() != "remove /etc/dhcp: is a directory" {
		t.Errorf("Remove of a directory = %v, want a refusal", err)
	}
	got, err := s.Backups()
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{{
		Path: "/etc/dhcp/dhclient-enter-hooks.d/nodedns", Kind: KindFile, Mode: 0o755,
		UID: os.Geteuid(), GID: os.Getegid(), SHA256: sum("#!/bin/sh\n"), Time: testTime,
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Backups after Remove (-want +got):\n%s", diff)
	}
}

func TestSyncDirUnsupportedIsFine(t *testing.T) {
	s := newStore(t)
	s.FS = faultFS{FS: OS(), fail: func(op, name string) syscall.Errno {
		if op == "syncdir" {
			return syscall.EINVAL
		}
		return 0
	}}
	if _, err := s.Write("/etc/resolv.conf", []byte("nameserver 10.0.0.1\n"), 0o644); err != nil {
		t.Errorf("Write with a directory fsync answering EINVAL: %v", err)
	}
}

func TestIfNames(t *testing.T) {
	s := newStore(t)
	for name, idx := range map[string]string{"lo": "1", "eth0": "2", "nodelocaldns": "12", "weird": "x", "zero": "0"} {
		mkfile(t, s, "/sys/devices/virtual/net/"+name+"/ifindex", idx+"\n", 0o444)
		mklink(t, s, "/sys/class/net/"+name, "../../devices/virtual/net/"+name)
	}
	mkfile(t, s, "/sys/class/net/bonding_masters", "bond0\n", 0o644) // a file, not a link
	want := map[int]string{1: "lo", 2: "eth0", 12: "nodelocaldns"}
	names, errs := IfNames(s)
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("IfNames mismatch (-want +got):\n%s", diff)
	}
	var msgs []string
	for _, err := range errs {
		msgs = append(msgs, err.Error())
	}
	wantErrs := []string{`read /sys/class/net/weird/ifindex: "x" is not an interface index`, `read /sys/class/net/zero/ifindex: "0" is not an interface index`}
	if diff := cmp.Diff(wantErrs, msgs); diff != "" {
		t.Errorf("IfNames errors (-want +got):\n%s", diff)
	}
	if got, _ := IfNames(NewReader(filepath.Join(s.Root, "nope"))); got == nil || len(got) != 0 {
		t.Errorf("IfNames of a missing root = %v, want an empty map", got)
	}
}

// TestIfNamesRealSysfs reads this machine's own sysfs: the kernel reports every attribute as 4096
// bytes long, which the Attribute bound must allow.
func TestIfNamesRealSysfs(t *testing.T) {
	names, _ := IfNames(NewReader("/"))
	found := false
	for _, n := range names {
		found = found || n == "lo"
	}
	if !found {
		t.Errorf("IfNames of the real /sys = %v, want lo among them", names)
	}
}
