package networkmanager

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
)

// MapFS is a node held in memory (node path: content), for this package's tests and fuzz targets.
type MapFS map[string]string

// ReadFile implements NodeFS.
func (m MapFS) ReadFile(p string) ([]byte, error) {
	p = path.Clean(p)
	if s, ok := m[p]; ok {
		return []byte(s), nil
	}
	for k := range m {
		if strings.HasPrefix(k, p+"/") {
			return nil, fmt.Errorf("read %s: %w", p, ErrNotRegular)
		}
	}
	return nil, &fs.PathError{Op: "read", Path: p, Err: fs.ErrNotExist}
}

// ReadDir implements NodeFS.
func (m MapFS) ReadDir(p string) ([]string, error) {
	p = path.Clean(p)
	set := map[string]bool{}
	for k := range m {
		if strings.HasPrefix(k, p+"/") {
			set[strings.SplitN(strings.TrimPrefix(k, p+"/"), "/", 2)[0]] = true
		}
	}
	if len(set) == 0 {
		return nil, &fs.PathError{Op: "read directory", Path: p, Err: fs.ErrNotExist}
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}
