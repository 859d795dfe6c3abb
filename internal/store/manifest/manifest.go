// Package manifest is the format of nodedns's backup manifest (docs/contract.md, "Where things
// live"): what each path was before nodedns first changed it. The store writes it; the node's
// readers look into it (the NetworkManager file nodedns replaced), so it is a leaf of its own.
package manifest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/nodedns/nodedns/internal/nodefs"
)

// Entry kinds: what a path was before nodedns first changed it.
const (
	KindAbsent  = "absent"
	KindFile    = "file"
	KindSymlink = "symlink"
	// KindAbsentDir is a directory that did not exist until nodedns made it for a file it created
	// (/etc/systemd/resolved.conf.d): restore removes it again when it is empty.
	KindAbsentDir = "absent-dir"
)

// Name is the manifest's file name inside the state directory's backup directory.
const Name = "manifest.json"

// manifestVersion is the newest manifest format this package writes and reads; a newer one is
// refused rather than half-understood (a downgraded nodedns must not restore what it cannot read).
// Version 2 added KindAbsentDir; a manifest without such an entry is still written as version 1, so
// that an older nodedns can restore it.
const manifestVersion = 2

// Entry is one backed-up path: its state before nodedns first changed it.
type Entry struct {
	// Path is the node path as it was given to Write, Remove or Backup (cleaned).
	Path string
	// Kind is KindAbsent, KindFile or KindSymlink.
	Kind string
	// Mode holds permission, setuid, setgid and sticky bits (KindFile only).
	Mode fs.FileMode
	// UID and GID are the owner (KindFile and KindSymlink).
	UID, GID int
	// Target is the symlink's target as stored (KindSymlink only).
	Target string
	// SHA256 is the hex digest of the file's bytes, also the name of the copy in StateDir/backup
	// (KindFile only).
	SHA256 string
	// Label is the file's SELinux label, its security.selinux extended attribute exactly as the
	// kernel gave it ("system_u:object_r:net_conf_t:s0" and the NUL SELinux ends it with), "" when
	// it had none or none was recorded (KindFile only; manifests before labels were kept have none).
	// Restore sets it on the file it puts back (docs/contract.md, invariant 4).
	Label string
	// Time is when the backup was taken.
	Time time.Time
}

// manifestJSON is the on-disk form of the manifest: octal modes, lowercase keys, a version.
type manifestJSON struct {
	Version int         `json:"version"`
	Entries []entryJSON `json:"entries"`
}

type entryJSON struct {
	Path   string    `json:"path"`
	Kind   string    `json:"kind"`
	Mode   string    `json:"mode,omitempty"`
	UID    int       `json:"uid"`
	GID    int       `json:"gid"`
	Target string    `json:"target,omitempty"`
	SHA256 string    `json:"sha256,omitempty"`
	Label  string    `json:"label,omitempty"`
	Time   time.Time `json:"time"`
}

// Parse decodes and validates a backup manifest; name (a path) is used in errors only.
// A syntax error names the line and column; an invalid entry names its index and path.
func Parse(name string, data []byte) ([]Entry, error) {
	var m manifestJSON
	if err := json.Unmarshal(data, &m); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			line, col := lineCol(data, se.Offset)
			return nil, fmt.Errorf("%s:%d:%d: %v", name, line, col, se)
		case errors.As(err, &te):
			line, col := lineCol(data, te.Offset)
			return nil, fmt.Errorf("%s:%d:%d: %s is a JSON %s, want %s", name, line, col, te.Field, te.Value, te.Type)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if m.Version < 1 || m.Version > manifestVersion {
		return nil, fmt.Errorf("%s: unsupported manifest version %d (want 1 to %d)", name, m.Version, manifestVersion)
	}
	entries := make([]Entry, 0, len(m.Entries))
	seen := make(map[string]bool, len(m.Entries))
	for i, j := range m.Entries {
		e, err := j.entry()
		if err != nil {
			return nil, fmt.Errorf("%s: entry %d (%q): %v", name, i, j.Path, err)
		}
		if e.Kind == KindAbsentDir && m.Version < 2 {
			return nil, fmt.Errorf("%s: entry %d (%q): kind %s needs manifest version 2", name, i, j.Path, e.Kind)
		}
		if seen[e.Path] {
			return nil, fmt.Errorf("%s: entry %d (%q): path backed up twice", name, i, j.Path)
		}
		seen[e.Path] = true
		entries = append(entries, e)
	}
	return entries, nil
}

