package netplan

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// maxAliasNodes bounds how many nodes expanding aliases may add to one
// document. netplan (libyaml's document API) shares aliased nodes instead of
// copying them, so "billion laughs" costs it nothing; we copy, so we refuse
// a document that would grow by more than this.
const maxAliasNodes = 1 << 16

// MaxDepth bounds how deeply a netplan document may nest mappings and sequences. netplan's deepest
// real structure (network: ethernets: ID: routing-policy: - {...}) is 6 levels; a document nested
// thousands of levels deep is no network configuration and costs netplan's own parser (and any
// validator nodedns would hand it to) time without bound, so it is refused before anything runs.
const MaxDepth = 64

// ErrLimit marks an *Error for a file over one of nodedns's bounds (MaxFileSize, MaxDepth, the
// alias budget): such a file is never handed to netplan's own tools.
var ErrLimit = errors.New("over nodedns's netplan limits")

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// decode parses the first YAML document of data (netplan's
// yaml_parser_load reads only the first too) and returns its top node with
// aliases expanded, or nil for an empty document.
func decode(path string, data []byte) (top *yaml.Node, err error) {
	if len(data) > MaxFileSize {
		return nil, &Error{Path: path, Reason: fmt.Sprintf("file is larger than %d bytes", MaxFileSize), limit: true}
	}
	var doc yaml.Node
	func() {
		// go.yaml.in/yaml/v3 panics with "internal error" on a few inputs
		// instead of returning an error; bad input must not crash the daemon.
		defer func() {
			if r := recover(); r != nil {
				err = &Error{Path: path, Reason: fmt.Sprintf("invalid yaml: %v", r)}
			}
		}()
		err = yaml.Unmarshal(data, &doc)
	}()
	if err != nil {
		if e, ok := err.(*Error); ok {
			return nil, e
		}
		if strings.Contains(err.Error(), "exceeded max depth") {
			// The YAML library's own bound (10,000 levels), reached before ours could be checked.
			return nil, depthError(path, 0, 0)
		}
		return nil, yamlError(path, err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, nil
	}
	x := &expander{budget: maxAliasNodes, path: path, active: map[*yaml.Node]bool{}}
	return x.expand(doc.Content[0], 0)
}

// yamlError turns the library's "yaml: line N: msg" into an *Error.
func yamlError(path string, err error) *Error {
	msg := err.Error()
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &Error{Path: path, Line: line, Reason: "invalid yaml: " + m[2]}
	}
	if len(msg) > 6 && msg[:6] == "yaml: " {
		msg = msg[6:]
	}
	return &Error{Path: path, Reason: "invalid yaml: " + msg}
}

// expander deep-copies a node tree, replacing every alias by a copy of its
// anchor's node, so that merging and later edits never share nodes and the
// merged Root encodes without dangling aliases.
type expander struct {
	budget int // nodes that alias copies may still add
	path   string
	active map[*yaml.Node]bool // anchors being expanded, to catch cycles
	outer  *yaml.Node          // the outermost alias being expanded
}

// depthError is a document nested deeper than MaxDepth, at the node that goes over (0, 0: the YAML
// library stopped first and gave no position).
func depthError(path string, line, col int) *Error {
	return &Error{Path: path, Line: line, Column: col, Reason: fmt.Sprintf("nested deeper than %d levels (the limit nodedns reads)", MaxDepth), limit: true}
}

