package netplan

import (
	"bytes"
	"cmp"
	"fmt"
	"net/netip"
	"path"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// NodednsFile is the node path of the one netplan file nodedns writes (docs/contract.md). "90-" sorts after
// the installer's 00-, cloud-init's 50- and most hand-written files, so its scalars win and its
// lists append (netplan 0.106 merge rules).
const NodednsFile = "/etc/netplan/90-nodedns.yaml"

// Writes declares the node paths nodedns writes for netplan (path.Match patterns), as Watches
// declares what it reads: node.Writes is the union of every mechanism's.
func Writes() []string { return []string{NodednsFile} }

// FileMode is the mode of NodednsFile: netplan 0.106 warns about files readable by others.
const FileMode = 0o600

// Header is the first line of NodednsFile (docs/contract.md: every file nodedns creates says it is managed).
const Header = "# Managed by nodedns: keeps DHCP search domains (and loop DNS servers) out of netplan's DHCP interfaces. `nodedns restore` removes it."

// Override switches DHCP-provided search domains off on one netplan definition, as a drop-in on top
// of the node's files.
type Override struct {
	ID   string // the definition's ID
	Type string // its device type key ("ethernets", "bonds", ...)
	// DHCP4 and DHCP6 say which overrides to write: those of the families the definition enables.
	DHCP4, DHCP6 bool
	// Nameservers, when not empty, also switch DHCP's DNS servers off (use-dns: false) and list these
	// as the definition's static nameservers: DHCP hands out a loop address.
	Nameservers []netip.Addr
}

// Pin replaces DHCPv4 addressing of one definition by static addressing taken from its lease.
// match:, set-name:, MTU and every other key stay as the node's own files have them: the drop-in
// only adds. DHCPv6 and IPv6 SLAAC are left as they are.
type Pin struct {
	ID          string
	Type        string
	Address     netip.Prefix // the leased address with its prefix length
	Gateway     netip.Addr   // the lease's router: routes: [{to: default, via: Gateway}]
	Nameservers []netip.Addr // the lease's servers minus loop addresses (never empty)
	// DHCP6 keeps DHCPv6 on: its search domains are switched off as in an Override.
	DHCP6 bool
	// NoDNS6 also sets dhcp6-overrides use-dns: false (DHCPv6 hands out a loop address).
	NoDNS6 bool
}

// DropIn is the content of NodednsFile.
type DropIn struct {
	// Comments are extra comment lines after the Header (without "# "), e.g. where each value came
	// from.
	Comments  []string
	Overrides []Override
	Pins      []Pin
}

// Empty reports whether the drop-in configures nothing.
func (d DropIn) Empty() bool { return len(d.Overrides) == 0 && len(d.Pins) == 0 }

// Render returns the YAML of the drop-in: the header, then `network: {version: 2, <type>: {<id>:
// ...}}` with types and IDs sorted, so the same input always gives the same bytes (a second apply
// changes nothing). It refuses a pin without nameservers or a default route, and a definition named
// twice, rather than write a file that would leave the node without them.
func (d DropIn) Render() ([]byte, error) {
	type entry struct {
		typ, id string
		body    *yaml.Node
	}
	var entries []entry
	seen := map[string]bool{}
	for _, o := range d.Overrides {
		if seen[o.ID] {
			return nil, fmt.Errorf("render %s: %s is configured twice", NodednsFile, o.ID)
		}
		seen[o.ID] = true
		m := mapping()
		if len(o.Nameservers) > 0 {
			addPair(m, "nameservers", mapping("addresses", addrSeq(o.Nameservers)))
		}
		ov := overridesNode(len(o.Nameservers) > 0)
		if o.DHCP4 {
			addPair(m, "dhcp4-overrides", ov)
		}
		if o.DHCP6 {
			// networkd has one [DHCP] section for both families (netplan 0.106 refuses differing
			// overrides when both are on): the same keys for both.
			addPair(m, "dhcp6-overrides", overridesNode(len(o.Nameservers) > 0))
		}
		if len(m.Content) == 0 {
			continue
		}
		entries = append(entries, entry{o.Type, o.ID, m})
	}
	for _, p := range d.Pins {
		if seen[p.ID] {
			return nil, fmt.Errorf("render %s: %s is configured twice", NodednsFile, p.ID)
		}
		seen[p.ID] = true
		switch {
		case !p.Address.IsValid() || !p.Address.Addr().Is4():
			return nil, fmt.Errorf("render %s: pin %s: no IPv4 address", NodednsFile, p.ID)
		case !p.Gateway.IsValid():
			return nil, fmt.Errorf("render %s: pin %s: no default route", NodednsFile, p.ID)
		case len(p.Nameservers) == 0:
			return nil, fmt.Errorf("render %s: pin %s: no nameserver", NodednsFile, p.ID)
		}
		m := mapping(
			"dhcp4", scalar("!!bool", "false"),
			"addresses", seq(scalar("!!str", p.Address.String())),
			"routes", seq(mapping("to", scalar("!!str", "default"), "via", scalar("!!str", p.Gateway.String()))),
			"nameservers", mapping("addresses", addrSeq(p.Nameservers)),
		)
		if p.DHCP6 {
			addPair(m, "dhcp6-overrides", overridesNode(p.NoDNS6))
		}
		entries = append(entries, entry{p.Type, p.ID, m})
	}
	slices.SortFunc(entries, func(a, b entry) int { return cmp.Or(cmp.Compare(a.typ, b.typ), cmp.Compare(a.id, b.id)) })

	network := mapping("version", scalar("!!int", "2"))
	var cur *yaml.Node
	curType := ""
	for _, e := range entries {
		if cur == nil || e.typ != curType {
			cur, curType = mapping(), e.typ
			addPair(network, e.typ, cur)
		}
		addPair(cur, e.id, e.body)
	}
	doc := &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{mapping("network", network)}}

	var b bytes.Buffer
	b.WriteString(Header + "\n")
	for _, c := range d.Comments {
		for _, l := range strings.Split(c, "\n") {
			b.WriteString(strings.TrimRight("# "+l, " ") + "\n")
		}
	}
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("render %s: %w", NodednsFile, err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("render %s: %w", NodednsFile, err)
	}
	return b.Bytes(), nil
}

