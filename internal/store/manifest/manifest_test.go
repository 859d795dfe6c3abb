package manifest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var testTime = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func TestParse(t *testing.T) {
	valid := `{
  "version": 1,
  "entries": [
    {"path": "/etc/resolv.conf", "kind": "symlink", "uid": 0, "gid": 0, "target": "../run/systemd/resolve/stub-resolv.conf", "time": "2025-03-01T12:00:00Z"},
    {"path": "/run/x", "kind": "file", "mode": "4755", "uid": 1000, "gid": 1001, "sha256": "` + sum("x") + `", "time": "2025-03-01T12:00:00Z"},
    {"path": "/etc/netplan/90-nodedns.yaml", "kind": "absent", "uid": 0, "gid": 0, "time": "2025-03-01T12:00:00Z", "future": "ignored"}
  ]
}
`
	entry := func(fields string) string {
		return `{"version": 1, "entries": [` + fields + `]}`
	}
	tests := []struct {
		name    string
		in      string
		want    []Entry
		wantErr string
	}{
		{
			name: "valid, unknown fields ignored",
			in:   valid,
			want: []Entry{
				{Path: "/etc/resolv.conf", Kind: KindSymlink, Target: "../run/systemd/resolve/stub-resolv.conf", Time: testTime},
				{Path: "/run/x", Kind: KindFile, Mode: 0o755 | fs.ModeSetuid, UID: 1000, GID: 1001, SHA256: sum("x"), Time: testTime},
				{Path: "/etc/netplan/90-nodedns.yaml", Kind: KindAbsent, Time: testTime},
			},
		},
		{name: "no entries", in: `{"version": 1, "entries": []}`, want: []Entry{}},
		{name: "syntax error", in: "{\n  \"version\": 1,\n  \"entries\": [}\n", wantErr: "m.json:3:15: invalid character '}' looking for beginning of value"},
		{name: "truncated", in: "{\"version\": 1", wantErr: "m.json:1:13: unexpected end of JSON input"},
		{name: "wrong type", in: "{\"version\": \"1\"}", wantErr: "m.json:1:15: version is a JSON string, want int"},
		{name: "missing version", in: `{"entries": []}`, wantErr: "m.json: unsupported manifest version 0 (want 1 to 2)"},
		{name: "newer version", in: `{"version": 3, "entries": []}`, wantErr: "m.json: unsupported manifest version 3 (want 1 to 2)"},
		{
			name: "version 2: directories nodedns created",
			in:   `{"version": 2, "entries": [{"path": "/etc/systemd/resolved.conf.d", "kind": "absent-dir", "uid": 7, "time": "2025-03-01T12:00:00Z"}]}`,
			want: []Entry{{Path: "/etc/systemd/resolved.conf.d", Kind: KindAbsentDir, Time: testTime}},
		},
		{
			name: "a file with its SELinux label, as the kernel gives it (a NUL at the end) or as set by hand",
			in:   entry(`{"path": "/etc/resolv.conf", "kind": "file", "mode": "0644", "sha256": "` + sum("x") + `", "label": "system_u:object_r:net_conf_t:s0\u0000"}, {"path": "/etc/hosts", "kind": "file", "mode": "0644", "sha256": "` + sum("y") + `", "label": "unconfined_u:object_r:etc_t:s0-s0:c0.c1023"}`),
			want: []Entry{
				{Path: "/etc/resolv.conf", Kind: KindFile, Mode: 0o644, SHA256: sum("x"), Label: "system_u:object_r:net_conf_t:s0\x00"},
				{Path: "/etc/hosts", Kind: KindFile, Mode: 0o644, SHA256: sum("y"), Label: "unconfined_u:object_r:etc_t:s0-s0:c0.c1023"},
			},
		},
		{name: "a label with a space", in: entry(`{"path": "/etc/x", "kind": "file", "mode": "0644", "sha256": "` + sum("x") + `", "label": "system_u:object_r:etc_t:s0 x"}`), wantErr: `m.json: entry 0 ("/etc/x"): SELinux label "system_u:object_r:etc_t:s0 x" is not a context (printable ASCII without spaces, then at most one NUL)`},
		{name: "a label that is only a NUL", in: entry(`{"path": "/etc/x", "kind": "file", "mode": "0644", "sha256": "` + sum("x") + `", "label": "\u0000"}`), wantErr: `m.json: entry 0 ("/etc/x"): SELinux label "\x00" is empty or longer than 4096 bytes`},
		{name: "a label with two NULs", in: entry(`{"path": "/etc/x", "kind": "file", "mode": "0644", "sha256": "` + sum("x") + `", "label": "a\u0000\u0000"}`), wantErr: `m.json: entry 0 ("/etc/x"): SELinux label "a\x00\x00" is not a context (printable ASCII without spaces, then at most one NUL)`},
		{name: "a label too long", in: entry(`{"path": "/etc/x", "kind": "file", "mode": "0644", "sha256": "` + sum("x") + `", "label": "` + strings.Repeat("a", MaxLabel+1) + `"}`), wantErr: `m.json: entry 0 ("/etc/x"): SELinux label "` + strings.Repeat("a", MaxLabel+1) + `" is empty or longer than 4096 bytes`},
		{name: "a directory entry needs version 2", in: entry(`{"path": "/etc/x", "kind": "absent-dir"}`), wantErr: `m.json: entry 0 ("/etc/x"): kind absent-dir needs manifest version 2`},
		{name: "relative path", in: entry(`{"path": "etc/x", "kind": "absent"}`), wantErr: `m.json: entry 0 ("etc/x"): node path "etc/x" is not absolute`},
		{name: "unclean path", in: entry(`{"path": "/etc//x", "kind": "absent"}`), wantErr: `m.json: entry 0 ("/etc//x"): path is not clean (want "/etc/x")`},
		{name: "unknown kind", in: entry(`{"path": "/etc/x", "kind": "dir"}`), wantErr: `m.json: entry 0 ("/etc/x"): unknown kind "dir" (want absent, file, symlink or absent-dir)`},
		{name: "bad sha256", in: entry(`{"path": "/etc/x", "kind": "file", "mode": "0644", "sha256": "../../etc/shadow"}`), wantErr: `m.json: entry 0 ("/etc/x"): sha256 "../../etc/shadow" is not 64 lowercase hex digits`},
		{name: "uppercase sha256", in: entry(`{"path": "/etc/x", "kind": "file", "mode": "0644", "sha256": "` + strings.ToUpper(sum("x")) + `"}`), wantErr: `m.json: entry 0 ("/etc/x"): sha256 "` + strings.ToUpper(sum("x")) + `" is not 64 lowercase hex digits`},
		{name: "bad mode", in: entry(`{"path": "/etc/x", "kind": "file", "mode": "0999", "sha256": "` + sum("x") + `"}`), wantErr: `m.json: entry 0 ("/etc/x"): mode "0999" is not an octal mode up to 07777`},
		{name: "mode too big", in: entry(`{"path": "/etc/x", "kind": "file", "mode": "10644", "sha256": "` + sum("x") + `"}`), wantErr: `m.json: entry 0 ("/etc/x"): mode "10644" is not an octal mode up to 07777`},
		{name: "empty target", in: entry(`{"path": "/etc/x", "kind": "symlink"}`), wantErr: `m.json: entry 0 ("/etc/x"): symlink target "" is empty or has a NUL byte`},
		{name: "bad owner", in: entry(`{"path": "/etc/x", "kind": "symlink", "target": "y", "uid": -2}`), wantErr: `m.json: entry 0 ("/etc/x"): owner -2:0 is out of range`},
		{name: "time before year 0 in UTC", in: entry(`{"path": "/etc/x", "kind": "absent", "time": "0000-01-01T00:00:00+01:00"}`), wantErr: `m.json: entry 0 ("/etc/x"): time 0000-01-01T00:00:00+01:00 is out of range`},
		{name: "duplicate", in: entry(`{"path": "/etc/x", "kind": "absent"}, {"path": "/etc/x", "kind": "absent"}`), wantErr: `m.json: entry 1 ("/etc/x"): path backed up twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse("m.json", []byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("Parse error =\n%v\nwant\n%s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse (-want +got):\n%s", diff)
			}
			data, err := Marshal(got)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			again, err := Parse("m.json", data)
			if err != nil {
				t.Fatalf("Parse(Marshal(...)): %v", err)
			}
			if diff := cmp.Diff(got, again); diff != "" {
				t.Errorf("round trip (-first +second):\n%s", diff)
			}
		})
	}
}

func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(`{"version": 1, "entries": [{"path": "/etc/resolv.conf", "kind": "symlink", "target": "/run/x", "time": "2025-03-01T12:00:00Z"}]}`))
	f.Add([]byte(`{"version": 1, "entries": [{"path": "/run/x", "kind": "file", "mode": "0644", "uid": 5, "gid": 6, "sha256": "` + sum("x") + `"}]}`))
	f.Add([]byte(`{"version": 1, "entries": [{"path": "/a", "kind": "absent"}]}`))
	f.Add([]byte(`{"version": 1, "entries": [{"path": "/etc/resolv.conf", "kind": "file", "mode": "0644", "sha256": "` + sum("x") + `", "label": "system_u:object_r:net_conf_t:s0\u0000"}]}`))
	f.Add([]byte("{\n\"version\": 1,\n\"entries\": [\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := Parse("m.json", data)
		if err != nil {
			if strings.HasSuffix(err.Error(), ".") || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q breaks the error style", err)
			}
			return
		}
		for _, e := range entries {
			if !path.IsAbs(e.Path) || path.Clean(e.Path) != e.Path {
				t.Errorf("accepted unclean path %q", e.Path)
			}
			if e.Kind == KindFile && (len(e.SHA256) != 64 || strings.ContainsAny(e.SHA256, "/.")) {
				t.Errorf("accepted copy name %q", e.SHA256)
			}
			if e.Label != "" && (e.Kind != KindFile || CheckLabel(e.Label) != nil) {
				t.Errorf("accepted label %q on a %s entry", e.Label, e.Kind)
			}
		}
		out, err := Marshal(entries)
		if err != nil {
			t.Fatalf("Marshal of a parsed manifest: %v", err)
		}
		again, err := Parse("m.json", out)
		if err != nil {
			t.Fatalf("re-parse of a marshalled valid manifest: %v", err)
		}
		if diff := cmp.Diff(entries, again); diff != "" {
			t.Errorf("round trip (-first +second):\n%s", diff)
		}
	})
}

func ExampleParse() {
	entries, err := Parse("/var/lib/nodedns/backup/manifest.json", []byte(`{"version": 1, "entries": [
  {"path": "/etc/resolv.conf", "kind": "symlink", "uid": 0, "gid": 0, "target": "../run/systemd/resolve/stub-resolv.conf", "time": "2025-03-01T12:00:00Z"}]}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, e := range entries {
		fmt.Println(e.Path, e.Kind, e.Target)
	}
	// Output: /etc/resolv.conf symlink ../run/systemd/resolve/stub-resolv.conf
}
