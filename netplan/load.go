package netplan

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/nodedns/nodedns/files"
)

// dirs are netplan 0.106's configuration directories, lowest precedence
// first (util.c find_yaml_glob: "{lib,etc,run}/netplan/*.yaml"; netplan 1.0
// moved /lib to /usr/lib).
var dirs = []string{"/lib/netplan", "/etc/netplan", "/run/netplan"}

// Load reads and merges the netplan files under root (root "" or "/" = real
// system). A file that is not valid YAML, or whose structure netplan would
// reject at the level we read (e.g. `network` not a mapping, `dhcp4:
// maybe`), is an error naming path:line:col and the reason; nothing partial
// is returned then. No netplan directory at all: empty Config, no error.
// Files over 1 MiB are refused. Load never writes.
func Load(root string) (*Config, error) {
	all, err, _, _ := LoadSplit(root, "")
	return all, err
}

// LoadExcept is Load without one node path (nodedns's own file): what the rest of the node asks
// for. A file of the same name in another directory that the skipped one shadows stays shadowed,
// as netplan would still not read it.
func LoadExcept(root, skip string) (*Config, error) {
	_, _, others, err := LoadSplit(root, skip)
	return others, err
}

// LoadSplit reads the netplan files once and merges them twice: all of them (what netplan will run
// with) and all but skip (what the rest of the node asks for). Each merge has its own error, so a
// broken skip file spoils only the first. With skip "" both are the same merge.
func LoadSplit(root, skip string) (all *Config, allErr error, others *Config, othersErr error) {
	files, shadowed, err := find(root)
	if err != nil {
		return nil, err, nil, err
	}
	docs := make([]Doc, 0, len(files))
	var skipErr error
	for _, f := range files {
		data, err := readFile(root, f)
		if err != nil {
			if f != skip {
				return nil, err, nil, err
			}
			skipErr = err
			continue
		}
		docs = append(docs, Doc{Path: f, Data: data})
	}
	var rest []Doc
	for _, d := range docs {
		if d.Path != skip {
			rest = append(rest, d)
		}
	}
	others, othersErr = Parse(rest)
	if othersErr == nil {
		others.Shadowed = shadowed
	} else {
		others = nil
	}
	if skipErr != nil {
		return nil, skipErr, others, othersErr
	}
	if skip == "" || len(rest) == len(docs) {
		return others, othersErr, others, othersErr
	}
	all, allErr = Parse(docs)
	if allErr == nil {
		all.Shadowed = shadowed
	} else {
		all = nil
	}
	return all, allErr, others, othersErr
}

// find lists the files netplan would read, as node paths in merge order,
// and those shadowed. netplan 0.106 (util.c
// netplan_parser_load_yaml_hierarchy) globs all three directories, keys the
// results by file name so /run replaces /etc replaces /lib, and sorts by
// file name with strcmp: the directory does not affect the order.
func find(root string) (files, shadowed []string, err error) {
	byName := map[string]string{}
	shadowed = []string{}
	for _, dir := range dirs {
		entries, err := os.ReadDir(hostPath(root, dir))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("list netplan directory %s: %w", dir, err)
		}
		for _, e := range entries {
			name := e.Name()
			// glob's "*" does not match a leading dot.
			if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".yaml") {
				continue
			}
			if prev, ok := byName[name]; ok {
				shadowed = append(shadowed, prev)
			}
			byName[name] = path.Join(dir, name)
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	slices.Sort(names)
	files = make([]string, 0, len(names))
	for _, n := range names {
		files = append(files, byName[n])
	}
	return files, shadowed, nil
}

// readFile reads a node path under root, refusing more than MaxFileSize
// bytes without reading them all.
func readFile(root, nodePath string) ([]byte, error) {
	f, err := os.Open(hostPath(root, nodePath))
	if err != nil {
		return nil, fmt.Errorf("read netplan file %s: %w", nodePath, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read netplan file %s: %w", nodePath, err)
	}
	if len(data) > MaxFileSize {
		return nil, &Error{Path: nodePath, Reason: fmt.Sprintf("file is larger than %d bytes", MaxFileSize)}
	}
	return data, nil
}

// hostPath joins an absolute node path under root, like netplan --root-dir.
func hostPath(root, nodePath string) string {
	return files.HostPath(root, nodePath)
}
