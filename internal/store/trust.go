package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"syscall"

	"github.com/nodedns/nodedns/internal/nodefs"
)

// Trusted state (docs/contract.md, "Where things live"): nodedns acts on its state directory, its
// backups and their manifest only when nobody else could have written them. A backup directory that
// another user can write lets that user plant a manifest entry, and restore, running as root, would
// then create whatever file, owner and mode the entry says. So every directory and file of the
// state is checked before it is read or written: not a symlink (opened with O_NOFOLLOW), owned by
// the running user (root on a node), and writable by neither group nor others.

// UntrustedError is state nodedns refuses to use: the node path, what is wrong with it, and how to
// fix it.
type UntrustedError = nodefs.UntrustedError

func untrusted(p string, fi fs.FileInfo, dir bool, wantMode fs.FileMode) error {
	return nodefs.Untrusted(p, fi, dir, wantMode)
}

func modeString(m fs.FileMode) string { return nodefs.ModeString(m) }

// trustedDirNode makes sure the node directory p (its parent already resolved inside Root) exists as
// a directory nodedns can trust, creating it with mode if missing, and returns the node path p
// resolved to and its host path. The mode is set explicitly, so the umask does not decide it.
// Parents that are missing are created 0755.
func (s *Store) trustedDirNode(p string, mode fs.FileMode) (node, hp string, err error) {
	node, hp, fi, err := s.lstatNode(p)
	if err != nil {
		return "", "", s.nodeErr(err)
	}
	hp, err = s.trustDirAt(node, hp, fi, mode)
	return node, hp, err
}

// trustedSubdir is trustedDir of the directory name inside the trusted directory at host path
// parent (node path parentNode, as trustedDir resolved it): one lstat, the parent's chain is not
// walked again.
func (s *Store) trustedSubdir(parentNode, parent, name string, mode fs.FileMode) (string, error) {
	node, hp := path.Join(parentNode, name), filepath.Join(parent, name)
	fi, err := s.fsys().Lstat(hp)
	if errors.Is(err, fs.ErrNotExist) {
		fi, err = nil, nil
	}
	if err != nil {
		return "", s.nodeErr(err)
	}
	return s.trustDirAt(node, hp, fi, mode)
}

// trustDirAt is the rest of trustedDir for the node directory node at host path hp, lstat fi (nil:
// missing).
func (s *Store) trustDirAt(node, hp string, fi fs.FileInfo, mode fs.FileMode) (string, error) {
	fsys := s.fsys()
	if fi == nil {
		parents, err := s.missingDirs(path.Dir(node))
		if err != nil {
			return "", err
		}
		if err := s.mkdirs(parents, 0o755); err != nil {
			return "", err
		}
		if err := s.mkdirs([]string{node}, mode); err != nil {
			return "", err
		}
		if fi, err = fsys.Lstat(hp); err != nil {
			return "", s.nodeErr(err)
		}
	}
	if err := untrusted(node, fi, true, mode); err != nil {
		return "", err
	}
	return hp, nil
}

// missingDirs lists the directories of the node directory p (its parents already resolved inside
// Root) that do not exist yet, outermost first.
func (s *Store) missingDirs(p string) ([]string, error) {
	var missing []string
	fsys := s.fsys()
	for d := p; ; d = path.Dir(d) {
		_, err := fsys.Lstat(s.host(d))
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, s.nodeErr(err)
		}
		missing = append([]string{d}, missing...)
		if d == "/" {
			break
		}
	}
	return missing, nil
}

