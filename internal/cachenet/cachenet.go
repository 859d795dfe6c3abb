// Package cachenet is node-cache's footprint on the node (docs/contract.md "Standby"): its
// interface, the cache addresses on it, and its netfilter rules, read while it runs and put back,
// exactly as they were, when its teardown takes them away. node-cache (kubernetes/dns
// cmd/node-cache/app/cache_app.go, TeardownNetworking) deletes every rule it wrote and then its
// interface on SIGTERM unless run with -skipteardown, which kubespray's default DaemonSet is not:
// every rolling update of node-local-dns takes the cache address off the node until the
// replacement binds. Put back in node-cache's own form (the same interface name and addresses; the
// same rules in the same backend, table and chain, with node-cache's comment), the replacement's
// EnsureDummyDevice and EnsureRule find them and add nothing.
//
// What nodedns creates is recorded (Made) so that `nodedns restore` removes it (Reverter), until
// node-cache takes it over again.
package cachenet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Backends of a rule.
const (
	BackendNFT    = "nf_tables"       // iptables-nft (and nft), read and written over netlink
	BackendLegacy = "iptables-legacy" // x_tables, read with iptables-legacy-save, written with -restore
)

// CommentPrefix starts every comment node-cache gives its rules (cache_app.go
// iptablesCommentSkipConntrack "NodeLocal DNS Cache: skip conntrack" and
// iptablesCommentAllowTraffic "NodeLocal DNS Cache: allow DNS traffic").
const CommentPrefix = "NodeLocal DNS Cache: "

// Link is the cache's interface as it was.
type Link struct {
	Name string `json:"name"`
	// Kind is the netlink link kind: "dummy" for node-cache's own (netif.go AddDummyDevice).
	Kind  string `json:"kind"`
	Up    bool   `json:"up"`
	MTU   int    `json:"mtu,omitempty"`
	Index int    `json:"index"`
}

// Addr is one cache address on the interface: its prefix (node-cache adds a /32 or /128,
// netlink.NewIPNet) and scope.
type Addr struct {
	Prefix netip.Prefix `json:"prefix"`
	Scope  int          `json:"scope"`
}

// Rule is one of node-cache's rules.
type Rule struct {
	Backend string `json:"backend"`
	Family  int    `json:"family"` // 4 or 6
	Table   string `json:"table"`
	Chain   string `json:"chain"`
	Comment string `json:"comment"`
	// Spec is the rule as iptables-save prints it after "-A CHAIN": what is replayed in the
	// legacy backend. nf_tables rules are replayed from their expressions (nft), as read.
	Spec string `json:"spec,omitempty"`

	nft *nftRule
}

func (r Rule) String() string {
	if r.Spec != "" {
		return fmt.Sprintf("%s %s %s (%s, IPv%d)", r.Table, r.Chain, r.Spec, r.Backend, r.Family)
	}
	return fmt.Sprintf("%s %s %q (%s, IPv%d)", r.Table, r.Chain, r.Comment, r.Backend, r.Family)
}

// Footprint is what node-cache had on the node, as last read while it ran.
type Footprint struct {
	Link  Link
	Addrs []Addr
	Rules []Rule
	// RulesRead is when the rules were read (zero: not yet).
	RulesRead time.Time
}

// Describe says what the footprint holds, for the log and the check.
func (f Footprint) Describe() string {
	var as []string
	for _, a := range f.Addrs {
		as = append(as, a.Prefix.String())
	}
	state := "down"
	if f.Link.Up {
		state = "up"
	}
	s := fmt.Sprintf("%s (%s, %s) with %s", f.Link.Name, f.Link.Kind, state, strings.Join(as, ", "))
	if n := len(f.Rules); n > 0 {
		s += fmt.Sprintf("; %d rules (%s)", n, strings.Join(backends(f.Rules), ", "))
	}
	return s
}

