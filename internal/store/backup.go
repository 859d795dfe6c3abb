package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/internal/store/manifest"
)

// Entry kinds: what a path was before nodedns first changed it (the manifest's format).
const (
	KindAbsent    = manifest.KindAbsent
	KindFile      = manifest.KindFile
	KindSymlink   = manifest.KindSymlink
	KindAbsentDir = manifest.KindAbsentDir
)

// Entry is one backed-up path: its state before nodedns first changed it.
type Entry = manifest.Entry

// ManifestName is the manifest's file name inside StateDir/backup.
const ManifestName = manifest.Name

// Restore actions.
const (
	ActionRestored = "restored"
	ActionRemoved  = "removed"
	ActionKept     = "kept"
)

// RestoreResult is what Restore did with one path.
type RestoreResult struct {
	// Path is the entry's node path.
	Path string
	// Action is ActionRestored, ActionRemoved or ActionKept.
	Action string
	// Reason is why a path was kept (from the keep function).
	Reason string
}

// loadManifest reads the manifest in the host directory dir, trusted state only; a missing one
// means no entries.
func (s *Store) loadManifest(dir string) ([]Entry, error) {
	// Errors name the node path, as every message of nodedns does.
	name := path.Join(s.stateDir(), "backup", ManifestName)
	hp := filepath.Join(dir, ManifestName)
	fi, err := s.fsys().Lstat(hp)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, nodefs.UnwrapPath(err))
	}
	if entries, ok := manifests.get(hp, fi); ok {
		if err := untrusted(name, fi, false, 0o600); err != nil {
			return nil, err
		}
		return entries, nil
	}
	readAt := time.Now()
	data, err := s.readTrustedLstat(hp, name, manifestKind, fi)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	var ue *UntrustedError
	if errors.As(err, &ue) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	entries, err := manifest.Parse(name, data)
	if err == nil {
		manifests.put(hp, fi, readAt, entries)
	}
	return entries, err
}

// manifests remembers the last manifest this process read, by its lstat: a daemon pass backs up
// before every write, and the manifest rarely changes, so reading it again is one lstat when the
// file is the same inode with the same size and change time. A manifest changed within a second
// of being read is never remembered (a filesystem with coarse timestamps could give the next
// change the same time), as git does with racily clean files.
var manifests manifestCache

type manifestCache struct {
	mu      sync.Mutex
	hp      string
	key     manifestKey
	entries []Entry
}

type manifestKey struct {
	dev, ino   uint64
	size       int64
	mtim, ctim syscall.Timespec
}

func keyOf(fi fs.FileInfo) (manifestKey, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st == nil {
		return manifestKey{}, false
	}
	return manifestKey{dev: uint64(st.Dev), ino: st.Ino, size: st.Size, mtim: st.Mtim, ctim: st.Ctim}, true
}

