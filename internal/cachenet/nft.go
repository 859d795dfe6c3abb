package cachenet

// nft.go: node-cache's rules in nf_tables, as iptables-nft writes them. They are read over netlink
// and replayed as read: the same table and chain, the same expressions (iptables-nft 1.8.9 writes
// the comment as an xt `comment` match and NOTRACK as an xt `CT` target; 1.8.13 orders the address
// before the protocol) and userdata. The replacement's `iptables -C` (whichever iptables-nft its
// image has) then finds its own rule: measured with iptables-nft 1.8.9 and 1.8.13, `-C` of each
// version matches rules written by either, and rules replayed from what google/nftables read list
// byte for byte as the originals (`nft --debug=netlink list ruleset`).

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/google/nftables/xt"
)

// nftRule is a rule as read from nf_tables.
type nftRule struct {
	table *nftables.Table
	chain *nftables.Chain
	exprs []expr.Any
	udata []byte
}

// comment is the rule's comment: iptables-nft's userdata comment, or an xt comment match.
func nftComment(exprs []expr.Any, udata []byte) (string, bool) {
	if c, ok := userdata.GetString(udata, userdata.TypeComment); ok {
		return c, true
	}
	for _, e := range exprs {
		if m, ok := e.(*expr.Match); ok && m.Name == "comment" {
			if c, ok := m.Info.(*xt.Comment); ok {
				return string(*c), true
			}
		}
	}
	return "", false
}

// matches reports whether the rule compares a packet's address with a.
func (r *nftRule) matches(a netip.Addr) bool {
	want := a.AsSlice()
	for _, e := range r.exprs {
		if c, ok := e.(*expr.Cmp); ok && bytes.Equal(c.Data, want) {
			return true
		}
	}
	return false
}

// key is the rule's content for comparison: every expression's netlink encoding (a counter's by
// its name only: its packets and bytes change), and the userdata.
func (r *nftRule) key() string {
	var b strings.Builder
	for _, e := range r.exprs {
		if _, ok := e.(*expr.Counter); ok {
			b.WriteString("counter;")
			continue
		}
		data, err := expr.Marshal(byte(r.table.Family), e)
		if err != nil {
			fmt.Fprintf(&b, "%T?;", e)
			continue
		}
		fmt.Fprintf(&b, "%x;", data)
	}
	fmt.Fprintf(&b, "ud=%x", r.udata)
	return b.String()
}

func nftFamily(f nftables.TableFamily) int {
	if f == nftables.TableFamilyIPv6 {
		return 6
	}
	return 4
}

// readNFT reads node-cache's rules for addrs from the ip and ip6 tables.
func readNFT(addrs []netip.Addr) ([]Rule, error) {
	c, err := nftables.New()
	if err != nil {
		return nil, fmt.Errorf("open nf_tables netlink: %w", err)
	}
	chains, err := c.ListChains()
	if err != nil {
		return nil, fmt.Errorf("list nf_tables chains: %w", err)
	}
	var out []Rule
	var errs []error
	for _, ch := range chains {
		if ch.Table.Family != nftables.TableFamilyIPv4 && ch.Table.Family != nftables.TableFamilyIPv6 {
			continue
		}
		rules, err := c.GetRules(ch.Table, ch)
		if err != nil {
			errs = append(errs, fmt.Errorf("list rules of %s %s: %w", ch.Table.Name, ch.Name, err))
			continue
		}
		for _, r := range rules {
			cm, ok := nftComment(r.Exprs, r.UserData)
			if !ok || !strings.HasPrefix(cm, CommentPrefix) {
				continue
			}
			nr := &nftRule{table: ch.Table, chain: ch, exprs: r.Exprs, udata: r.UserData}
			if !slices.ContainsFunc(addrs, nr.matches) {
				continue
			}
			out = append(out, Rule{Backend: BackendNFT, Family: nftFamily(ch.Table.Family), Table: ch.Table.Name, Chain: ch.Name, Comment: cm, nft: nr})
		}
	}
	return out, errors.Join(errs...)
}