func overridesNode(noDNS bool) *yaml.Node {
	m := mapping("use-domains", scalar("!!bool", "false"))
	if noDNS {
		addPair(m, "use-dns", scalar("!!bool", "false"))
	}
	return m
}

func scalar(tag, v string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: v}
}

func seq(items ...*yaml.Node) *yaml.Node {
	return &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Style: yaml.FlowStyle, Content: items}
}

func addrSeq(as []netip.Addr) *yaml.Node {
	s := seq()
	for _, a := range as {
		s.Content = append(s.Content, scalar("!!str", a.String()))
	}
	return s
}

// mapping builds a block mapping from key, value pairs (keys are strings, values nodes).
func mapping(kv ...any) *yaml.Node {
	m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for i := 0; i+1 < len(kv); i += 2 {
		addPair(m, kv[i].(string), kv[i+1].(*yaml.Node))
	}
	return m
}

func addPair(m *yaml.Node, k string, v *yaml.Node) {
	m.Content = append(m.Content, scalar("!!str", k), v)
}

// Pins reads back the pins of a parsed NodednsFile: definitions with dhcp4 switched off, a static
// address and a default route. A later pass keeps them as they are: once DHCP is off networkd
// deletes the lease, and the address must not move. DHCP6 is as the file says; the caller takes it
// from the node's own files.
func Pins(own *Config) []Pin {
	var out []Pin
	for _, i := range own.Interfaces {
		if i.DHCP4 || len(i.Addresses) == 0 || len(i.Nameservers) == 0 || lookup(own.Root, i.Type, i.ID, "dhcp4") == nil {
			continue
		}
		a, err := netip.ParsePrefix(i.Addresses[0])
		if err != nil || !a.Addr().Is4() {
			continue
		}
		gw, ok := defaultVia4(lookup(own.Root, i.Type, i.ID, "routes"))
		if !ok {
			continue
		}
		p := Pin{ID: i.ID, Type: i.Type, Address: a, Gateway: gw, Nameservers: i.Nameservers, DHCP6: i.DHCP6}
		if v, ok := i.DHCP6Overrides["use-dns"].(bool); ok && !v {
			p.NoDNS6 = true
		}
		out = append(out, p)
	}
	return out
}

// defaultVia4 finds the via of an IPv4 default route in a routes: sequence.
func defaultVia4(routes *yaml.Node) (netip.Addr, bool) {
	if routes == nil || routes.Kind != yaml.SequenceNode {
		return netip.Addr{}, false
	}
	for _, r := range routes.Content {
		to, via := lookupIn(r, "to"), lookupIn(r, "via")
		if to == nil || via == nil || (to.Value != "default" && to.Value != "0.0.0.0/0") {
			continue
		}
		if a, err := netip.ParseAddr(via.Value); err == nil && a.Is4() {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// lookup returns network.<path...> in a merged document, or nil.
func lookup(root *yaml.Node, path ...string) *yaml.Node {
	if root == nil || len(root.Content) == 0 {
		return nil
	}
	n := root.Content[0]
	for _, k := range append([]string{"network"}, path...) {
		if n = lookupIn(n, k); n == nil {
			return nil
		}
	}
	return n
}

// lookupIn returns the value of key k in mapping n (the last one, as netplan reads a repeated
// key), or nil.
func lookupIn(n *yaml.Node, k string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	var v *yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == k {
			v = n.Content[i+1]
		}
	}
	return v
}

// NamesFor returns the kernel interface names a definition configures, as far as the files say:
// set-name, a literal match: name, or the ID itself when the definition has no match (netplan then
// matches by ID; bonds, bridges and VLANs are always created under their ID). A match: name glob
// is returned as written; use Matches to test a name.
func (i *Interface) NamesFor() []string {
	var out []string
	add := func(s string) {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	add(i.SetName)
	add(i.MatchName)
	switch i.Type {
	case "ethernets", "wifis", "modems", "nm-devices":
		if i.MatchName == "" && i.MatchMAC == "" && i.MatchDriver == "" {
			add(i.ID)
		}
	default:
		add(i.ID)
	}
	return out
}

// Matches reports whether the kernel interface name configures through this definition, by name
// only (a MAC or driver match cannot be checked from files).
func (i *Interface) Matches(ifname string) bool {
	for _, n := range i.NamesFor() {
		if n == ifname {
			return true
		}
		// networkd's Name= takes fnmatch(3) globs, which path.Match implements for names.
		if ok, err := path.Match(n, ifname); strings.ContainsAny(n, "*?[") && err == nil && ok {
			return true
		}
	}
	return false
}
