package store

import (
	"io/fs"
	"os"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/internal/testutil/faultfs"
)

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
	s.FS = faultfs.FS{FS: nodefs.OS(), Fail: func(op, name string) syscall.Errno {
		if op == "syncdir" {
			return syscall.EINVAL
		}
		return 0
	}}
	if _, err := s.Write("/etc/resolv.conf", []byte("nameserver 10.0.0.1\n"), 0o644); err != nil {
		t.Errorf("Write with a directory fsync answering EINVAL: %v", err)
	}
}