// chainRules lists the rules of one chain with their handles.
func chainRules(c *nftables.Conn, t *nftables.Table, ch *nftables.Chain) (map[uint64]*nftRule, error) {
	rules, err := c.GetRules(t, ch)
	if err != nil {
		return nil, fmt.Errorf("list rules of %s %s: %w", t.Name, ch.Name, err)
	}
	out := map[uint64]*nftRule{}
	for _, r := range rules {
		out[r.Handle] = &nftRule{table: t, chain: ch, exprs: r.Exprs, udata: r.UserData}
	}
	return out, nil
}

type chainKey struct {
	fam          nftables.TableFamily
	table, chain string
}

// putNFT inserts the rules missing from their chains, at the top in the order they had (the last
// one first), and finds the handles the kernel gave them.
func putNFT(rules []Rule) ([]MadeRule, error) {
	c, err := nftables.New()
	if err != nil {
		return nil, fmt.Errorf("open nf_tables netlink: %w", err)
	}
	var made []MadeRule
	var errs []error
	for _, rs := range inGroups(rules, func(r Rule) chainKey { return chainKey{r.nft.table.Family, r.Table, r.Chain} }) {
		t, ch := rs[0].nft.table, rs[0].nft.chain
		before, err := chainRules(c, t, ch)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		have := map[string]int{}
		for _, r := range before {
			have[r.key()]++
		}
		add := missing(rs, have, func(r Rule) string { return r.nft.key() })
		if len(add) == 0 {
			continue
		}
		for i := len(add) - 1; i >= 0; i-- {
			r := add[i]
			c.InsertRule(&nftables.Rule{Table: t, Chain: ch, Exprs: r.nft.exprs, UserData: r.nft.udata})
		}
		if err := c.Flush(); err != nil {
			errs = append(errs, fmt.Errorf("insert node-cache's rules into %s %s: %w", t.Name, ch.Name, err))
			continue
		}
		after, err := chainRules(c, t, ch)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		// The new handles, matched to the rules added by content.
		fresh := map[string][]uint64{}
		for h, r := range after {
			if _, old := before[h]; !old {
				fresh[r.key()] = append(fresh[r.key()], h)
			}
		}
		for _, r := range add {
			k := r.nft.key()
			var h uint64
			if hs := fresh[k]; len(hs) > 0 {
				h, fresh[k] = hs[0], hs[1:]
			}
			made = append(made, MadeRule{Rule: r, Handle: h})
		}
	}
	return made, errors.Join(errs...)
}

// removeNFT deletes the rules by handle, each only while the handle still holds a rule with the
// recorded comment.
func removeNFT(rules []MadeRule) (removed, kept []string, err error) {
	c, err := nftables.New()
	if err != nil {
		return nil, nil, fmt.Errorf("open nf_tables netlink: %w", err)
	}
	var errs []error
	for _, r := range rules {
		fam := nftables.TableFamilyIPv4
		if r.Family == 6 {
			fam = nftables.TableFamilyIPv6
		}
		t := &nftables.Table{Name: r.Table, Family: fam}
		ch := &nftables.Chain{Name: r.Chain, Table: t}
		rs, err := chainRules(c, t, ch)
		if err != nil {
			kept = append(kept, fmt.Sprintf("%s: %v", r.Rule, err))
			continue
		}
		now, ok := rs[r.Handle]
		if cm, _ := nftComment(nowExprs(now), nowUdata(now)); !ok || r.Handle == 0 || cm != r.Comment {
			kept = append(kept, fmt.Sprintf("%s: no longer there (handle %d)", r.Rule, r.Handle))
			continue
		}
		if err := c.DelRule(&nftables.Rule{Table: t, Chain: ch, Handle: r.Handle}); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := c.Flush(); err != nil {
			errs = append(errs, fmt.Errorf("delete %s: %w", r.Rule, err))
			continue
		}
		removed = append(removed, r.Rule.String())
	}
	return removed, kept, errors.Join(errs...)
}

func nowExprs(r *nftRule) []expr.Any {
	if r == nil {
		return nil
	}
	return r.exprs
}

func nowUdata(r *nftRule) []byte {
	if r == nil {
		return nil
	}
	return r.udata
}