// backends lists the backends of rs (rules, or rules made), each once, in order.
func backends[R interface{ backend() string }](rs []R) []string {
	var out []string
	for _, r := range rs {
		if b := r.backend(); !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	return out
}

func (r Rule) backend() string { return r.Backend }

// ReadLink reads the interface name and those of addrs that are on it.
func ReadLink(name string, addrs []netip.Addr) (Link, []Addr, error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return Link{}, nil, fmt.Errorf("read interface %s: %w", name, err)
	}
	a := l.Attrs()
	link := Link{Name: a.Name, Kind: l.Type(), Up: a.Flags&net.FlagUp != 0, MTU: a.MTU, Index: a.Index}
	var out []Addr
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		as, err := netlink.AddrList(l, fam)
		if err != nil {
			return link, nil, fmt.Errorf("read addresses of %s: %w", name, err)
		}
		for _, x := range as {
			ip, ok := netip.AddrFromSlice(x.IP)
			if !ok || !slices.Contains(addrs, ip.Unmap()) {
				continue
			}
			ones, _ := x.Mask.Size()
			out = append(out, Addr{Prefix: netip.PrefixFrom(ip.Unmap(), ones), Scope: x.Scope})
		}
	}
	return link, out, nil
}

// ReadRules reads node-cache's rules for addrs from both backends: a rule is node-cache's when its
// comment starts with CommentPrefix, and one for a cache address when it matches that address.
// Rules a backend cannot be read for are left out and the error says why.
func ReadRules(ctx context.Context, addrs []netip.Addr) ([]Rule, error) {
	nft, err1 := readNFT(addrs)
	legacy, err2 := readLegacy(ctx, addrs)
	return append(nft, legacy...), errors.Join(err1, err2)
}

// Made is what nodedns created when it put a footprint back: the record `restore` removes (until
// node-cache takes it over again, when the record goes).
type Made struct {
	At time.Time `json:"at"`
	// Why is what took the footprint away.
	Why string `json:"why"`
	// Link is the interface nodedns created (nil: it was still there); KindNote says why its kind
	// differs from node-cache's (a kernel without the dummy link type).
	Link     *Link  `json:"link,omitempty"`
	KindNote string `json:"kindNote,omitempty"`
	// Addrs are the addresses nodedns added, on Link or on the interface that was there.
	Addrs []MadeAddr `json:"addrs,omitempty"`
	// Rules are the rules nodedns added.
	Rules []MadeRule `json:"rules,omitempty"`
}

// MadeAddr is an address nodedns added to an interface (by name and index).
type MadeAddr struct {
	Link   string       `json:"link"`
	Index  int          `json:"index"`
	Prefix netip.Prefix `json:"prefix"`
	Scope  int          `json:"scope"`
}

// MadeRule is a rule nodedns added: Handle identifies an nf_tables rule (checked against Comment
// before it is deleted), Spec a legacy one.
type MadeRule struct {
	Rule
	Handle uint64 `json:"handle,omitempty"`
}

// Empty reports whether nothing was made.
func (m Made) Empty() bool { return m.Link == nil && len(m.Addrs) == 0 && len(m.Rules) == 0 }

// Describe says what was made, for the log and the check.
func (m Made) Describe() string {
	var parts []string
	if m.Link != nil {
		s := fmt.Sprintf("interface %s (%s)", m.Link.Name, m.Link.Kind)
		if m.KindNote != "" {
			s += ": " + m.KindNote
		}
		parts = append(parts, s)
	}
	for _, a := range m.Addrs {
		parts = append(parts, fmt.Sprintf("%s on %s", a.Prefix, a.Link))
	}
	if n := len(m.Rules); n > 0 {
		parts = append(parts, fmt.Sprintf("%d of node-cache's rules (%s)", n, strings.Join(backends(m.Rules), ", ")))
	}
	if len(parts) == 0 {
		return "nothing (all of it was still there)"
	}
	return strings.Join(parts, ", ")
}

