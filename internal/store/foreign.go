package store

import (
	"fmt"
	"io/fs"
	"path"

	"github.com/nodedns/nodedns/internal/nodefs"
)

// Foreign directories (docs/contract.md, "Directories other users can write"): nodedns runs as root and writes
// into directories other software owns. A directory another user can write lets that user plant a
// symlink where nodedns writes, or rename one over its temp file, and turn a write as root against
// any file of the node (/etc/shadow replaced by Prometheus text through node_exporter's textfile
// directory). So before nodedns changes anything under a directory, every directory on the way
// from the root to it (the targets of symlinks on the way included) must be owned by root or the
// user running nodedns and writable by neither group nor others; else the change is refused with a
// ForeignDirError naming the directory. Symlinks in such directories are root's own and followed.

// ForeignDirError is a change refused because a directory on the way to its target is not trusted.
type ForeignDirError struct {
	// Path is the node path nodedns was to change.
	Path string
	// Dir is the node path of the directory refused.
	Dir string
	// UID and GID own Dir; Mode is its mode.
	UID, GID int
	Mode     fs.FileMode
}

func (e *ForeignDirError) Error() string {
	why := "is writable by others"
	switch {
	case e.UID > 0 && e.UID != nodefs.Euid():
		why = fmt.Sprintf("is owned by uid %d, neither root nor uid %d", e.UID, nodefs.Euid())
	case e.Mode&0o020 != 0 && e.Mode&0o002 == 0:
		why = "is writable by its group"
	}
	fix := fmt.Sprintf("make it root's and writable by root only (chown root:root %s && chmod go-w %s), or point nodedns elsewhere", e.Dir, e.Dir)
	if euid := nodefs.Euid(); euid != 0 {
		// Only root can give a directory to root: a user working on a copy of the node's files
		// (--root) makes the copy theirs and writable by them only, or runs nodedns as root.
		fix = fmt.Sprintf("nodedns must run as root on a node; on a copy of the node's files (--root), make it uid %d's and writable by it only (chmod go-w %s)", euid, e.Dir)
	}
	return fmt.Sprintf("refusing to change %s: the directory %s on the way to it %s (owner %d:%d, mode %s), so another user could plant a symlink there and turn nodedns's write against any file of the node; %s",
		e.Path, e.Dir, why, e.UID, e.GID, nodefs.ModeString(e.Mode), fix)
}

// trustDir is the visit of a checked resolution: nil for a directory nodedns may change things in.
func trustDir(target string) func(dir string, fi fs.FileInfo) error {
	return func(dir string, fi fs.FileInfo) error {
		// The predicate is nodefs's: the readers apply it to the paths a process names.
		if nodefs.TrustedOwner(fi) {
			return nil
		}
		uid, gid := nodefs.Owner(fi)
		return &ForeignDirError{Path: target, Dir: dir, UID: uid, GID: gid, Mode: fi.Mode()}
	}
}

// resolveForWriteInfo resolves a node path for a change: the final path (symlinks followed inside
// Root) with every directory on the way checked (trustDir), and the walk's lstat of the final path
// (nil when it did not make one: the path is missing).
func (s *Store) resolveForWriteInfo(p string) (string, fs.FileInfo, error) {
	return s.tree().ResolveVisitInfo(p, true, trustDir(p))
}

// lstatForWrite is lstatNode for a change: the parent resolved with every directory on the way
// checked, the last component not followed.
func (s *Store) lstatForWrite(p string) (node, hostPath string, fi fs.FileInfo, err error) {
	dir, err := s.tree().ResolveVisit(path.Dir(p), true, trustDir(p))
	if err != nil {
		return "", "", nil, err
	}
	return s.lstatNode(path.Join(dir, path.Base(p)))
}