func (c *manifestCache) get(hp string, fi fs.FileInfo) ([]Entry, bool) {
	k, ok := keyOf(fi)
	if !ok {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hp != hp || c.key != k {
		return nil, false
	}
	return slices.Clone(c.entries), true
}

func (c *manifestCache) put(hp string, fi fs.FileInfo, readAt time.Time, entries []Entry) {
	k, ok := keyOf(fi)
	if !ok || readAt.Sub(time.Unix(k.ctim.Unix())) < time.Second {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hp, c.key, c.entries = hp, k, slices.Clone(entries)
}

// Backups lists what the manifest holds, in the order the backups were taken. It never creates the
// state directory; untrusted state is refused as everywhere else.
func (s *Store) Backups() ([]Entry, error) {
	if _, err := s.stateHost(); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("list backups: %w", err)
	}
	node, hp, fi, err := s.lstatNode(path.Join(s.stateDir(), "backup"))
	if err != nil {
		return nil, fmt.Errorf("list backups: %w", s.nodeErr(err))
	}
	if fi == nil {
		return nil, nil
	}
	if err := untrusted(node, fi, true, 0o700); err != nil {
		return nil, fmt.Errorf("list backups: %w", err)
	}
	entries, err := s.loadManifest(hp)
	if err != nil {
		return nil, fmt.Errorf("list backups: %w", err)
	}
	return entries, nil
}

// Backup records, once per path (a later call for the same path is a no-op), the path's original
// state: absent, a regular file (bytes, mode, uid, gid), or a symlink (target, uid, gid); a final
// symlink is recorded, not followed. Stored under StateDir/backup as a manifest (JSON, written
// atomically) plus one file of bytes per content, named by its SHA-256. The copy is durable before
// the manifest names it.
func (s *Store) Backup(p string) error {
	p, err := nodefs.NodePath(p)
	if err != nil {
		return fmt.Errorf("back up %s: %w", p, err)
	}
	dir, unlock, err := s.lock()
	if err != nil {
		return fmt.Errorf("back up %s: %w", p, err)
	}
	defer unlock()
	return s.backupLocked(dir, nil, p)
}

// backupLocked is Backup under the state lock: it records the directories in dirs as KindAbsentDir
// (nodedns is about to create them) and each path in paths not backed up yet, with one manifest
// write.
func (s *Store) backupLocked(dir string, dirs []string, paths ...string) error {
	entries, err := s.loadManifest(dir)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, e := range entries {
		have[e.Path] = true
	}
	n := len(entries)
	for _, d := range dirs {
		if !have[d] {
			have[d] = true
			entries = append(entries, Entry{Path: d, Kind: KindAbsentDir, Time: s.clock().UTC()})
		}
	}
	for _, p := range paths {
		if have[p] {
			continue
		}
		have[p] = true
		e, data, err := s.capture(p)
		if err != nil {
			return fmt.Errorf("back up %s: %w", p, s.nodeErr(err))
		}
		if e.Kind == KindFile {
			if err := s.replace(filepath.Join(dir, e.SHA256), data, 0o600, -1, -1, nil); err != nil {
				return fmt.Errorf("back up %s: %w", p, s.nodeErr(err))
			}
		}
		entries = append(entries, e)
	}
	if len(entries) == n {
		return nil
	}
	data, err := manifest.Marshal(entries)
	if err != nil {
		return err
	}
	if err := s.replace(filepath.Join(dir, ManifestName), data, 0o600, -1, -1, nil); err != nil {
		return fmt.Errorf("write the backup manifest: %w", s.nodeErr(err))
	}
	return nil
}

// capture describes the current state of a node path (not following a final symlink) and returns
// the file's bytes for KindFile.
func (s *Store) capture(p string) (Entry, []byte, error) {
	e := Entry{Path: p, Time: s.clock().UTC()}
	_, hp, fi, err := s.lstatNode(p)
	if err != nil {
		return Entry{}, nil, err
	}
	fsys := s.fsys()
	switch {
	case fi == nil:
		e.Kind = KindAbsent
		return e, nil, nil
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := fsys.Readlink(hp)
		if err != nil {
			return Entry{}, nil, err
		}
		e.Kind, e.Target = KindSymlink, target
		e.UID, e.GID = nodefs.Owner(fi)
		return e, nil, nil
	case fi.Mode().IsRegular():
		if fi.Size() > maxBackupSize {
			return Entry{}, nil, fmt.Errorf("file is %d bytes, over the backup limit of %d bytes", fi.Size(), maxBackupSize)
		}
		data, err := s.tree().ReadHostNoFollow(hp, backupKind)
		if err != nil {
			return Entry{}, nil, err
		}
		label, err := s.captureLabel(hp)
		if err != nil {
			return Entry{}, nil, fmt.Errorf("read the SELinux label: %w", err)
		}
		sum := sha256.Sum256(data)
		e.Kind, e.Mode, e.SHA256, e.Label = KindFile, fi.Mode()&keepModeBits, hex.EncodeToString(sum[:]), label
		e.UID, e.GID = nodefs.Owner(fi)
		return e, data, nil
	default:
		return Entry{}, nil, fmt.Errorf("cannot back up a %s: only regular files and symlinks", nodefs.FileType(fi.Mode()))
	}
}

// Restore puts back every backed-up path exactly (bytes, mode, owner, symlink target), removes files
// that were absent before and the directories nodedns created for them (when empty), and then clears
// the manifest. Paths are undone in the reverse order of their backups. keep(path) may veto a path
// (e.g. the kubelet resolv.conf while kubelet still points at it): that path is left as it is,
// reported with the reason, and stays in the manifest so a later restore can finish it. With no
// backups it is a no-op that returns nothing. Restore of a symlink whose link was replaced puts the
// symlink back.
//
// Restore acts only on trusted state (see ReadState) and only on the paths nodedns manages
// (Store.Targets): an entry for any other path, or one that would set a setuid, setgid or sticky
// bit, is refused with an error and left in the manifest. Errors name the path; a failure on one
// path does not stop the others, and the manifest keeps the entries not restored so a second run
// can finish.
func (s *Store) Restore(keep func(path string) (kept bool, reason string)) ([]RestoreResult, error) {
	dir, unlock, err := s.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	entries, err := s.loadManifest(dir)
	if err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		return nil, nil
	}
	allowed := s.restorable(entries)
	var (
		results []RestoreResult
		errs    []error
		left    = make([]bool, len(entries))
	)
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		if err := allowed(e); err != nil {
			errs = append(errs, fmt.Errorf("restore %s: %w", e.Path, err))
			left[i] = true
			continue
		}
		if e.Kind == KindAbsentDir && holdsLeft(entries, left, e.Path) {
			left[i] = true // a file kept inside it is still to be restored: so is the directory
			continue
		}
		if keep != nil && e.Kind != KindAbsentDir {
			if kept, reason := keep(e.Path); kept {
				results = append(results, RestoreResult{Path: e.Path, Action: ActionKept, Reason: reason})
				left[i] = true
				continue
			}
		}
		r, err := s.restoreEntry(dir, e)
		if err != nil {
			errs = append(errs, fmt.Errorf("restore %s: %w", e.Path, s.nodeErr(err)))
			left[i] = true
			continue
		}
		results = append(results, r)
	}

	var remaining []Entry
	referenced := map[string]bool{}
	for i, e := range entries {
		if left[i] {
			remaining = append(remaining, e)
			referenced[e.SHA256] = true
		}
	}
	fsys := s.fsys()
	mp := filepath.Join(dir, ManifestName)
	if len(remaining) == 0 {
		if err := s.remove(mp); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return results, errors.Join(append(errs, fmt.Errorf("clear the backup manifest: %w", s.nodeErr(err)))...)
		}
		if err := syncDir(fsys, dir); err != nil {
			errs = append(errs, fmt.Errorf("clear the backup manifest: %w", s.nodeErr(err)))
		}
	} else {
		data, err := manifest.Marshal(remaining)
		if err == nil {
			err = s.replace(mp, data, 0o600, -1, -1, nil)
		}
		if err != nil {
			// The copies must stay: the old manifest still names them.
			return results, errors.Join(append(errs, fmt.Errorf("update the backup manifest: %w", s.nodeErr(err)))...)
		}
	}
	// Copies go only once no manifest names them; a leftover copy is harmless.
	for _, e := range entries {
		if e.Kind == KindFile && !referenced[e.SHA256] {
			referenced[e.SHA256] = true
			if err := s.remove(filepath.Join(dir, e.SHA256)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove the backup copy of %s: %w", e.Path, s.nodeErr(err)))
			}
		}
	}
	return results, errors.Join(errs...)
}