func (x *expander) expand(n *yaml.Node, depth int) (*yaml.Node, error) {
	if depth > MaxDepth {
		return nil, depthError(x.path, n.Line, n.Column)
	}
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			return nil, nodeError(x.path, n, "unknown anchor '%s' referenced", n.Value)
		}
		if x.active[n.Alias] {
			return nil, nodeError(x.path, n, "anchor '%s' value contains itself", n.Value)
		}
		if x.outer == nil {
			x.outer = n
			defer func() { x.outer = nil }()
		}
		// The copy keeps the anchor's positions, as libyaml's shared node
		// does: an error inside it points where the bad value is written.
		return x.expand(n.Alias, depth)
	}
	if x.outer != nil {
		if x.budget--; x.budget < 0 {
			e := nodeError(x.path, x.outer, "document too large after expanding aliases")
			e.limit = true
			return nil, e
		}
	}
	if n.Anchor != "" {
		x.active[n] = true
		defer delete(x.active, n)
	}
	c := *n
	c.Anchor = ""
	c.Alias = nil
	if n.Kind == yaml.DocumentNode || n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode {
		c.Content = make([]*yaml.Node, 0, len(n.Content))
		for i, k := range n.Content {
			e, err := x.expand(k, depth+1)
			if err != nil {
				return nil, err
			}
			if n.Kind == yaml.MappingNode && i%2 == 0 && e.Kind != yaml.ScalarNode {
				// netplan's process_mapping asserts scalar keys everywhere,
				// and a merge needs keys it can compare.
				return nil, nodeError(x.path, e, "expected scalar")
			}
			c.Content = append(c.Content, e)
		}
	}
	return &c, nil
}

// nodeError is an error at n's position, in netplan's wording made
// lowercase (netplan's yaml_error: "file:line:col: Error in network
// definition: ...").
func nodeError(path string, n *yaml.Node, format string, args ...any) *Error {
	return &Error{Path: path, Line: n.Line, Column: n.Column, Reason: fmt.Sprintf(format, args...)}
}

// merge merges the mapping src into dst the way successive netplan
// files combine (netplan 0.106 parse.c applies each file's keys onto the
// same definitions): a key already present has its mapping merged, its
// sequence appended, anything else replaced; a new key is appended. A key
// repeated inside one document merges the same way, as libyaml hands netplan
// both pairs in order.
//
// The merger keeps one index per merged mapping for all files, so thousands of files (each adding an
// interface under the same `ethernets:`) stay linear to merge: rebuilding the index of the growing
// mapping for every file was quadratic.
type merger struct {
	index map[*yaml.Node]map[string]int // merged mapping -> key -> position of the key in Content
}

// keys returns dst's index, built the first time dst is merged into. Only the merger changes a
// merged mapping afterwards, and it keeps the index up to date.
func (m *merger) keys(dst *yaml.Node) map[string]int {
	if m.index == nil {
		m.index = map[*yaml.Node]map[string]int{}
	}
	if idx, ok := m.index[dst]; ok {
		return idx
	}
	idx := make(map[string]int, len(dst.Content)/2)
	for i := 0; i+1 < len(dst.Content); i += 2 {
		if _, ok := idx[dst.Content[i].Value]; !ok {
			idx[dst.Content[i].Value] = i
		}
	}
	m.index[dst] = idx
	return idx
}

func (m *merger) merge(path string, dst, src *yaml.Node) error {
	index := m.keys(dst)
	for i := 0; i+1 < len(src.Content); i += 2 {
		k, v := src.Content[i], src.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			// netplan's process_mapping asserts scalar keys everywhere.
			return nodeError(path, k, "expected scalar")
		}
		j, ok := index[k.Value]
		if !ok {
			index[k.Value] = len(dst.Content)
			dst.Content = append(dst.Content, k, v)
			continue
		}
		old := dst.Content[j+1]
		switch {
		case old.Kind == yaml.MappingNode && v.Kind == yaml.MappingNode:
			if err := m.merge(path, old, v); err != nil {
				return err
			}
		case old.Kind == yaml.SequenceNode && v.Kind == yaml.SequenceNode:
			old.Content = append(old.Content, v.Content...)
		default:
			dst.Content[j+1] = v
		}
	}
	return nil
}

// CheckBounds reports a file over nodedns's bounds (MaxFileSize, MaxDepth and the other limits of
// decode) as an *Error matching ErrLimit, and nil otherwise: other YAML errors are netplan's to judge.
// Whatever hands a file to netplan itself checks it first (a file nested 100,000 deep keeps
// `netplan generate` busy for most of a minute, past the unit's watchdog).
func CheckBounds(path string, data []byte) error {
	if _, err := decode(path, data); errors.Is(err, ErrLimit) {
		return err
	}
	return nil
}