// mkdirs creates the node directories dirs (outermost first, as missingDirs lists them), each with
// mode set explicitly so that the umask does not decide it.
func (s *Store) mkdirs(dirs []string, mode fs.FileMode) error {
	fsys := s.fsys()
	for _, d := range dirs {
		hp := s.host(d)
		if err := fsys.MkdirAll(hp, mode); err != nil {
			return s.nodeErr(err)
		}
		// The mode on the directory itself, opened without following a symlink swapped in.
		f, err := s.tree().OpenHost(hp, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
		if err != nil {
			return s.nodeErr(err)
		}
		err = f.Chmod(mode)
		f.Close()
		if err != nil {
			return s.nodeErr(err)
		}
		// The new entry is durable only once its parent is synced (a crash could lose the
		// directory while a file in it survives).
		if err := syncDir(fsys, filepath.Dir(hp)); err != nil {
			return s.nodeErr(err)
		}
	}
	return nil
}

// readTrusted reads a state file at the host path hp (node path p, for messages): opened with
// O_NOFOLLOW (a symlink fails with ELOOP and is never followed), then checked on the open file:
// regular, owned by the running user, not writable by group or others; bounded by k.
func (s *Store) readTrusted(hp, p string, k nodefs.Kind) ([]byte, error) {
	fi, err := s.fsys().Lstat(hp)
	if err != nil {
		return nil, nodefs.UnwrapPath(err)
	}
	return s.readTrustedLstat(hp, p, k, fi)
}

// readTrustedLstat is readTrusted with the path's lstat fi already made.
func (s *Store) readTrustedLstat(hp, p string, k nodefs.Kind, fi fs.FileInfo) ([]byte, error) {
	fsys := s.fsys()
	if err := untrusted(p, fi, false, 0o600); err != nil {
		return nil, err
	}
	f, err := fsys.OpenFile(hp, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, untrusted(p, symlinkInfo{fi}, false, 0o600)
		}
		return nil, nodefs.UnwrapPath(err)
	}
	defer f.Close()
	return nodefs.ReadOpen(f, k, func(fi fs.FileInfo) error { return untrusted(p, fi, false, 0o600) })
}

// symlinkInfo is fi reported as a symlink: the path was swapped for one between lstat and open.
type symlinkInfo struct{ fs.FileInfo }

func (i symlinkInfo) Mode() fs.FileMode { return i.FileInfo.Mode()&fs.ModePerm | fs.ModeSymlink }

// ReadState reads one of nodedns's own state files (a node path directly inside StateDir, such as
// /var/lib/nodedns/resolved-links.json) only if it can be trusted: the state directory and the file
// owned by the running user, writable by nobody else, and neither of them a symlink. A state file
// that restore acts on must never be one another user could have planted. A missing file gives an
// error matching fs.ErrNotExist.
func (s *Store) ReadState(p string, k nodefs.Kind) ([]byte, error) {
	p, err := nodefs.NodePath(p)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	if path.Dir(p) != s.stateDir() {
		return nil, fmt.Errorf("read %s: not a file of the state directory %s", p, s.stateDir())
	}
	dir, err := s.stateHost()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	data, err := s.readTrusted(filepath.Join(dir, path.Base(p)), p, k)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	return data, nil
}

// stateHost returns the host path of StateDir after checking it is trusted. A missing state
// directory is fs.ErrNotExist: reading never creates it.
func (s *Store) stateHost() (string, error) {
	if l := s.held(); l != nil {
		return l.stateDir, nil // trusted when the lock was taken
	}
	node, hp, fi, err := s.lstatNode(s.stateDir())
	if err != nil {
		return "", s.nodeErr(err)
	}
	if fi == nil {
		return "", fmt.Errorf("%s: %w", node, fs.ErrNotExist)
	}
	if err := untrusted(node, fi, true, 0o755); err != nil {
		return "", err
	}
	return hp, nil
}

// lstatState is lstatNode of the entry name of StateDir. Under a Lock of this process the state
// directory is the one trusted when the lock was taken: one lstat, no walk.
func (s *Store) lstatState(name string) (node, hostPath string, fi fs.FileInfo, err error) {
	l := s.held()
	if l == nil {
		return s.lstatNode(path.Join(s.stateDir(), name))
	}
	node, hostPath = path.Join(s.stateDir(), name), filepath.Join(l.stateDir, name)
	fi, err = s.fsys().Lstat(hostPath)
	if errors.Is(err, fs.ErrNotExist) {
		return node, hostPath, nil, nil
	}
	if err != nil {
		return "", "", nil, err
	}
	return node, hostPath, fi, nil
}
