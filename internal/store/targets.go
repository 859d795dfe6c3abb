package store

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"syscall"

	"github.com/nodedns/nodedns/internal/nodefs"
)

// Targets is the allow-list of node paths restore may change: a manifest names paths, and however
// it came to name one (a bug, a planted entry), restore puts back only the files nodedns manages.
// Build one with NewTargets or DefaultTargets and extend it with Add; the zero value allows nothing.
type Targets struct {
	patterns []string
	linked   []string
}

// NewTargets returns an allow-list of the given path.Match patterns (absolute, clean node paths).
func NewTargets(patterns ...string) *Targets {
	t := &Targets{}
	return t.Add(patterns...)
}

// DefaultTargets is what a store may restore whatever the config says: the files directly in
// stateDir (the kubelet resolv.conf at its default place, writers.json, state.json,
// resolved-links.json). The caller adds what the mechanisms declare they write (node.Writes, with
// node.LinkedWrites through AddLinked) and the config's files. The backup and temp directories
// inside stateDir are never targets (see Store.Restore).
func DefaultTargets(stateDir string) *Targets {
	return NewTargets(path.Join(path.Clean(stateDir), "*"))
}

// Add allows more patterns (a config's kubelet.resolvConf, metrics textfiles) and returns t.
// Patterns that are not absolute or not valid path.Match patterns are ignored: they match nothing.
func (t *Targets) Add(patterns ...string) *Targets {
	for _, p := range patterns {
		if !strings.HasPrefix(p, "/") {
			continue
		}
		if _, err := path.Match(p, "/"); err != nil {
			continue
		}
		p = path.Clean(p)
		if !slices.Contains(t.patterns, p) {
			t.patterns = append(t.patterns, p)
		}
	}
	return t
}

// AddLinked allows paths (themselves allowed through Add) whose symlink target is allowed too: where
// the link points now, and where it pointed when it was backed up.
func (t *Targets) AddLinked(paths ...string) *Targets {
	for _, p := range paths {
		p = path.Clean(p)
		if !slices.Contains(t.linked, p) {
			t.linked = append(t.linked, p)
		}
	}
	return t
}

// Match reports whether the node path p is one of the patterns.
func (t *Targets) Match(p string) bool {
	if t == nil {
		return false
	}
	for _, pat := range t.patterns {
		if ok, _ := path.Match(pat, p); ok {
			return true
		}
	}
	return false
}

// Patterns returns the patterns, in the order they were added.
func (t *Targets) Patterns() []string {
	if t == nil {
		return nil
	}
	return slices.Clone(t.patterns)
}

// Linked returns the paths whose symlink targets are allowed too.
func (t *Targets) Linked() []string {
	if t == nil {
		return nil
	}
	return slices.Clone(t.linked)
}

func (s *Store) targets() *Targets {
	if s.Targets != nil {
		return s.Targets
	}
	return DefaultTargets(s.stateDir())
}

