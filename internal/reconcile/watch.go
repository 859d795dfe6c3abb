package reconcile

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/fsnotify/fsnotify"

	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/internal/store"
)

// watchSpec is one directory the daemon watches and the names in it that matter: a declared
// nodefs.Watch, or (dirOnly) the nearest existing ancestor of a declared directory that does not exist
// yet, watched for its next component.
type watchSpec struct {
	nodefs.Watch
	dirOnly bool
}

// watchSet is the resolved form of the wanted files: host directory -> matchers. A directory that
// does not exist yet is replaced by its nearest existing ancestor, watched for the next component
// (kindDir), so /run/systemd/resolve appearing when resolved starts is noticed.
type watchSet map[string][]watchSpec

func (n *Node) buildWatchSet(st *store.Store, decl []nodefs.Watch, c *dirCache) watchSet {
	ws := watchSet{}
	for _, w := range decl {
		rd, ok := c.get(w.Dir)
		if !ok {
			rd = resolveWatchDir(st, w.Dir)
			c.put(w.Dir, rd)
		}
		if rd.err != nil {
			n.log().Warn("not watched", "dir", w.Dir, "err", rd.err)
			continue
		}
		sp := watchSpec{Watch: w}
		sp.Dir = rd.dir
		if rd.missing != "" {
			sp = watchSpec{Watch: nodefs.Watch{Dir: rd.dir, Match: nodefs.Names(path.Base(rd.missing))}, dirOnly: true}
		}
		h := hostDir(st.Root, sp.Dir)
		ws[h] = append(ws[h], sp)
	}
	return ws
}

// watchDir is where a declared directory is watched: dir, the directory itself with its symlinks
// followed, or, when it does not exist, its nearest existing ancestor, watched for missing (the
// next component on the way down).
type watchDir struct {
	resolved, dir, missing string
	err                    error
}

func resolveWatchDir(st *store.Store, decl string) watchDir {
	resolved, err := st.ResolveLink(decl)
	if err != nil {
		return watchDir{err: err}
	}
	rd := watchDir{resolved: resolved, dir: resolved}
	// Walk up to the nearest existing directory.
	for {
		if fi, err := st.Stat(rd.dir); (err == nil && fi.IsDir()) || rd.dir == "/" {
			return rd
		}
		rd.missing = rd.dir
		rd.dir = path.Dir(rd.dir)
	}
}

// dirCache keeps where each declared directory is watched between passes, so a pass that changed
// no directory does not look every one up again (each lookup walks the path under the root). The
// nil cache keeps nothing.
type dirCache map[string]watchDir

func (c *dirCache) get(decl string) (watchDir, bool) {
	if *c == nil {
		return watchDir{}, false
	}
	rd, ok := (*c)[decl]
	return rd, ok
}

func (c *dirCache) put(decl string, rd watchDir) {
	if *c == nil {
		*c = dirCache{}
	}
	(*c)[decl] = rd
}

// forget drops the lookups a change to one of changed may have made wrong: a change at or above
// the declared or resolved directory (replaced, removed, a symlink re-aimed), or at or under the
// missing directory a lookup waits for (it may have been created). It returns how many it dropped.
func (c dirCache) forget(changed map[string]bool) int {
	atOrAbove := func(p, d string) bool { return d != "" && (p == d || below(d, p)) }
	n := 0
	for decl, rd := range c {
		for p := range changed {
			if atOrAbove(p, decl) || atOrAbove(p, rd.resolved) || atOrAbove(p, rd.dir) ||
				(rd.missing != "" && (p == rd.missing || below(p, rd.missing) || atOrAbove(p, rd.missing))) {
				delete(c, decl)
				n++
				break
			}
		}
	}
	return n
}

// below reports whether the path p is strictly below the directory d (p starts with d + "/"),
// without building d + "/": forget runs for every declared directory and changed path of a pass.
func below(p, d string) bool {
	return len(p) > len(d) && p[len(d)] == '/' && p[:len(d)] == d
}

func hostDir(root, nodeDir string) string {
	if root == "" || root == "/" {
		return filepath.FromSlash(nodeDir)
	}
	return filepath.Join(root, filepath.FromSlash(nodeDir))
}

// classify finds what an event on hostDir/name means: not relevant at all (ok false), or relevant
// with the spec that declared it.
func (ws watchSet) classify(hostDirPath, name string) (watchSpec, bool) {
	for _, sp := range ws[hostDirPath] {
		if sp.Match(name) {
			return sp, true
		}
	}
	return watchSpec{}, false
}

// dirs lists the watched host directories, sorted (for logs and tests).
func (ws watchSet) dirs() []string {
	out := make([]string, 0, len(ws))
	for d := range ws {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// sync makes the watcher watch exactly the directories of ws. A directory that cannot be watched
// (it vanished between the stat and the watch, or the inotify watch limit is reached) is logged and
// retried at the next pass.
func (ws watchSet) sync(w *fsnotify.Watcher, old watchSet, log func(msg string, args ...any)) {
	for d := range old {
		if _, keep := ws[d]; !keep {
			_ = w.Remove(d)
		}
	}
	for d := range ws {
		if _, had := old[d]; had {
			continue
		}
		if err := w.Add(d); err != nil {
			log("cannot watch directory", "dir", d, "err", inotifyLimit(err))
			delete(ws, d)
		}
	}
}

// complete reports whether a file's content (data and the error reading it) is something a reader
// can use now. Missing, empty and half-written files are not complete: dhclient-script removes
// /etc/resolv.conf and writes a new one, and an editor or `echo >` truncates before it writes.
func complete(data []byte, err error, sp watchSpec) (bool, string) {
	if sp.dirOnly {
		return true, "directory appeared"
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, "missing"
	case err != nil:
		return false, err.Error()
	case len(data) == 0:
		return false, "empty"
	}
	if sp.Complete != nil {
		if err := sp.Complete(data); err != nil {
			return false, err.Error()
		}
	}
	return true, "complete"
}

// watchedKind bounds what the daemon reads to judge an event: no input of nodedns is larger.
var watchedKind = nodefs.Kind{Name: "watched file", Max: 1 << 20}

// inotifyLimit names the kernel limit behind an inotify error, with its current value: the kernel
// says ENOSPC ("no space left on device") when fs.inotify.max_user_watches is reached and EMFILE
// when fs.inotify.max_user_instances is, which sends an operator to look at the disk.
func inotifyLimit(err error) error {
	var name string
	switch {
	case errors.Is(err, syscall.ENOSPC):
		name = "max_user_watches"
	case errors.Is(err, syscall.EMFILE):
		name = "max_user_instances"
	default:
		return err
	}
	cur := "unknown"
	if data, rerr := nodefs.ReadKernel("/proc/sys/fs/inotify/"+name, nodefs.Attribute); rerr == nil {
		cur = strings.TrimSpace(string(data))
	}
	return fmt.Errorf("the inotify limit fs.inotify.%s (now %s) is reached; raise it (sysctl fs.inotify.%s=...): %w", name, cur, name, err)
}