// holdsLeft reports whether an entry left in the manifest lies inside the directory dir.
func holdsLeft(entries []Entry, left []bool, dir string) bool {
	for i, e := range entries {
		if left[i] && strings.HasPrefix(e.Path, dir+"/") {
			return true
		}
	}
	return false
}

// restoreEntry puts one path back into its recorded state. A directory nodedns created that holds
// something else now is kept (ActionKept, with the reason).
func (s *Store) restoreEntry(dir string, e Entry) (RestoreResult, error) {
	r := RestoreResult{Path: e.Path, Action: ActionRestored}
	_, hp, fi, err := s.lstatForWrite(e.Path)
	if err != nil {
		return r, err
	}
	fsys := s.fsys()
	if e.Kind == KindAbsentDir {
		r.Action = ActionRemoved
		switch {
		case fi == nil:
			return r, nil
		case !fi.IsDir():
			r.Action, r.Reason = ActionKept, "nodedns made it a directory, but it is a "+nodefs.FileType(fi.Mode())+" now: left as it is"
			return r, nil
		}
		if err := s.remove(hp); err != nil {
			if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
				r.Action, r.Reason = ActionKept, "nodedns created this directory, but it is not empty now: left as it is"
				return r, nil
			}
			return r, err
		}
		return r, syncDir(fsys, filepath.Dir(hp))
	}
	if fi != nil && fi.IsDir() {
		return r, fmt.Errorf("is a directory now, not touching it")
	}
	switch e.Kind {
	case KindAbsent:
		r.Action = ActionRemoved
		if fi == nil {
			return r, nil
		}
		if err := s.remove(hp); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return r, err
		}
		return r, syncDir(fsys, filepath.Dir(hp))

	case KindSymlink:
		if fi != nil && fi.Mode()&fs.ModeSymlink != 0 {
			if cur, err := fsys.Readlink(hp); err == nil && cur == e.Target {
				if u, g := nodefs.Owner(fi); u != e.UID || g != e.GID {
					if err := s.lchown(hp, e.UID, e.GID); err != nil {
						return r, err
					}
				}
				return r, nil
			}
		}
		return r, s.replaceWithSymlink(hp, e)

	case KindFile:
		name := path.Join(s.stateDir(), "backup", e.SHA256)
		data, err := s.readTrusted(filepath.Join(dir, e.SHA256), name, backupKind)
		if err != nil {
			return r, fmt.Errorf("read the backup copy: %w", err)
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != e.SHA256 {
			return r, fmt.Errorf("backup copy %s is corrupt (sha256 mismatch), not restoring it", name)
		}
		if fi != nil && fi.Mode().IsRegular() && fi.Mode()&keepModeBits == e.Mode && fi.Size() == int64(len(data)) {
			if u, g := nodefs.Owner(fi); u == e.UID && g == e.GID && s.sameLabel(hp, e.Label) {
				if cur, err := s.tree().ReadHostNoFollow(hp, backupKind); err == nil && bytes.Equal(cur, data) {
					return r, nil
				}
			}
		}
		if fi == nil {
			if err := fsys.MkdirAll(filepath.Dir(hp), 0o755); err != nil {
				return r, err
			}
		}
		// The recorded label, whatever the file has now; a backup without one keeps the file's.
		err = s.replace(hp, data, e.Mode, e.UID, e.GID, recorded(e.Label))
		if isBindMount(err) && fi != nil && fi.Mode().IsRegular() {
			if err := s.writeInPlace(hp, data); err != nil {
				return r, fmt.Errorf("in place (rename impossible, a bind mount?): %w", err)
			}
			// Label, mode, then owner, as in replace; on the open file, never by path.
			return r, s.chmodChown(hp, recorded(e.Label), e.Mode&^specialBits, e.UID, e.GID)
		}
		return r, err
	}
	return r, fmt.Errorf("unknown kind %q", e.Kind)
}

// replaceWithSymlink atomically puts a symlink at hostPath, whatever non-directory is there now: a
// new link under a temp name, then rename over the path.
func (s *Store) replaceWithSymlink(hostPath string, e Entry) error {
	fsys := s.fsys()
	dir, base := filepath.Split(hostPath)
	dir = filepath.Clean(dir)
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var tmp string
	for try := 0; ; try++ {
		tmp = filepath.Join(dir, fmt.Sprintf(".%s.nodedns-%d.tmp", base, rand.Uint32()))
		err := s.symlink(e.Target, tmp)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) || try >= 10 {
			return err
		}
	}
	fi, err := fsys.Lstat(tmp)
	if err == nil {
		if u, g := nodefs.Owner(fi); u != e.UID || g != e.GID {
			err = s.lchown(tmp, e.UID, e.GID)
		}
	}
	if err == nil {
		err = s.rename(tmp, hostPath)
	}
	if err != nil {
		s.remove(tmp)
		return err
	}
	return syncDir(fsys, dir)
}
