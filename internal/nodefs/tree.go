package nodefs

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// MaxSymlinks is how many symlinks ResolveLink follows before giving up: Linux's MAXSYMLINKS
// (include/linux/namei.h, 40 since 4.2), the limit the kernel applies to the same walk.
const MaxSymlinks = 40

// Tree is a node's filesystem as a Reader sees it: the node's "/" at the host directory Root, read
// through FS. Every path given to its methods is a node path ("/etc/resolv.conf") resolved under
// Root, the way `netplan --root-dir` does, so tests and `nodedns --root DIR` work on a fake node.
type Tree struct {
	// Root is the host directory the node's "/" is at; "" or "/" means the real system.
	Root string
	// FS is the filesystem; nil means OS().
	FS FS
}

func (t *Tree) fsys() FS {
	if t.FS == nil {
		return OS()
	}
	return t.FS
}

// Host turns a clean node path into the host path under Root.
func (t *Tree) Host(node string) string {
	if t.Root == "" {
		return filepath.FromSlash(node)
	}
	return filepath.Join(t.Root, filepath.FromSlash(node))
}

// NodePath validates and cleans a node path. Cleaning is lexical, as filepath.Join does with a
// --root: ".." in a given path never follows a symlink back up (".." in a symlink's target is
// physical, see Resolve). On error it returns p unchanged, for the message.
func NodePath(p string) (string, error) {
	if !strings.HasPrefix(p, "/") {
		return p, fmt.Errorf("node path %q is not absolute", p)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return p, fmt.Errorf("node path %q contains a NUL byte", p)
	}
	return path.Clean(p), nil
}

// ResolveLink follows a symlink chain at a node path INSIDE Root (absolute targets are taken relative
// to Root, relative ones to the link's directory; at most MaxSymlinks hops; a loop is an error) and
// returns the final node path. A non-symlink returns itself.
//
// Every component is resolved, not only the last one: Debian's /var/run -> /run is absolute, and
// letting the kernel follow it would leave Root. ".." never climbs above Root, as in a chroot.
// Components that do not exist are kept as they are, so a dangling link resolves to the path its
// target would have (where open(2) with O_CREAT would create it).
func (t *Tree) ResolveLink(p string) (string, error) {
	p, err := NodePath(p)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", p, err)
	}
	return t.Resolve(p, true)
}

// Resolve walks a clean node path component by component inside Root; with followLast false the
// final component is not followed (lstat semantics, for the parent of a path).
func (t *Tree) Resolve(p string, followLast bool) (string, error) {
	return t.ResolveVisit(p, followLast, nil)
}

// ResolveVisit is Resolve calling visit with every directory the walk passes through (the root
// first, then each existing directory component, the targets of symlinks included), as lstat
// describes it; an error from visit stops the walk and is returned as it is. A symlink is only
// followed from a directory visit has accepted, so a writer that refuses directories other users
// can write never follows a link one of them could have planted.
func (t *Tree) ResolveVisit(p string, followLast bool, visit func(dir string, fi fs.FileInfo) error) (string, error) {
	final, _, err := t.ResolveVisitInfo(p, followLast, visit)
	return final, err
}

// ResolveVisitInfo is ResolveVisit that also returns the lstat the walk made of the final path
// (not a symlink), so a caller need not look it up again; nil when the walk did not lstat it (it
// is missing, or followLast is false).
func (t *Tree) ResolveVisitInfo(p string, followLast bool, visit func(dir string, fi fs.FileInfo) error) (string, fs.FileInfo, error) {
	final, fi, err := t.resolveVisit(p, followLast, visit)
	if err != nil {
		return "", nil, err
	}
	return final, fi, nil
}