// PutBack puts back what of fp is missing: the interface (as fp.Link's kind; a dummy where the
// kernel has none becomes a bridge, and KindNote says so), its state and MTU, the addresses, and the
// rules in their own backend, table and chain (nf_tables: the expressions and userdata as read;
// legacy: the save-format spec), each at the top of its chain in the order it had. Only the
// addresses of want are put back, and the rules for them. It returns what it created, also when a
// later step fails.
func PutBack(ctx context.Context, fp Footprint, want []netip.Addr) (Made, error) {
	m := Made{At: time.Now()}
	var errs []error
	l, err := netlink.LinkByName(fp.Link.Name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if !errors.As(err, &nf) {
			return m, fmt.Errorf("look up interface %s: %w", fp.Link.Name, err)
		}
		l, m.KindNote, err = addLink(fp.Link)
		if err != nil {
			return m, err
		}
		a := l.Attrs()
		m.Link = &Link{Name: a.Name, Kind: l.Type(), Up: fp.Link.Up, MTU: a.MTU, Index: a.Index}
	}
	for _, a := range fp.Addrs {
		if !slices.Contains(want, a.Prefix.Addr()) {
			continue
		}
		err := netlink.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: a.Prefix.Addr().AsSlice(), Mask: net.CIDRMask(a.Prefix.Bits(), a.Prefix.Addr().BitLen())}, Scope: a.Scope, Flags: unix.IFA_F_NODAD})
		switch {
		case errors.Is(err, unix.EEXIST):
		case err != nil:
			errs = append(errs, fmt.Errorf("add %s to %s: %w", a.Prefix, fp.Link.Name, err))
		default:
			m.Addrs = append(m.Addrs, MadeAddr{Link: l.Attrs().Name, Index: l.Attrs().Index, Prefix: a.Prefix, Scope: a.Scope})
		}
	}
	var rules []Rule
	for _, r := range fp.Rules {
		if slices.ContainsFunc(want, r.matches) {
			rules = append(rules, r)
		}
	}
	made, err := putRules(ctx, rules)
	m.Rules = made
	if err != nil {
		errs = append(errs, err)
	}
	return m, errors.Join(errs...)
}

// addLink creates the interface: a dummy for node-cache's own (netif.go AddDummyDevice), a bridge
// where the kernel has no dummy link type (EOPNOTSUPP: built without CONFIG_DUMMY, as this project's
// CI kernel), or the kind it was; up if it was up (node-cache never sets its dummy up), with its MTU.
func addLink(was Link) (netlink.Link, string, error) {
	attrs := netlink.NewLinkAttrs()
	attrs.Name = was.Name
	if was.MTU > 0 {
		attrs.MTU = was.MTU
	}
	note := ""
	var err error
	switch was.Kind {
	case "bridge":
		err = netlink.LinkAdd(&netlink.Bridge{LinkAttrs: attrs})
	default:
		err = netlink.LinkAdd(&netlink.Dummy{LinkAttrs: attrs})
		if errors.Is(err, unix.EOPNOTSUPP) {
			note = "this kernel has no dummy link type: made a bridge"
			if was.Kind != "dummy" {
				note = fmt.Sprintf("it was a %s; this kernel has no dummy link type: made a bridge", was.Kind)
			}
			err = netlink.LinkAdd(&netlink.Bridge{LinkAttrs: attrs})
		} else if err == nil && was.Kind != "dummy" {
			note = fmt.Sprintf("it was a %s: made a dummy, as node-cache makes", was.Kind)
		}
	}
	if err != nil {
		return nil, note, fmt.Errorf("create interface %s: %w", was.Name, err)
	}
	l, err := netlink.LinkByName(was.Name)
	if err != nil {
		return nil, note, fmt.Errorf("look up interface %s after creating it: %w", was.Name, err)
	}
	if was.Up {
		if err := netlink.LinkSetUp(l); err != nil {
			return l, note, fmt.Errorf("set %s up: %w", was.Name, err)
		}
	}
	return l, note, nil
}

// matches reports whether the rule is one for the cache address a.
func (r Rule) matches(a netip.Addr) bool {
	if r.nft != nil {
		return r.nft.matches(a)
	}
	p := netip.PrefixFrom(a, a.BitLen()).String()
	f := strings.Fields(r.Spec)
	for i := 0; i+1 < len(f); i++ {
		if (f[i] == "-d" || f[i] == "-s") && f[i+1] == p {
			return true
		}
	}
	return false
}

