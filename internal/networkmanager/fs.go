package networkmanager

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"

	"github.com/nodedns/nodedns/internal/nodefs"
)

// MaxFileSize bounds what nodedns reads of one NetworkManager file. NM's own files are a few KiB;
// a file over this is reported rather than read.
const MaxFileSize = 1 << 20

// ErrNotRegular is returned by a NodeFS for a path that is not a regular file (a directory, FIFO,
// socket or device). GKeyFile refuses those with "Not a regular file"; nodedns never opens them.
//
//lint:ignore ST1005 GKeyFile's own words, capital included, as NetworkManager prints them.
var ErrNotRegular = errors.New("Not a regular file")

// NodeFS is how this package reads a node: node paths ("/etc/NetworkManager/conf.d"), symlinks
// followed inside the node. ReadFile fails with an error matching fs.ErrNotExist for a missing
// file and ErrNotRegular for anything but a regular file; ReadDir lists the names in a directory
// (sorted), and fails with fs.ErrNotExist for a missing one.
type NodeFS interface {
	ReadFile(nodePath string) ([]byte, error)
	ReadDir(nodePath string) ([]string, error)
}

// ReaderFS is the node r reads (the one reader of nodedns, with its FS seam: bounded reads,
// symlinks resolved inside the node's root, never a blocking open).
func ReaderFS(r nodefs.Reader) NodeFS { return readerFS{r} }

// FileKind bounds a NetworkManager file (configuration, keyfile, device state) nodedns reads.
var FileKind = nodefs.Kind{Name: "NetworkManager file", Max: MaxFileSize}

type readerFS struct{ r nodefs.Reader }

func (r readerFS) ReadFile(p string) ([]byte, error) {
	data, err := r.r.ReadFile(p, FileKind)
	if errors.Is(err, nodefs.ErrNotRegular) {
		// GKeyFile's word for anything but a regular file.
		return nil, fmt.Errorf("read %s: %w", p, ErrNotRegular)
	}
	return data, err
}

func (r readerFS) ReadDir(p string) ([]string, error) {
	entries, err := r.r.ReadDir(p)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names, nil
}

// Overlay is fsys with some files replaced: changes maps a node path to its new content, or to
// nil for a file that is gone. It is how a candidate configuration is read before it is written
// (LoadConfig on Overlay(node, {zz-nodedns.conf: candidate})).
func Overlay(fsys NodeFS, changes map[string][]byte) NodeFS {
	return overlayFS{base: fsys, changes: changes}
}

type overlayFS struct {
	base    NodeFS
	changes map[string][]byte
}

func (o overlayFS) ReadFile(p string) ([]byte, error) {
	if data, ok := o.changes[path.Clean(p)]; ok {
		if data == nil {
			return nil, &fs.PathError{Op: "read", Path: p, Err: fs.ErrNotExist}
		}
		return data, nil
	}
	return o.base.ReadFile(p)
}

func (o overlayFS) ReadDir(p string) ([]string, error) {
	p = path.Clean(p)
	names, err := o.base.ReadDir(p)
	missing := errors.Is(err, fs.ErrNotExist)
	if err != nil && !missing {
		return nil, err
	}
	set := map[string]bool{}
	for _, n := range names {
		set[n] = true
	}
	added := false
	for cp, data := range o.changes {
		if path.Dir(cp) != p {
			continue
		}
		if data == nil {
			delete(set, path.Base(cp))
		} else {
			set[path.Base(cp)] = true
			added = true
		}
	}
	if missing && !added {
		return nil, err
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}