func (j entryJSON) entry() (Entry, error) {
	e := Entry{Path: j.Path, Kind: j.Kind, UID: j.UID, GID: j.GID, Time: j.Time}
	if p, err := nodefs.NodePath(j.Path); err != nil {
		return Entry{}, err
	} else if p != j.Path {
		return Entry{}, fmt.Errorf("path is not clean (want %q)", p)
	}
	// The manifest stores UTC; a time that has no year 0-9999 in UTC cannot be written back.
	if y := j.Time.UTC().Year(); y < 0 || y > 9999 {
		return Entry{}, fmt.Errorf("time %s is out of range", j.Time.Format(time.RFC3339))
	}
	switch j.Kind {
	case KindAbsent, KindAbsentDir:
		e.UID, e.GID = 0, 0
		return e, nil
	case KindFile:
		if len(j.SHA256) != sha256.Size*2 || strings.ToLower(j.SHA256) != j.SHA256 {
			return Entry{}, fmt.Errorf("sha256 %q is not 64 lowercase hex digits", j.SHA256)
		}
		if _, err := hex.DecodeString(j.SHA256); err != nil {
			return Entry{}, fmt.Errorf("sha256 %q is not 64 lowercase hex digits", j.SHA256)
		}
		u, err := strconv.ParseUint(j.Mode, 8, 32)
		if err != nil || u > 0o7777 {
			return Entry{}, fmt.Errorf("mode %q is not an octal mode up to 07777", j.Mode)
		}
		e.Mode = nodefs.FileModeOf(uint32(u))
		e.SHA256 = j.SHA256
		if j.Label != "" {
			if err := CheckLabel(j.Label); err != nil {
				return Entry{}, err
			}
			e.Label = j.Label
		}
	case KindSymlink:
		if j.Target == "" || strings.IndexByte(j.Target, 0) >= 0 {
			return Entry{}, fmt.Errorf("symlink target %q is empty or has a NUL byte", j.Target)
		}
		e.Target = j.Target
	default:
		return Entry{}, fmt.Errorf("unknown kind %q (want %s, %s, %s or %s)", j.Kind, KindAbsent, KindFile, KindSymlink, KindAbsentDir)
	}
	// -1 is chown(2)'s "leave as it is": an FS that reports no owner records it.
	if j.UID < -1 || j.GID < -1 || int64(j.UID) >= 1<<32-1 || int64(j.GID) >= 1<<32-1 {
		return Entry{}, fmt.Errorf("owner %d:%d is out of range", j.UID, j.GID)
	}
	return e, nil
}

// Marshal encodes entries as a manifest Parse reads back.
func Marshal(entries []Entry) ([]byte, error) {
	m := manifestJSON{Version: 1, Entries: make([]entryJSON, 0, len(entries))}
	for _, e := range entries {
		if e.Kind == KindAbsentDir {
			m.Version = 2
		}
		j := entryJSON{Path: e.Path, Kind: e.Kind, UID: e.UID, GID: e.GID, Target: e.Target, SHA256: e.SHA256, Time: e.Time.UTC()}
		if e.Kind == KindFile {
			j.Mode = fmt.Sprintf("%04o", nodefs.UnixMode(e.Mode))
			j.Label = e.Label
		}
		m.Entries = append(m.Entries, j)
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		// Only a time outside years 0-9999 gets here.
		return nil, fmt.Errorf("marshal manifest: %w", err)
	}
	return append(data, '\n'), nil
}

// MaxLabel bounds a recorded SELinux label: real ones are a few dozen bytes (user:role:type:level,
// the level with its categories), and the manifest must stay small.
const MaxLabel = 4096

// CheckLabel reports why label (a security.selinux value) cannot be recorded, nil when it can: an
// SELinux context is printable ASCII without spaces (selinux_file_context(5)), and the kernel hands
// it out with one NUL at the end. Anything else in the attribute is not a label this format keeps
// (JSON would not carry other bytes back exactly).
func CheckLabel(label string) error {
	ctx := strings.TrimSuffix(label, "\x00")
	if ctx == "" || len(label) > MaxLabel {
		return fmt.Errorf("SELinux label %q is empty or longer than %d bytes", label, MaxLabel)
	}
	for i := 0; i < len(ctx); i++ {
		if ctx[i] <= ' ' || ctx[i] > '~' {
			return fmt.Errorf("SELinux label %q is not a context (printable ASCII without spaces, then at most one NUL)", label)
		}
	}
	return nil
}

// lineCol turns a byte offset as encoding/json reports it (bytes read up to and including the
// offending one) into the 1-based line and column of the offending byte.
func lineCol(data []byte, off int64) (line, col int) {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	if off < 0 {
		off = 0
	}
	before := data[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	// Offset counts the offending byte too, so it is the 1-based column of that byte.
	col = int(off) - (bytes.LastIndexByte(before, '\n') + 1)
	if col < 1 {
		col = 1
	}
	return line, col
}