// inGroups splits rules into the groups key puts together, in the order of each group's first
// rule, each group in the rules' order.
func inGroups[K comparable](rules []Rule, key func(Rule) K) [][]Rule {
	at := map[K]int{}
	var out [][]Rule
	for _, r := range rules {
		k := key(r)
		i, ok := at[k]
		if !ok {
			i = len(out)
			at[k] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], r)
	}
	return out
}

// missing returns the rules of want that a chain lacks, in want's order: have counts the chain's
// rules by key, and a rule is there as many times as the chain holds its key.
func missing(want []Rule, have map[string]int, key func(Rule) string) []Rule {
	var add []Rule
	for _, r := range want {
		if k := key(r); have[k] > 0 {
			have[k]--
			continue
		}
		add = append(add, r)
	}
	return add
}

// putRules inserts the rules that are missing, per backend.
func putRules(ctx context.Context, rules []Rule) ([]MadeRule, error) {
	var nft, legacy []Rule
	for _, r := range rules {
		if r.Backend == BackendLegacy {
			legacy = append(legacy, r)
		} else if r.nft != nil {
			nft = append(nft, r)
		}
	}
	var made []MadeRule
	var errs []error
	if len(nft) > 0 {
		m, err := putNFT(nft)
		made = append(made, m...)
		errs = append(errs, err)
	}
	if len(legacy) > 0 {
		m, err := putLegacy(ctx, legacy)
		made = append(made, m...)
		errs = append(errs, err)
	}
	return made, errors.Join(errs...)
}

// Remove removes what m says nodedns made: its rules (an nf_tables rule only while the handle still
// holds a rule with node-cache's comment), its addresses (only on the same interface), its interface
// (only the same one: the name at the recorded index). It says what it removed and what it kept.
func Remove(ctx context.Context, m Made) (removed, kept []string, err error) {
	var errs []error
	var nft, legacy []MadeRule
	for _, r := range m.Rules {
		if r.Backend == BackendLegacy {
			legacy = append(legacy, r)
		} else {
			nft = append(nft, r)
		}
	}
	if len(nft) > 0 {
		r, k, err := removeNFT(nft)
		removed, kept, errs = append(removed, r...), append(kept, k...), append(errs, err)
	}
	if len(legacy) > 0 {
		r, k, err := removeLegacy(ctx, legacy)
		removed, kept, errs = append(removed, r...), append(kept, k...), append(errs, err)
	}
	linkGone := false
	if m.Link != nil {
		l, err := netlink.LinkByIndex(m.Link.Index)
		switch {
		case err != nil || l.Attrs().Name != m.Link.Name:
			kept = append(kept, fmt.Sprintf("interface %s: gone (ifindex %d is no longer it)", m.Link.Name, m.Link.Index))
		default:
			if err := netlink.LinkDel(l); err != nil {
				errs = append(errs, fmt.Errorf("delete interface %s: %w", m.Link.Name, err))
			} else {
				linkGone = true
				removed = append(removed, fmt.Sprintf("interface %s with its addresses", m.Link.Name))
			}
		}
	}
	for _, a := range m.Addrs {
		if linkGone && m.Link != nil && a.Index == m.Link.Index {
			continue
		}
		l, err := netlink.LinkByIndex(a.Index)
		if err != nil || l.Attrs().Name != a.Link {
			kept = append(kept, fmt.Sprintf("%s on %s: the interface is gone", a.Prefix, a.Link))
			continue
		}
		err = netlink.AddrDel(l, &netlink.Addr{IPNet: &net.IPNet{IP: a.Prefix.Addr().AsSlice(), Mask: net.CIDRMask(a.Prefix.Bits(), a.Prefix.Addr().BitLen())}})
		switch {
		case errors.Is(err, unix.EADDRNOTAVAIL):
			kept = append(kept, fmt.Sprintf("%s on %s: already gone", a.Prefix, a.Link))
		case err != nil:
			errs = append(errs, fmt.Errorf("delete %s from %s: %w", a.Prefix, a.Link, err))
		default:
			removed = append(removed, fmt.Sprintf("%s on %s", a.Prefix, a.Link))
		}
	}
	return removed, kept, errors.Join(errs...)
}
