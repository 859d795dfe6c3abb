// Package netplan reads a node's netplan configuration the way netplan 0.106
// (the netplan.io of Debian 12, checked against it) does: which interfaces use DHCP, which
// renderer manages them, and their static nameservers and search domains.
//
// LoadSplit finds the files (/lib, /etc and /run/netplan/*.yaml, /run shadowing
// /etc shadowing /lib by file name), Parse merges them. Two views come out:
//
//   - Interfaces: the per-interface result netplan itself computes, including
//     its quirks (addresses deduplicated, nameservers and search domains
//     appended, a whole file applied twice when it refers to an ID before
//     defining it). This is what the node will actually run with.
//   - Root: the structural merge of all documents (mappings merged, scalars
//     overridden, sequences appended, unknown keys kept), for a writer that
//     adds a drop-in on top.
//
// Validation stops at the level this package reads: YAML syntax, the shape of
// `network`, device types and interfaces, and the values of the keys listed
// on Interface. Unknown keys are kept, never an error, because netplan grows
// keys faster than this package; `netplan generate` remains the full check.
package netplan

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	"go.yaml.in/yaml/v3"
)

// MaxFileSize is the largest netplan file LoadSplit and Parse accept. Real files
// are a few hundred bytes; anything near this is not a network config.
const MaxFileSize = 1 << 20

// Renderer names as netplan spells them in `renderer:`.
const (
	RendererNetworkd       = "networkd"
	RendererNetworkManager = "NetworkManager"
)

// Interface is one netplan network definition after all files are merged.
type Interface struct {
	ID       string // the key under its type, e.g. "enp0s3" or "id0"
	Type     string // "ethernets", "bonds", "bridges", "vlans", "wifis", "tunnels", "vrfs", "modems", ...
	Renderer string // "networkd" or "NetworkManager" (effective)

	DHCP4, DHCP6 bool // true/false/yes/no/on/off/y/n, any case, as netplan reads them

	// MatchName, MatchMAC, MatchDriver are match: name, macaddress and
	// driver (a driver list joined by spaces). An ethernet, wifi or modem
	// first defined without match: gets its ID as MatchName, as netplan
	// matches it by that name.
	MatchName, MatchMAC, MatchDriver string
	SetName                          string
	MTU                              int

	// Addresses as written ("10.0.2.10/24"), in netplan's effective order:
	// plain IPv4, plain IPv6, then those written with options
	// (`- 10.0.0.1/24: {label: x}`).
	Addresses          []string
	Gateway4, Gateway6 string

	// Nameservers are nameservers.addresses, IPv4 first then IPv6 (netplan
	// keeps two lists and renders them in that order), duplicates kept.
	Nameservers []netip.Addr
	// Search is nameservers.search, appended across files, duplicates kept.
	Search []string

	// DHCP4Overrides and DHCP6Overrides hold the keys as written. Values are
	// typed as netplan reads them: bool for use-dns, use-ntp, use-mtu,
	// use-routes, use-hostname, send-hostname; int for route-metric; string
	// for use-domains (netplan keeps "true", "false" or "route" as text: see
	// Bool) and hostname; any other key decoded as plain YAML.
	DHCP4Overrides, DHCP6Overrides map[string]any

	Members []string // bonds, bridges, vrfs: their `interfaces:` list, in order, without repeats
	Link    string   // vlans (and VXLAN tunnels, SR-IOV VFs): the `link:` they sit on

	Files []string // node paths of the files that define this interface, in merge order
	Line  int      // line of its key in the first file that defines it
}

// Config is the merged netplan configuration of a node.
type Config struct {
	Files      []string     // node paths read, in merge order
	Shadowed   []string     // node paths skipped because a same-named file shadows them
	Interfaces []*Interface // sorted by Type then ID
	// Root is the merged document (a DocumentNode holding one mapping):
	// mappings merged, scalars overridden by later files, sequences
	// appended, aliases expanded, unknown keys kept.
	Root *yaml.Node

	master map[string]string // member ID -> bond or bridge ID
}

// Doc is one netplan file's content, named by its node path.
type Doc struct {
	Path string
	Data []byte
}

// Error is a netplan file that netplan would reject, or that cannot be read
// as YAML. Line and Column are 1-based; 0 means unknown (the YAML library
// reports syntax errors by line only).
type Error struct {
	Path   string
	Line   int
	Column int
	Reason string
	limit  bool // over one of nodedns's bounds: errors.Is(err, ErrLimit)
}

// Is reports a file over nodedns's bounds as ErrLimit.
func (e *Error) Is(target error) bool { return e.limit && target == ErrLimit }

// Error formats the error as path:line:col: reason, leaving out what is
// unknown.
func (e *Error) Error() string {
	switch {
	case e.Line > 0 && e.Column > 0:
		return fmt.Sprintf("%s:%d:%d: %s", e.Path, e.Line, e.Column, e.Reason)
	case e.Line > 0:
		return fmt.Sprintf("%s:%d: %s", e.Path, e.Line, e.Reason)
	default:
		return fmt.Sprintf("%s: %s", e.Path, e.Reason)
	}
}

// Bool reads s the way netplan 0.106 reads a boolean (handle_generic_bool):
// true, on, yes, y and false, off, no, n, ignoring ASCII case. ok is false
// for anything else, which netplan rejects.
func Bool(s string) (value, ok bool) {
	switch asciiLower(s) {
	case "true", "on", "yes", "y":
		return true, true
	case "false", "off", "no", "n":
		return false, true
	}
	return false, false
}

// Parse merges already-read documents, in the order given (LoadSplit passes
// them in netplan's order), as netplan 0.106 does. names are node paths. A
// document netplan would reject at the level read here is an *Error naming
// path:line:col; nothing partial is returned then.
func Parse(docs []Doc) (*Config, error) {
	st := newState()
	var m merger
	root := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	cfg := &Config{Files: []string{}, Shadowed: []string{}}
	for _, d := range docs {
		cfg.Files = append(cfg.Files, d.Path)
		top, err := decode(d.Path, d.Data)
		if err != nil {
			return nil, err
		}
		if top == nil { // empty file, or comments only: netplan skips it
			continue
		}
		if err := st.loadFile(d.Path, top); err != nil {
			return nil, err
		}
		if err := m.merge(d.Path, root, top); err != nil {
			return nil, err
		}
	}
	cfg.Root = &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{root}}
	cfg.Interfaces = st.interfaces()
	cfg.master = st.master
	return cfg, nil
}

// DHCPInterfaces returns the interfaces, of any type, with dhcp4 or dhcp6
// enabled, in Interfaces order.
func (c *Config) DHCPInterfaces() []*Interface {
	var out []*Interface
	for _, i := range c.Interfaces {
		if i.DHCP4 || i.DHCP6 {
			out = append(out, i)
		}
	}
	return out
}

// Interface returns the definition with the given ID, or nil. IDs are unique
// across types: netplan rejects a definition that changes its type.
func (c *Config) Interface(id string) *Interface {
	for _, i := range c.Interfaces {
		if i.ID == id {
			return i
		}
	}
	return nil
}

// MemberOf returns the bond or bridge an interface belongs to, "" if none.
// netplan allows one of them per interface; VRF membership is not counted.
func (c *Config) MemberOf(id string) string {
	return c.master[id]
}

func sortInterfaces(s []*Interface) {
	slices.SortFunc(s, func(a, b *Interface) int {
		return cmp.Or(cmp.Compare(a.Type, b.Type), cmp.Compare(a.ID, b.ID))
	})
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
