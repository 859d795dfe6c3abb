package netplan

import (
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// deviceTypes are the keys under `network:` that hold definitions: netplan
// 0.106's network_handlers (parse.c), plus dummy-devices and
// virtual-ethernets that netplan 1.0 (Ubuntu 24.04) added, so a newer node's
// files still yield their interfaces.
var deviceTypes = map[string]bool{
	"ethernets": true, "bonds": true, "bridges": true, "vlans": true,
	"wifis": true, "tunnels": true, "vrfs": true, "modems": true,
	"nm-devices": true, "dummy-devices": true, "virtual-ethernets": true,
}

// netplan 0.106 assert_valid_id: ^[[:alnum:][:punct:]]+$, i.e. printable
// ASCII without space (netplan runs in the C locale).
var validID = regexp.MustCompile(`^[!-~]+$`)

// netplan 0.106 handle_generic_mac: 6 octets, or 20 for InfiniBand.
var macRE = regexp.MustCompile(`^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}$|^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){19}$`)

// netdef is one definition while files are applied, with the separate lists
// netplan keeps (parse.c NetplanNetDefinition) before they are flattened.
type netdef struct {
	Interface
	backend  string // "" until a renderer: applies to it
	ip4, ip6 []string
	opts     []string // addresses written with options
	ns4, ns6 []netip.Addr
	hasMatch bool
	seen     map[string]bool // "ip4 "/"ip6 "/"opt "/"member " + value, to keep long lists linear
}

// add appends v to *list unless kind+v was added before.
func (d *netdef) add(list *[]string, kind, v string) bool {
	if d.seen == nil {
		d.seen = map[string]bool{}
	}
	if d.seen[kind+v] {
		return false
	}
	d.seen[kind+v] = true
	*list = append(*list, v)
	return true
}

type missingRef struct {
	owner string
	node  *yaml.Node
}

// state replays netplan 0.106's parser over the files in order.
type state struct {
	defs   map[string]*netdef
	order  []*netdef
	global string            // network.renderer, last one wins (handle_network_renderer)
	master map[string]string // member -> bond or bridge
	kind   map[string]string // member -> "bond" or "bridge"

	path        string
	missing     map[string]missingRef
	missingKeys []string // insertion order, for a deterministic error
	found       int
}

func newState() *state {
	return &state{
		defs:   map[string]*netdef{},
		master: map[string]string{},
		kind:   map[string]string{},
	}
}

// loadFile applies one file. netplan 0.106 (parse.c process_document)
// parses a document again while a pass resolved IDs that an earlier part of
// it referred to before defining them; every pass appends the file's
// sequences again (nameservers, search), which `netplan get` shows doubled.
// This replays that loop exactly.
func (s *state) loadFile(path string, top *yaml.Node) error {
	if top.Kind != yaml.MappingNode {
		return nodeError(path, top, "expected mapping (check indentation)")
	}
	s.path = path
	s.missing = map[string]missingRef{}
	s.missingKeys = nil
	s.found = 0
	for pass := 0; pass < 10; pass++ {
		prev := s.found
		s.found = 0
		if err := s.document(top); err != nil {
			return err
		}
		still := len(s.missing)
		if still > 0 && s.found == prev {
			break
		}
		if still == 0 && s.found == 0 {
			break
		}
	}
	for _, id := range s.missingKeys {
		if m, ok := s.missing[id]; ok {
			return nodeError(path, m.node, "%s: interface '%s' is not defined", m.owner, id)
		}
	}
	return nil
}

func (s *state) refer(id, owner string, n *yaml.Node) {
	if s.defs[id] != nil {
		return
	}
	if _, ok := s.missing[id]; !ok {
		s.missing[id] = missingRef{owner: owner, node: n}
		s.missingKeys = append(s.missingKeys, id)
	}
}

// pairs calls each with every key and value of the mapping m, in order, until one fails; m that is
// not a mapping is netplan 0.106's "expected mapping" at m (parse.c process_mapping).
func (s *state) pairs(m *yaml.Node, each func(k, v *yaml.Node) error) error {
	if m.Kind != yaml.MappingNode {
		return nodeError(s.path, m, "expected mapping (check indentation)")
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if err := each(m.Content[i], m.Content[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// scalars calls each with every item of the sequence seq, in order, until one fails; seq that is
// not a sequence is "expected sequence" at seq, an item that is not a scalar "expected scalar" at
// the item, as netplan 0.106's sequence handlers say.
func (s *state) scalars(seq *yaml.Node, each func(e *yaml.Node) error) error {
	if seq.Kind != yaml.SequenceNode {
		return nodeError(s.path, seq, "expected sequence")
	}
	for _, e := range seq.Content {
		if err := s.scalar(e); err != nil {
			return err
		}
		if err := each(e); err != nil {
			return err
		}
	}
	return nil
}

func (s *state) document(top *yaml.Node) error {
	return s.pairs(top, func(k, v *yaml.Node) error {
		if k.Value != "network" {
			return nil // netplan rejects other top-level keys; we keep them (see package doc)
		}
		return s.network(v)
	})
}

func (s *state) network(m *yaml.Node) error {
	return s.pairs(m, func(k, v *yaml.Node) error {
		switch {
		case k.Value == "renderer":
			r, err := s.renderer(v)
			if err != nil {
				return err
			}
			s.global = r
		case k.Value == "version":
			if err := s.scalar(v); err != nil {
				return err
			}
			if v.Value != "2" { // handle_network_version
				return nodeError(s.path, v, "only version 2 is supported")
			}
		case deviceTypes[k.Value]:
			return s.deviceType(k.Value, v)
		}
		return nil
	})
}

// deviceType is netplan 0.106 handle_network_type: a `renderer:` key sets
// the renderer of the definitions created after it in this block only (an
// existing definition keeps its own), IDs are validated, and an ID may not
// move to another type.
func (s *state) deviceType(typ string, m *yaml.Node) error {
	typeBackend := ""
	return s.pairs(m, func(k, v *yaml.Node) error {
		if !validID.MatchString(k.Value) {
			return nodeError(s.path, k, "invalid name '%s'", k.Value)
		}
		if strings.ContainsAny(k.Value, "*[]?") {
			return nodeError(s.path, k, "definition id '%s' must not use globbing", k.Value)
		}
		if k.Value == "renderer" {
			r, err := s.renderer(v)
			if err != nil {
				return err
			}
			typeBackend = r
			return nil
		}
		if v.Kind != yaml.MappingNode {
			return nodeError(s.path, v, "expected mapping (check indentation)")
		}
		if _, ok := s.missing[k.Value]; ok {
			delete(s.missing, k.Value)
			s.found++
		}
		d := s.defs[k.Value]
		if d != nil && d.Type != typ {
			return nodeError(s.path, k, "updated definition '%s' changes device type", k.Value)
		}
		if d == nil {
			d = &netdef{Interface: Interface{ID: k.Value, Type: typ, Line: k.Line}, backend: typeBackend}
			s.defs[k.Value] = d
			s.order = append(s.order, d)
		}
		if n := len(d.Files); n == 0 || d.Files[n-1] != s.path {
			d.Files = append(d.Files, s.path)
		}
		if err := s.definition(d, v); err != nil {
			return err
		}
		// validate_netdef_grammar, the one check of it on keys read here.
		if d.SetName != "" && !d.hasMatch {
			return nodeError(s.path, v, "%s: 'set-name:' requires 'match:' properties", d.ID)
		}
		// netplan 0.106: "physical device without match: means match name
		// on ID", applied after each block that has not had a match: yet
		// (so a later match: {macaddress} keeps the name too).
		if physical[typ] && !d.hasMatch && d.MatchName == "" {
			d.MatchName = d.ID
		}
		return nil
	})
}

// physical are the types below NETPLAN_DEF_TYPE_VIRTUAL in netplan 0.106.
var physical = map[string]bool{"ethernets": true, "wifis": true, "modems": true}

func (s *state) definition(d *netdef, m *yaml.Node) error {
	return s.pairs(m, func(k, v *yaml.Node) error {
		var err error
		switch k.Value {
		case "renderer":
			d.backend, err = s.renderer(v)
		case "dhcp4":
			d.DHCP4, err = s.bool(v)
		case "dhcp6":
			d.DHCP6, err = s.bool(v)
		case "match":
			err = s.match(d, v)
			d.hasMatch = true
		case "set-name":
			if err = s.scalar(v); err == nil {
				d.SetName = v.Value
			}
		case "mtu":
			var n uint64
			if n, err = s.guint(v); err == nil {
				d.MTU = int(n)
			}
		case "addresses":
			err = s.addresses(d, v)
		case "gateway4":
			if err = s.scalar(v); err == nil {
				if !isIP4(v.Value) {
					return nodeError(s.path, v, "invalid IPv4 address '%s'", v.Value)
				}
				d.Gateway4 = v.Value
			}
		case "gateway6":
			if err = s.scalar(v); err == nil {
				if !isIP6(v.Value) {
					return nodeError(s.path, v, "invalid IPv6 address '%s'", v.Value)
				}
				d.Gateway6 = v.Value
			}
		case "nameservers":
			err = s.nameservers(d, v)
		case "dhcp4-overrides":
			err = s.overrides(&d.DHCP4Overrides, v)
		case "dhcp6-overrides":
			err = s.overrides(&d.DHCP6Overrides, v)
		case "interfaces":
			if d.Type == "bonds" || d.Type == "bridges" || d.Type == "vrfs" {
				err = s.members(d, v)
			}
		case "link":
			if d.Type == "vlans" || d.Type == "tunnels" || d.Type == "ethernets" {
				if err = s.scalar(v); err == nil {
					d.Link = v.Value
					s.refer(v.Value, d.ID, v)
				}
			}
		}
		return err
	})
}

func (s *state) match(d *netdef, m *yaml.Node) error {
	return s.pairs(m, func(k, v *yaml.Node) error {
		switch k.Value {
		case "name":
			if err := s.scalar(v); err != nil {
				return err
			}
			d.MatchName = v.Value
		case "macaddress":
			if err := s.scalar(v); err != nil {
				return err
			}
			if !macRE.MatchString(v.Value) {
				return nodeError(s.path, v, "invalid MAC address '%s', must be XX:XX:XX:XX:XX:XX or XX:XX:XX:XX:XX:XX:XX:XX:XX:XX:XX:XX:XX:XX:XX:XX:XX:XX:XX:XX", v.Value)
			}
			d.MatchMAC = v.Value
		case "driver":
			// netplan 0.106 takes one driver or a list of them (networkd
			// Driver= takes a space-separated list).
			if v.Kind == yaml.SequenceNode {
				var ds []string
				err := s.scalars(v, func(e *yaml.Node) error { ds = append(ds, e.Value); return nil })
				d.MatchDriver = strings.Join(ds, " ")
				return err
			}
			if err := s.scalar(v); err != nil {
				return err
			}
			d.MatchDriver = v.Value
		}
		return nil
	})
}

// addresses is netplan 0.106 handle_generic_addresses: plain addresses
// are deduplicated per family (so a drop-in may repeat them), addresses with
// options are kept apart, and meeting an options address already known ends
// the list early (the handler returns there; the rest of that list is
// skipped, as `netplan get` confirms).
func (s *state) addresses(d *netdef, seq *yaml.Node) error {
	if seq.Kind != yaml.SequenceNode {
		return nodeError(s.path, seq, "expected sequence")
	}
	for _, e := range seq.Content {
		key, val := e, (*yaml.Node)(nil)
		switch e.Kind {
		case yaml.ScalarNode:
		case yaml.MappingNode:
			if len(e.Content) < 2 {
				continue // netplan reads past an empty mapping; nothing to take
			}
			key, val = e.Content[0], e.Content[1]
		default:
			return nodeError(s.path, e, "expected either scalar or mapping (check indentation)")
		}
		addr := key.Value
		slash := strings.LastIndexByte(addr, '/')
		if slash < 0 {
			return nodeError(s.path, seq, "address '%s' is missing /prefixlength", addr)
		}
		ip := addr[:slash]
		plen, _ := strtoull(addr[slash+1:])
		if val != nil {
			if !isIP4(ip) && !isIP6(ip) {
				return nodeError(s.path, seq, "malformed address '%s', must be X.X.X.X/NN or X:X:X:X:X:X:X:X/NN", addr)
			}
			if d.seen["opt "+addr] {
				return nil
			}
			if val.Kind != yaml.MappingNode {
				return nodeError(s.path, val, "expected mapping (check indentation)")
			}
			d.add(&d.opts, "opt ", addr)
			continue
		}
		switch {
		case isIP4(ip):
			if plen == 0 || plen > 32 {
				return nodeError(s.path, seq, "invalid prefix length in address '%s'", addr)
			}
			d.add(&d.ip4, "ip4 ", addr)
		case isIP6(ip):
			if plen == 0 || plen > 128 {
				return nodeError(s.path, seq, "invalid prefix length in address '%s'", addr)
			}
			d.add(&d.ip6, "ip6 ", addr)
		default:
			return nodeError(s.path, seq, "malformed address '%s', must be X.X.X.X/NN or X:X:X:X:X:X:X:X/NN", addr)
		}
	}
	return nil
}

// nameservers is netplan 0.106 handle_nameservers_addresses/_search:
// both append without deduplicating; addresses go to an IPv4 or an IPv6
// list.
func (s *state) nameservers(d *netdef, m *yaml.Node) error {
	return s.pairs(m, func(k, v *yaml.Node) error {
		switch k.Value {
		case "addresses":
			return s.scalars(v, func(e *yaml.Node) error {
				switch {
				case isIP4(e.Value):
					d.ns4 = append(d.ns4, netip.MustParseAddr(e.Value))
				case isIP6(e.Value):
					d.ns6 = append(d.ns6, netip.MustParseAddr(e.Value))
				default:
					return nodeError(s.path, v, "malformed address '%s', must be X.X.X.X or X:X:X:X:X:X:X:X", e.Value)
				}
				return nil
			})
		case "search":
			return s.scalars(v, func(e *yaml.Node) error { d.Search = append(d.Search, e.Value); return nil })
		}
		return nil
	})
}

// overrides reads dhcp4-overrides / dhcp6-overrides (netplan 0.106
// dhcp4_overrides_handlers); keys from later files replace earlier ones.
func (s *state) overrides(dst *map[string]any, m *yaml.Node) error {
	if *dst == nil {
		*dst = map[string]any{} // an error below fails the whole load: nothing sees it
	}
	return s.pairs(m, func(k, v *yaml.Node) error {
		switch k.Value {
		case "use-dns", "use-ntp", "send-hostname", "use-hostname", "use-mtu", "use-routes":
			b, err := s.bool(v)
			if err != nil {
				return err
			}
			(*dst)[k.Value] = b
		case "route-metric":
			n, err := s.guint(v)
			if err != nil {
				return err
			}
			(*dst)[k.Value] = int(n)
		case "use-domains", "hostname":
			if err := s.scalar(v); err != nil {
				return err
			}
			(*dst)[k.Value] = v.Value
		default:
			var x any
			if err := v.Decode(&x); err != nil {
				x = v.Value
			}
			(*dst)[k.Value] = x
		}
		return nil
	})
}

// members is netplan 0.106 handle_bond_interfaces / handle_bridge_interfaces:
// an interface belongs to at most one bond or bridge; an ID not defined yet
// is looked up again on the next pass.
func (s *state) members(d *netdef, seq *yaml.Node) error {
	kind := map[string]string{"bonds": "bond", "bridges": "bridge"}[d.Type]
	return s.scalars(seq, func(e *yaml.Node) error {
		d.add(&d.Members, "member ", e.Value)
		if s.defs[e.Value] == nil {
			s.refer(e.Value, d.ID, e)
			return nil
		}
		if kind == "" {
			return nil // vrfs: membership is separate from bonds and bridges
		}
		m, mk := s.master[e.Value], s.kind[e.Value]
		// The bridge handler checks the other bridge first, the bond
		// handler the bridge first; either way the message names the
		// master it already has.
		if m != "" && (m != d.ID || mk != kind) {
			return nodeError(s.path, seq, "%s: interface '%s' is already assigned to %s %s", d.ID, e.Value, mk, m)
		}
		s.master[e.Value], s.kind[e.Value] = d.ID, kind
		return nil
	})
}

func (s *state) renderer(v *yaml.Node) (string, error) {
	if err := s.scalar(v); err != nil {
		return "", err
	}
	switch v.Value {
	case RendererNetworkd, RendererNetworkManager:
		return v.Value, nil
	}
	return "", nodeError(s.path, v, "unknown renderer '%s'", v.Value)
}

func (s *state) scalar(v *yaml.Node) error {
	if v.Kind != yaml.ScalarNode {
		return nodeError(s.path, v, "expected scalar")
	}
	return nil
}

// bool reads the raw scalar text: netplan compares the characters, so
// "yes", "~" and "null" mean what they spell to it, not what YAML 1.2 says.
func (s *state) bool(v *yaml.Node) (bool, error) {
	if err := s.scalar(v); err != nil {
		return false, err
	}
	b, ok := Bool(v.Value)
	if !ok {
		return false, nodeError(s.path, v, "invalid boolean value '%s'", v.Value)
	}
	return b, nil
}

// guint is netplan 0.106 handle_generic_guint: g_ascii_strtoull must
// consume the whole text and the value must fit 32 bits (so "" is 0).
func (s *state) guint(v *yaml.Node) (uint64, error) {
	if err := s.scalar(v); err != nil {
		return 0, err
	}
	n, end := strtoull(v.Value)
	if end != len(v.Value) || n > 1<<32-1 {
		return 0, nodeError(s.path, v, "invalid unsigned int value '%s'", v.Value)
	}
	return n, nil
}

// strtoull mimics glib's g_ascii_strtoull(s, &end, 10): leading
// whitespace, an optional sign (a minus negates modulo 2^64), digits;
// saturates on overflow; end is where parsing stopped, 0 when there were no
// digits.
func strtoull(s string) (n uint64, end int) {
	i := 0
	for i < len(s) && (s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r')) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	start := i
	overflow := false
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		d := uint64(s[i] - '0')
		if n > (^uint64(0)-d)/10 {
			overflow = true
		}
		n = n*10 + d
		i++
	}
	if i == start {
		return 0, 0
	}
	if overflow {
		return ^uint64(0), i
	}
	if neg {
		n = -n
	}
	return n, i
}

// isIP4 and isIP6 are inet_pton(AF_INET/AF_INET6) as netplan uses them:
// strict dotted quads, no IPv6 zone.
func isIP4(s string) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && a.Is4()
}

func isIP6(s string) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && a.Is6() && a.Zone() == ""
}

func (s *state) interfaces() []*Interface {
	out := make([]*Interface, 0, len(s.order))
	for _, d := range s.order {
		i := d.Interface
		i.Renderer = d.backend
		if i.Renderer == "" {
			i.Renderer = s.global
		}
		if i.Renderer == "" { // get_default_backend_for_type: networkd for every type
			i.Renderer = RendererNetworkd
		}
		if i.Type == "nm-devices" {
			i.Renderer = RendererNetworkManager // netplan forces NM for passthrough devices
		}
		i.Addresses = slices.Concat(d.ip4, d.ip6, d.opts)
		i.Nameservers = slices.Concat(d.ns4, d.ns6)
		out = append(out, &i)
	}
	sortInterfaces(out)
	return out
}
