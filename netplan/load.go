package netplan

import (
	"errors"
	"fmt"

	"github.com/nodedns/nodedns/internal/nodefs"
	"go.yaml.in/yaml/v3"
)

// Dirs are netplan 0.106's configuration directories, highest precedence first (util.c
// find_yaml_glob: "{lib,etc,run}/netplan/*.yaml", a file in /run replacing its /etc and /lib
// namesakes; netplan 1.0 moved /lib to /usr/lib).
var Dirs = []string{"/run/netplan", "/etc/netplan", "/lib/netplan"}

// fileKind bounds a netplan file.
var fileKind = nodefs.Kind{Name: "netplan file", Max: MaxFileSize}

// LoadSplit reads the netplan files of the node r reads once and merges them twice: all of them
// (what netplan will run with) and all but skip (what the rest of the node asks for). Each merge has
// its own error, so a broken skip file spoils only the first. With skip "" both are the same merge.
// A file that is not valid YAML, or whose structure netplan would reject at the level we read (e.g.
// `network` not a mapping, `dhcp4: maybe`), is an error naming path:line:col and the reason; nothing
// partial is returned then. No netplan directory at all: empty Config, no error. Files over 1 MiB
// are refused. LoadSplit never writes.
func LoadSplit(r nodefs.Reader, skip string) (all *Config, allErr error, others *Config, othersErr error) {
	found, shadowed, err := find(r)
	if err != nil {
		return nil, err, nil, err
	}
	docs := make([]Doc, 0, len(found))
	var skipErr error
	for _, f := range found {
		data, err := ReadFile(r, f)
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

// find lists the files netplan would read, as node paths in merge order, and those shadowed.
// netplan 0.106 (util.c netplan_parser_load_yaml_hierarchy) globs all three directories, keys the
// results by file name so /run replaces /etc replaces /lib, and sorts by file name with strcmp: the
// directory does not affect the order. That is systemd's rule, nodefs.DropIns.
func find(r nodefs.Reader) (found, shadowed []string, err error) {
	ds, errs := nodefs.DropIns(r, Dirs, ".yaml")
	if len(errs) > 0 {
		return nil, nil, fmt.Errorf("list netplan directory: %w", errs[0])
	}
	shadowed = []string{}
	for _, d := range ds {
		found = append(found, d.Path)
		for i := len(d.Shadowed) - 1; i >= 0; i-- { // lowest precedence first
			shadowed = append(shadowed, d.Shadowed[i])
		}
	}
	return found, shadowed, nil
}

// ReadFile reads a netplan file, refusing more than MaxFileSize bytes without reading them, and
// anything that is not a regular file without opening it.
func ReadFile(r nodefs.Reader, nodePath string) ([]byte, error) {
	data, err := r.ReadFile(nodePath, fileKind)
	if errors.Is(err, nodefs.ErrTooLarge) {
		return nil, &Error{Path: nodePath, Reason: fmt.Sprintf("file is larger than %d bytes", MaxFileSize), limit: true}
	}
	if err != nil {
		return nil, &Error{Path: nodePath, Reason: "cannot read it: " + errors.Unwrap(err).Error()}
	}
	return data, nil
}

// Watches declares the directories LoadSplit reads. A netplan file is complete once it is valid YAML.
func Watches() []nodefs.Watch {
	var ws []nodefs.Watch
	for _, d := range Dirs {
		ws = append(ws, nodefs.Watch{Dir: d, Match: nodefs.Suffix(".yaml"), Complete: func(b []byte) error {
			var v any
			return yaml.Unmarshal(b, &v)
		}})
	}
	return ws
}
