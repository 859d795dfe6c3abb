package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/nodedns/nodedns/internal/nodefs"
)

// No leftovers (docs/contract.md, "Where things live"): a nodedns killed in the middle of a write
// leaves its temp file next to the target, and one killed while netplan checked a file leaves a work
// directory. Both carry one recognisable name, and the next holder of the state lock removes the
// ones their dead owner left.

// workRE matches a work directory in StateDir/tmp: "NAME-PID-RANDOM", as WorkPattern makes them.
var workRE = regexp.MustCompile(`^.+-([0-9]+)-[^-]*$`)

// Sweep removes what dead nodedns processes left behind, under the state lock l: temp files of
// nodedns's targets (the directories of Store.Targets, of a linked path's target, the state and
// backup directories) made before l was taken (every temp file is made and removed under the lock,
// so an older one belongs to a holder that died), and work directories in TempDir whose creating
// process is gone or is this one (none of this process's is in use while it sweeps). It returns the
// node paths removed; a directory it cannot list or an entry it cannot remove is reported in err and
// the rest still swept.
func (s *Store) Sweep(l *Lock) (removed []string, err error) {
	var errs []error
	t := s.targets()
	sd := s.stateDir()
	dirs := []string{sd, path.Join(sd, "backup")}
	owned := func(dir, base string) bool {
		p := path.Join(dir, base)
		return dir == sd || dir == path.Join(sd, "backup") || t.Match(p)
	}
	var finals []string
	for _, l := range t.Linked() {
		if final, err := s.resolve(l, true); err == nil && final != l {
			finals = append(finals, final)
			dirs = append(dirs, path.Dir(final))
		}
	}
	for _, pat := range t.Patterns() {
		dir := path.Dir(pat)
		if !hasMeta(dir) {
			dirs = append(dirs, dir)
			continue
		}
		// One level of wildcard, as in /etc/systemd/network/*.network.d/nodedns.conf.
		parent, glob := path.Dir(dir), path.Base(dir)
		if hasMeta(parent) {
			continue
		}
		es, err := s.ReadDir(parent)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
				errs = append(errs, err)
			}
			continue
		}
		for _, e := range es {
			if ok, _ := path.Match(glob, e.Name()); ok && e.IsDir() {
				dirs = append(dirs, path.Join(parent, e.Name()))
			}
		}
	}
	slices.Sort(dirs)
	dirs = slices.Compact(dirs)
	fsys := s.fsys()
	for _, dir := range dirs {
		// Only directories that resolve inside the root, never through a symlink out of it.
		rd, err := s.resolve(dir, true)
		if err != nil {
			continue
		}
		es, err := fsys.ReadDir(s.host(rd))
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
				errs = append(errs, fmt.Errorf("sweep %s: %w", dir, s.nodeErr(err)))
			}
			continue
		}
		for _, e := range es {
			of := nodefs.TempOf(e.Name())
			if of == "" || !e.Type().IsRegular() && e.Type()&fs.ModeSymlink == 0 {
				continue
			}
			if !owned(dir, of) && !slices.Contains(finals, path.Join(rd, of)) {
				continue
			}
			hp := filepath.Join(s.host(rd), e.Name())
			fi, err := fsys.Lstat(hp)
			if err != nil || !fi.ModTime().Before(l.Since()) {
				continue
			}
			if err := s.remove(hp); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove the leftover %s: %w", path.Join(dir, e.Name()), s.nodeErr(err)))
				continue
			}
			removed = append(removed, path.Join(dir, e.Name()))
		}
	}
	more, err := s.SweepWork()
	removed = append(removed, more...)
	if err != nil {
		errs = append(errs, err)
	}
	return removed, errors.Join(errs...)
}

// SweepWork removes the work directories in TempDir whose creating process is gone or is this one.
// It never creates the state directory.
func (s *Store) SweepWork() (removed []string, err error) {
	node, hp, fi, err := s.lstatState(TempDirName)
	if err != nil || fi == nil {
		return nil, nil
	}
	if err := untrusted(node, fi, true, 0o700); err != nil {
		return nil, err
	}
	es, err := s.fsys().ReadDir(hp)
	if err != nil {
		return nil, fmt.Errorf("sweep %s: %w", node, s.nodeErr(err))
	}
	var errs []error
	for _, e := range es {
		if m := workRE.FindStringSubmatch(e.Name()); m != nil {
			if pid, err := strconv.Atoi(m[1]); err == nil && pid != os.Getpid() && alive(pid) {
				continue
			}
		}
		// Through os, not the FS seam: a work directory is a tree, and FS removes one name at a time.
		if err := os.RemoveAll(filepath.Join(hp, e.Name())); err != nil {
			errs = append(errs, fmt.Errorf("remove the leftover %s: %w", path.Join(node, e.Name()), s.nodeErr(err)))
			continue
		}
		removed = append(removed, path.Join(node, e.Name()))
	}
	return removed, errors.Join(errs...)
}

// alive reports whether a process with this PID exists (signal 0 checks without sending).
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func hasMeta(p string) bool { return strings.ContainsAny(p, `*?[\`) }
