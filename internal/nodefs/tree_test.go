package nodefs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestReadFile(t *testing.T) {
	s := newTree(t)
	mkfile(t, s, "/run/systemd/resolve/resolv.conf", "nameserver 10.0.0.1\n", 0o644)
	mklink(t, s, "/etc/resolv.conf", "../run/systemd/resolve/resolv.conf")
	mklink(t, s, "/etc/systemd/resolved.conf.d/masked.conf", "/dev/null")
	if err := os.MkdirAll(s.Host("/etc/netplan"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(s.Host("/etc/netplan/60-fifo.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A sparse 1 GiB file costs no disk and must cost no memory either.
	big, err := os.Create(s.Host("/etc/netplan/70-big.yaml"))
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

func TestResolveLink(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, s *Tree)
		path    string
		want    string
		wantErr string
	}{
		{
			name:  "regular file is itself",
			setup: func(t *testing.T, s *Tree) { mkfile(t, s, "/etc/resolv.conf", "x", 0o644) },
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
			setup: func(t *testing.T, s *Tree) {
				mkfile(t, s, "/etc/resolv.conf", "x", 0o644)
			},
			path: "/etc/./x/../resolv.conf",
			want: "/etc/resolv.conf",
		},
		{
			name: "absolute target is inside root",
			setup: func(t *testing.T, s *Tree) {
				mklink(t, s, "/etc/resolv.conf", "/run/systemd/resolve/stub-resolv.conf")
			},
			path: "/etc/resolv.conf",
			want: "/run/systemd/resolve/stub-resolv.conf",
		},
		{
			name: "relative target is relative to the link's directory",
			setup: func(t *testing.T, s *Tree) {
				mklink(t, s, "/etc/resolv.conf", "../run/resolvconf/resolv.conf")
			},
			path: "/etc/resolv.conf",
			want: "/run/resolvconf/resolv.conf",
		},
		{
			name: "chain of absolute and relative links",
			setup: func(t *testing.T, s *Tree) {
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
			setup: func(t *testing.T, s *Tree) {
				mklink(t, s, "/var/run", "/run")
				mkfile(t, s, "/run/nodedns/x", "x", 0o644)
			},
			path: "/var/run/nodedns/x",
			want: "/run/nodedns/x",
		},
		{
			name: "dot-dot in a target never leaves root",
			setup: func(t *testing.T, s *Tree) {
				mklink(t, s, "/etc/resolv.conf", "../../../../../../etc/passwd")
			},
			path: "/etc/resolv.conf",
			want: "/etc/passwd",
		},
		{
			name: "dot-dot in a target after a symlinked directory is physical",
			setup: func(t *testing.T, s *Tree) {
				mklink(t, s, "/etc/link", "/usr/lib/deep")
				mklink(t, s, "/etc/up", "link/../x")
				if err := os.MkdirAll(s.Host("/usr/lib/deep"), 0o755); err != nil {
					t.Fatal(err)
				}
			},
			path: "/etc/up",
			want: "/usr/lib/x",
		},
		{
			name: "exactly 40 hops is fine",
			setup: func(t *testing.T, s *Tree) {
				for i := 0; i < MaxSymlinks; i++ {
					mklink(t, s, fmt.Sprintf("/l%d", i), fmt.Sprintf("/l%d", i+1))
				}
			},
			path: "/l0",
			want: fmt.Sprintf("/l%d", MaxSymlinks),
		},
		{
			name: "41 hops is too many",
			setup: func(t *testing.T, s *Tree) {
				for i := 0; i <= MaxSymlinks; i++ {
					mklink(t, s, fmt.Sprintf("/l%d", i), fmt.Sprintf("/l%d", i+1))
				}
			},
			path:    "/l0",
			wantErr: "resolve /l0: more than 40 symlinks (a symlink loop?): too many levels of symbolic links",
		},
		{
			name: "loop",
			setup: func(t *testing.T, s *Tree) {
				mklink(t, s, "/etc/resolv.conf", "resolv.conf.b")
				mklink(t, s, "/etc/resolv.conf.b", "/etc/resolv.conf")
			},
			path:    "/etc/resolv.conf",
			wantErr: "resolve /etc/resolv.conf: more than 40 symlinks (a symlink loop?): too many levels of symbolic links",
		},
		{
			name:    "self loop",
			setup:   func(t *testing.T, s *Tree) { mklink(t, s, "/etc/resolv.conf", "resolv.conf") },
			path:    "/etc/resolv.conf",
			wantErr: "resolve /etc/resolv.conf: more than 40 symlinks (a symlink loop?): too many levels of symbolic links",
		},
		{
			name:    "file used as a directory",
			setup:   func(t *testing.T, s *Tree) { mkfile(t, s, "/etc/resolv.conf", "x", 0o644) },
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
			s := newTree(t)
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
		s := &Tree{Root: root}
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

// TestDropIns: systemd's order for configuration directories: sorted by file name across
// directories, an earlier directory's file shadowing a later one's of the same name, hidden and
// other-suffix files skipped, a missing directory fine.
func TestDropIns(t *testing.T) {
	s := newTree(t)
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

func TestIfNames(t *testing.T) {
	s := newTree(t)
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

func TestCheckConfigFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(p, []byte("upstreams: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stat := func() fs.FileInfo {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi
	}
	if err := CheckConfigFile(p, stat()); err != nil {
		t.Errorf("a 0644 file of the running user: %v", err)
	}
	if err := os.Chmod(p, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := CheckConfigFile(p, stat()); err == nil || !strings.Contains(err.Error(), "writable by others (mode -rw-rw-rw- (0666)") {
		t.Errorf("a world-writable config: %v", err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if err := CheckConfigFile(p, stat()); err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
			t.Errorf("a config owned by nobody: %v", err)
		}
	}
}

// memFS is a read-only in-memory tree for fuzzing ResolveLink: links maps a host path to a
// symlink target, dirs and files name what exists.
type memFS struct {
	FS
	links map[string]string
	dirs  map[string]bool
	files map[string]bool
}

type memInfo struct {
	name string
	mode fs.FileMode
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return 0 }
func (i memInfo) Mode() fs.FileMode  { return i.mode }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return i.mode.IsDir() }
func (i memInfo) Sys() any           { return nil }

func (m memFS) Lstat(name string) (fs.FileInfo, error) {
	switch {
	case name == "/" || m.dirs[name]:
		return memInfo{path.Base(name), fs.ModeDir | 0o755}, nil
	case m.files[name]:
		return memInfo{path.Base(name), 0o644}, nil
	}
	if _, ok := m.links[name]; ok {
		return memInfo{path.Base(name), fs.ModeSymlink | 0o777}, nil
	}
	return nil, &fs.PathError{Op: "lstat", Path: name, Err: fs.ErrNotExist}
}

func (m memFS) Readlink(name string) (string, error) {
	if t, ok := m.links[name]; ok {
		return t, nil
	}
	return "", &fs.PathError{Op: "readlink", Path: name, Err: fs.ErrInvalid}
}

// FuzzResolveLink builds a tree of up to four symlinks with fuzzed targets and resolves a fuzzed
// path: the walk must terminate, never panic, and always return a clean node path (inside root).
func FuzzResolveLink(f *testing.F) {
	f.Add("/etc/resolv.conf", "../run/x", "/run/x", "/etc/resolv.conf", "")
	f.Add("/etc/resolv.conf", "/a", "b", "../../../../c", "/d/../../e")
	f.Add("/a/b/c", "/", "..", ".", "")
	f.Add("/../../x/./y", "x", "/a/../x", "/etc/resolv.conf/x", "//")
	f.Fuzz(func(t *testing.T, p, t1, t2, t3, t4 string) {
		const root = "/fuzzroot"
		m := memFS{
			links: map[string]string{},
			dirs:  map[string]bool{root + "/etc": true, root + "/run": true, root + "/a": true},
			files: map[string]bool{root + "/run/x": true},
		}
		for i, target := range []string{t1, t2, t3, t4} {
			link := []string{"/etc/resolv.conf", "/run/x2", "/a/b", "/d"}[i]
			m.links[root+link] = target
		}
		s := &Tree{Root: root, FS: m}
		got, err := s.ResolveLink(p)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "resolve ") {
				t.Errorf("error %q does not name the operation", err)
			}
			return
		}
		if !path.IsAbs(got) || path.Clean(got) != got {
			t.Fatalf("ResolveLink(%q) = %q: not a clean node path", p, got)
		}
		if h := s.Host(got); h != root && !strings.HasPrefix(h, root+"/") {
			t.Fatalf("ResolveLink(%q) = %q: host path %q is outside the root", p, got, h)
		}
		// The result is a fixed point: resolving it again gives itself (it holds no symlink).
		again, err := s.ResolveLink(got)
		if err != nil || again != got {
			t.Errorf("ResolveLink(%q) = %q, %v; want itself", got, again, err)
		}
	})
}
