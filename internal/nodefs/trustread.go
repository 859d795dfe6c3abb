package nodefs

import (
	"errors"
	"fmt"
	"io/fs"
)

// Trusted reads (docs/contract.md "Kubelet's config"): nodedns runs as root and reads paths that a
// process names on its command line (kubelet's --config, --config-dir and --resolv-conf). It reads
// such a path only when nobody but root could have written what it says: the rule nodedns applies
// to the directories it changes (docs/contract.md, "Directories other users can write") and to its
// own state, here for a read.

// TrustedOwner reports whether fi (an lstat) is owned by root or the user running nodedns and
// writable by neither its group nor others: what nodedns trusts. An FS that reports no owner (an
// in-memory test tree) passes.
func TrustedOwner(fi fs.FileInfo) bool {
	uid, _ := Owner(fi)
	if uid < 0 {
		return true
	}
	return (uid == 0 || uid == Euid()) && fi.Mode()&0o022 == 0
}

// UntrustedReadError is a node path nodedns does not read: the file itself, or a directory on the
// way to it (the targets of symlinks included), is someone else's or writable by others.
type UntrustedReadError struct {
	// Path is the node path asked for; At the file or directory refused (as a node path): a
	// directory on the way when Dir, else the file Path resolves to.
	Path, At string
	Dir      bool
	// UID and Mode are what At has.
	UID  int
	Mode fs.FileMode
}

func (e *UntrustedReadError) Error() string {
	what := "it"
	switch {
	case e.Dir:
		what = "the directory " + e.At + " on the way to it"
	case e.At != e.Path:
		what = "its target " + e.At
	}
	return fmt.Sprintf("refusing to read %s: %s %s (owner uid %d, mode %s), so someone other than root could have written what it says",
		e.Path, what, untrustedWhy(e.UID, e.Mode), e.UID, ModeString(e.Mode))
}

// untrustedWhy says what makes an owner and mode untrusted (TrustedOwner false).
func untrustedWhy(uid int, mode fs.FileMode) string {
	switch {
	case uid > 0 && uid != Euid():
		return fmt.Sprintf("is owned by uid %d", uid)
	case mode&0o002 != 0:
		return "is writable by others"
	}
	return "is writable by its group"
}

// Walker resolves a node path inside its root, calling visit with every directory on the way
// (*Tree, and the store, which reads through one).
type Walker interface {
	ResolveVisitInfo(p string, followLast bool, visit func(dir string, fi fs.FileInfo) error) (string, fs.FileInfo, error)
}

// CheckTrusted returns nil when the node path p may be read as root's word: every directory on the
// way (the targets of symlinks included) and p itself are TrustedOwner. A missing p is nil (the
// read will say it is missing); else an *UntrustedReadError, or the walk's error. r must be a
// Walker: a reader that cannot say who owns a path is refused.
func CheckTrusted(r Reader, p string) error {
	w, p, err := walker(r, p)
	if err != nil {
		return err
	}
	final, fi, err := w.ResolveVisitInfo(p, true, func(dir string, fi fs.FileInfo) error {
		if TrustedOwner(fi) {
			return nil
		}
		uid, _ := Owner(fi)
		return &UntrustedReadError{Path: p, At: dir, Dir: dir != p, UID: uid, Mode: fi.Mode()}
	})
	var ue *UntrustedReadError
	switch {
	case errors.As(err, &ue):
		return err
	case err != nil:
		return fmt.Errorf("read %s: %w", p, err)
	case fi == nil || TrustedOwner(fi):
		return nil
	}
	uid, _ := Owner(fi)
	return &UntrustedReadError{Path: p, At: final, UID: uid, Mode: fi.Mode()}
}

// CheckState returns nil when the node path p, one of nodedns's own records in its state
// directory, may be believed: every directory on the way (symlinks followed, their targets checked
// too) and p itself trusted state (Untrusted: root's or the running user's, writable by nobody
// else), p never a symlink. A missing p is nil. Whoever can write a record chooses what nodedns does
// with it: the unit a kubelet restart is owed to, the search domains kept out of the files it
// writes (docs/contract.md "Where things live").
func CheckState(r Reader, p string) error {
	w, p, err := walker(r, p)
	if err != nil {
		return err
	}
	if _, _, err := w.ResolveVisitInfo(p, false, func(dir string, fi fs.FileInfo) error {
		return Untrusted(dir, fi, true, 0o755)
	}); err != nil {
		return err
	}
	fi, err := r.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("read %s: %w", p, err)
	}
	return Untrusted(p, fi, false, 0o644)
}

// walker is r as a Walker, with p as a clean node path: a reader that cannot say who owns a path
// is refused.
func walker(r Reader, p string) (Walker, string, error) {
	w, ok := r.(Walker)
	if !ok {
		return nil, p, fmt.Errorf("refusing to read %s: this reader cannot say who owns it", p)
	}
	np, err := NodePath(p)
	if err != nil {
		return nil, p, fmt.Errorf("read %s: %w", p, err)
	}
	return w, np, nil
}