func (t *Tree) resolveVisit(p string, followLast bool, visit func(dir string, fi fs.FileInfo) error) (string, fs.FileInfo, error) {
	var last fs.FileInfo // the lstat of resolved, when the walk made one
	fsys := t.fsys()
	rest := strings.Split(p, "/")
	resolved := "/"
	hops := 0
	if visit != nil {
		fi, err := fsys.Lstat(t.Host("/"))
		if err != nil {
			return "", nil, fmt.Errorf("resolve %s: %w", p, err)
		}
		if err := visit("/", fi); err != nil {
			return "", nil, err
		}
	}
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			// resolved never contains a symlink, so going up lexically is going up physically.
			resolved = path.Dir(resolved)
			last = nil
			continue
		}
		next := path.Join(resolved, c)
		if len(rest) == 0 && !followLast {
			resolved, last = next, nil
			break
		}
		fi, err := fsys.Lstat(t.Host(next))
		if errors.Is(err, fs.ErrNotExist) {
			resolved, last = next, nil
			continue
		}
		if err != nil {
			return "", nil, fmt.Errorf("resolve %s: %w", p, err)
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			if len(rest) > 0 && !fi.IsDir() && hasComponent(rest) {
				return "", nil, &notDir{fmt.Sprintf("resolve %s: %s is not a directory", p, next)}
			}
			if visit != nil && fi.IsDir() {
				if err := visit(next, fi); err != nil {
					return "", nil, err
				}
			}
			resolved, last = next, fi
			continue
		}
		hops++
		if hops > MaxSymlinks {
			return "", nil, fmt.Errorf("resolve %s: more than %d symlinks (a symlink loop?): %w", p, MaxSymlinks, syscall.ELOOP)
		}
		target, err := fsys.Readlink(t.Host(next))
		if err != nil {
			return "", nil, fmt.Errorf("resolve %s: %w", p, err)
		}
		if target == "" {
			// Linux refuses to follow an empty symlink (ENOENT); so do we, rather than guess.
			return "", nil, fmt.Errorf("resolve %s: symlink %s has an empty target", p, next)
		}
		if strings.IndexByte(target, 0) >= 0 {
			return "", nil, fmt.Errorf("resolve %s: symlink %s has a NUL byte in its target", p, next)
		}
		if strings.HasPrefix(target, "/") {
			resolved = "/"
		}
		last = nil
		rest = append(strings.Split(target, "/"), rest...)
	}
	return resolved, last, nil
}

// hasComponent reports whether the rest of a path names anything below the current component
// ("file/" and "file/." still name the file itself to this walk).
func hasComponent(rest []string) bool {
	for _, c := range rest {
		if c != "" && c != "." {
			return true
		}
	}
	return false
}

// LstatNode resolves the directory part of a node path inside Root and lstats the last component.
// It returns the node path with a symlink-free parent, its host path and its info (nil when absent).
func (t *Tree) LstatNode(p string) (node, hostPath string, fi fs.FileInfo, err error) {
	dir, err := t.Resolve(path.Dir(p), true)
	if err != nil {
		return "", "", nil, err
	}
	node = path.Join(dir, path.Base(p))
	hostPath = t.Host(node)
	fi, err = t.fsys().Lstat(hostPath)
	if errors.Is(err, fs.ErrNotExist) {
		return node, hostPath, nil, nil
	}
	if err != nil {
		return "", "", nil, err
	}
	return node, hostPath, fi, nil
}

// notDir is a path component that is not a directory; it matches syscall.ENOTDIR.
type notDir struct{ msg string }

func (e *notDir) Error() string        { return e.msg }
func (e *notDir) Is(target error) bool { return target == syscall.ENOTDIR }

// NodeErr rewrites the host paths in err's message as node paths, so that every message nodedns
// prints names the node's file, never where --root put it: "open /etc/.resolv.conf.nodedns-1.tmp:
// permission denied", not the same under /tmp/x/root. The original error stays reachable through
// errors.Is and errors.As.
func (t *Tree) NodeErr(err error) error {
	if err == nil || t.Root == "" || t.Root == "/" {
		return err
	}
	root := filepath.Clean(t.Root)
	msg := err.Error()
	out := strings.ReplaceAll(msg, root+"/", "/")
	if out == msg {
		return err
	}
	return &nodePathError{msg: out, err: err}
}

type nodePathError struct {
	msg string
	err error
}

func (e *nodePathError) Error() string { return e.msg }
func (e *nodePathError) Unwrap() error { return e.err }