// isState reports whether the node path p is the state directory itself or lies in its backup or
// temp directory: never a target, whatever a pattern says.
func (s *Store) isState(p string) bool {
	sd := s.stateDir()
	if p == sd || p == "/" {
		return true
	}
	for _, d := range []string{path.Join(sd, "backup"), path.Join(sd, TempDirName)} {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// restorable builds the check restore applies to each manifest entry: the path is a target, or the
// target of a linked path (as it resolves now, or as its entry in the manifest recorded it), or a
// directory nodedns created for one of those; and never state.
func (s *Store) restorable(entries []Entry) func(e Entry) error {
	t := s.targets()
	extra := map[string]bool{}
	for _, l := range t.Linked() {
		if !t.Match(l) {
			continue
		}
		if final, err := s.resolve(l, true); err == nil {
			extra[final] = true
		}
		for _, e := range entries {
			if e.Path != l || e.Kind != KindSymlink {
				continue
			}
			target := e.Target
			if !strings.HasPrefix(target, "/") {
				target = path.Join(path.Dir(l), target)
			}
			if final, err := s.resolve(path.Clean(target), true); err == nil {
				extra[final] = true
			}
		}
	}
	// A managed path under a directory that is root's own symlink (/etc/dhcp/dhclient-enter-hooks.d
	// -> ../../data/hooks) is written, and backed up, where it resolves: that is a target too.
	for _, pat := range t.Patterns() {
		if hasMeta(pat) {
			continue
		}
		if final, err := s.resolve(pat, true); err == nil && final != pat {
			extra[final] = true
		}
	}
	allowed := func(p string) bool { return !s.isState(p) && (t.Match(p) || extra[p]) }
	// A directory entry is allowed when some allowed file entry lies inside it.
	dirs := map[string]bool{}
	for _, e := range entries {
		if e.Kind == KindAbsentDir || !allowed(e.Path) {
			continue
		}
		for d := path.Dir(e.Path); d != "/"; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	return func(e Entry) error {
		ok := allowed(e.Path)
		if e.Kind == KindAbsentDir {
			ok = dirs[e.Path] && !s.isState(e.Path)
		}
		if !ok {
			return fmt.Errorf("not a file nodedns manages (docs/contract.md, \"What nodedns manages\"): the manifest entry is refused, the path left as it is")
		}
		if e.Mode&(specialBits) != 0 {
			return fmt.Errorf("the backup records mode %s with setuid, setgid or sticky bits, which nodedns never sets: the path is left as it is; put it back by hand if that mode is really wanted", modeString(e.Mode))
		}
		return nil
	}
}

// ManagedFiles lists the regular files present on the node that restore may change (Store.Targets,
// a linked path's final target; wildcards of one path component expanded), sorted, without the
// state directory's backup and temp directories. `nodedns restore` looks among them for files that
// carry nodedns's mark but have no backup.
func (s *Store) ManagedFiles() ([]string, error) {
	t := s.targets()
	var cands, errs []string
	for _, pat := range t.Patterns() {
		if !hasMeta(pat) {
			cands = append(cands, pat)
			continue
		}
		matches, err := s.glob(pat)
		if err != nil {
			errs = append(errs, err.Error())
		}
		cands = append(cands, matches...)
	}
	for _, l := range t.Linked() {
		if final, err := s.resolve(l, true); err == nil && final != l {
			cands = append(cands, final)
		}
	}
	slices.Sort(cands)
	cands = slices.Compact(cands)
	var out []string
	for _, p := range cands {
		if s.isState(p) {
			continue
		}
		if _, _, fi, err := s.lstatNode(p); err == nil && fi != nil && fi.Mode().IsRegular() {
			out = append(out, p)
		}
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("list managed files: %s", strings.Join(errs, "; "))
	}
	return out, nil
}

// glob expands a pattern whose wildcards stand in at most one directory level and the last
// component (/etc/systemd/network/*.network.d/nodedns.conf, /var/lib/nodedns/*).
func (s *Store) glob(pat string) ([]string, error) {
	dirs := []string{path.Dir(pat)}
	if d := path.Dir(pat); hasMeta(d) {
		parent, g := path.Dir(d), path.Base(d)
		if hasMeta(parent) {
			return nil, nil
		}
		es, err := s.ReadDir(parent)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				return nil, nil
			}
			return nil, err
		}
		dirs = dirs[:0]
		for _, e := range es {
			if ok, _ := path.Match(g, e.Name()); ok {
				dirs = append(dirs, path.Join(parent, e.Name()))
			}
		}
	}
	var out []string
	for _, d := range dirs {
		es, err := s.ReadDir(d)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				continue
			}
			return out, err
		}
		for _, e := range es {
			p := path.Join(d, e.Name())
			if ok, _ := path.Match(pat, p); ok && !nodefs.IsTemp(e.Name()) {
				out = append(out, p)
			}
		}
	}
	return out, nil
}
