package leases

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"strings"

	"github.com/nodedns/nodedns/internal/nodefs"
)

// DhclientConfPaths are where ISC dhclient reads its configuration: Debian
// and Ubuntu use /etc/dhcp/dhclient.conf; /etc/dhclient.conf is the older
// place. kubespray (roles/kubernetes/preinstall/tasks/0020-set_facts.yml)
// checks both and writes into /etc/dhcp/dhclient.conf when both exist.
var DhclientConfPaths = []string{"/etc/dhcp/dhclient.conf", "/etc/dhclient.conf"}

// LoadDhclientConf reads the dhclient.conf dhclient reads: the first of DhclientConfPaths that
// exists (kubespray writes there too). It is nil when there is none, or when that one cannot be
// read or parsed: a problem naming it.
func LoadDhclientConf(r nodefs.Reader) (*DhclientConf, []nodefs.Problem) {
	for _, p := range DhclientConfPaths {
		data, err := r.ReadFile(p, nodefs.Config)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, []nodefs.Problem{{Path: p, Msg: err.Error()}}
		}
		c, err := ParseDhclientConf(data, p)
		if err != nil {
			return nil, []nodefs.Problem{{Path: p, Msg: err.Error()}}
		}
		return &c, nil
	}
	return nil, nil
}

// Policy is how a dhclient.conf statement changes an option the DHCP server
// offers (dhclient.conf(5), "Lease requirements and requests").
type Policy string

// The four option-modifier statements of dhclient.conf.
const (
	// Supersede replaces the offered value: dhclient 4.4 keeps no copy of it.
	Supersede Policy = "supersede"
	// Prepend puts its values before the offered ones.
	Prepend Policy = "prepend"
	// Append puts its values after the offered ones.
	Append Policy = "append"
	// Default is used only when the server offers nothing.
	Default Policy = "default"
)

// The options a Rule can name.
const (
	OptDomainNameServers = "domain-name-servers"
	OptDomainName        = "domain-name"
	OptDomainSearch      = "domain-search"
)

// Rule is one `supersede|prepend|append|default OPTION VALUE;` statement of
// dhclient.conf for domain-name-servers, domain-name or domain-search: the
// statements that decide what reaches resolv.conf, whatever DHCP offers.
// kubespray's host_resolvconf writes three of them
// (roles/kubernetes/preinstall/tasks/0100-dhclient-hooks.yml):
//
//	supersede domain-name-servers 169.254.25.10,10.66.0.53;
//	supersede domain-name "cluster.local";
//	supersede domain-search "default.svc.cluster.local","svc.cluster.local";
type Rule struct {
	// Path and Line name the statement (the line of its first word).
	Path string
	Line int
	// Policy is supersede, prepend, append or default.
	Policy Policy
	// Option is OptDomainNameServers, OptDomainName or OptDomainSearch.
	Option string
	// Interface is the name of the `interface "NAME" { ... }` block the
	// statement sits in; "" for a statement that applies to every interface.
	Interface string
	// Servers are the addresses of a domain-name-servers rule, in order.
	Servers []netip.Addr
	// Domains are the strings of a domain-search rule, or the one string of a
	// domain-name rule, as written.
	Domains []string
	// Expr is true for the `OPTION = EXPRESSION;` form: the value is computed
	// by dhclient when a lease arrives, and Servers and Domains are empty.
	Expr bool
}

// String names the rule as `check` shows it: "path:line: supersede domain-name-servers 169.254.25.10, 10.66.0.53".
func (r Rule) String() string {
	var vals []string
	for _, a := range r.Servers {
		vals = append(vals, a.String())
	}
	for _, d := range r.Domains {
		vals = append(vals, fmt.Sprintf("%q", d))
	}
	v := strings.Join(vals, ", ")
	if r.Expr {
		v = "= (expression)"
	}
	return fmt.Sprintf("%s:%d: %s %s %s", r.Path, r.Line, r.Policy, r.Option, v)
}

// Include is an `include "FILE";` statement: dhclient reads FILE at that point.
type Include struct {
	Path string // the including file
	Line int
	File string // as written
}

// DhclientConf is what nodedns needs of one dhclient.conf.
type DhclientConf struct {
	Path string
	// Rules are the option-modifier statements for the DNS options, in file
	// order (global and interface blocks mixed; see RulesFor).
	Rules []Rule
	// Includes are the include statements; their files are not read here.
	Includes []Include
}

// ParseDhclientConf parses a dhclient.conf(5) file (ISC dhclient 4.4) and
// returns its supersede, prepend, append and default statements for
// domain-name-servers, domain-name and domain-search, at top level or inside
// `interface "NAME" { ... }` blocks, and its include statements. Every other
// statement (request, send, option definitions, timeouts, lease and alias
// blocks, conditionals) is split off by its `;` or block and ignored.
//
// Keywords and option names are matched without regard to case, as ISC's
// conflex.c does. Addresses must be IPv4 literals: dhclient would look a host
// name up in DNS when it starts, which nodedns cannot repeat.
//
// Unbalanced braces or quotes, binary data, or a malformed value in one of the
// statements it reads is an error naming path:line and the reason.
func ParseDhclientConf(data []byte, path string) (DhclientConf, error) {
	toks, err := lexDhclient(data, path)
	if err != nil {
		return DhclientConf{}, err
	}
	p := &dhParser{path: path, toks: toks}
	top, err := p.body(0, 0, "")
	if err != nil {
		return DhclientConf{}, err
	}
	c := DhclientConf{Path: path}
	if err := p.confBody(&c, top, ""); err != nil {
		return DhclientConf{}, err
	}
	return c, nil
}

// confBody reads the statements of the top level (iface "") or of one
// interface block.
func (p *dhParser) confBody(c *DhclientConf, body []stmt, iface string) error {
	for _, s := range body {
		if s.words[0].kind != tWord {
			continue // not a statement nodedns reads; dhclient judges it
		}
		kw := strings.ToLower(s.words[0].text)
		switch {
		case kw == "interface" && s.block && iface == "":
			if len(s.words) != 2 || s.words[1].kind == tPunct {
				return p.errf(s.line, "interface: want interface \"NAME\" { ... }")
			}
			if err := p.confBody(c, s.body, s.words[1].text); err != nil {
				return err
			}
		case kw == "include" && !s.block && iface == "":
			if len(s.words) != 2 || s.words[1].kind != tString {
				return p.errf(s.line, "include: want include \"FILE\";")
			}
			c.Includes = append(c.Includes, Include{Path: p.path, Line: s.line, File: s.words[1].text})
		case !s.block && (kw == "supersede" || kw == "prepend" || kw == "append" || kw == "default"):
			r, ok, err := p.rule(s, Policy(kw), iface)
			if err != nil {
				return err
			}
			if ok {
				c.Rules = append(c.Rules, r)
			}
		}
	}
	return nil
}

// rule reads one option-modifier statement; ok is false for an option nodedns
// does not read.
func (p *dhParser) rule(s stmt, pol Policy, iface string) (Rule, bool, error) {
	if len(s.words) < 2 || s.words[1].kind != tWord {
		return Rule{}, false, nil
	}
	opt := strings.ToLower(s.words[1].text)
	if opt != OptDomainNameServers && opt != OptDomainName && opt != OptDomainSearch {
		return Rule{}, false, nil
	}
	r := Rule{Path: p.path, Line: s.line, Policy: pol, Option: opt, Interface: iface}
	vals := s.words[2:]
	if len(vals) > 0 && vals[0].kind == tWord && strings.HasPrefix(vals[0].text, "=") {
		r.Expr = true
		return r, true, nil
	}
	d := stmt{line: s.line, words: []token{{kind: tWord, text: string(pol) + " " + opt, line: s.line}}}
	switch opt {
	case OptDomainNameServers:
		as, err := p.addrs(d, vals, parseIPv4)
		if err != nil {
			return Rule{}, false, err
		}
		r.Servers = as
	case OptDomainName:
		v, err := p.oneString(d, vals)
		if err != nil {
			return Rule{}, false, err
		}
		r.Domains = []string{v}
	case OptDomainSearch:
		v, err := p.strings(d, vals)
		if err != nil {
			return Rule{}, false, err
		}
		r.Domains = v
	}
	return r, true, nil
}

// RulesFor returns the rules for option that apply to interface iface, in the
// order dhclient 4.4 executes them when a lease arrives: the top-level
// statements in file order, then those of the interface's own block
// (execute_statements_in_scope runs the enclosing group first).
func (c DhclientConf) RulesFor(option, iface string) []Rule {
	var global, own []Rule
	for _, r := range c.Rules {
		if r.Option != option {
			continue
		}
		switch r.Interface {
		case "":
			global = append(global, r)
		case iface:
			own = append(own, r)
		}
	}
	return append(global, own...)
}

// Offered is what a DHCP server offered for one option behind the
// dhclient.conf rules that change it, as far as the lease file still shows.
//
// What dhclient 4.4 leaves (measured with isc-dhcp-client 4.4.3-P1 and
// dnsmasq, see cmd/nodedns/testdata/kubespray/README.md): the rules run on
// the offer as it is parsed (dhclient.c packet_to_lease), so the lease file
// and the script's new_ and old_ variables hold the changed value only. A
// prepend or append leaves the offered servers inside the list; a supersede
// leaves nothing of them, except in older lease blocks of the same file that
// were written before the rule was in force (dhclient reads its configuration
// only when it starts, and on each start rewrites the file keeping one block
// per address, so that history is gone after the second restart).
type Offered struct {
	// Servers are the offered domain-name-servers (OfferedDNS).
	Servers []netip.Addr
	// Domains are the offered domain-search list (OfferedSearch).
	Domains []string
	// Known is false when every lease block of the interface was changed by a
	// supersede (Hidden names it): the offered value left no trace.
	Known bool
	// Lease is the block the value comes from (its Path and Line name it).
	Lease Lease
	// Current is true when Lease is the interface's newest block; false when
	// the value comes from an older block (history) because the newest one
	// was superseded.
	Current bool
	// Hidden is the rule that hid the offered value in the newest block, if
	// any: the persistent source `check` names.
	Hidden *Rule
}

// OfferedDNS returns the domain-name-servers the DHCP server offered on
// iface behind the rules of conf, from the DHCPv4 blocks of one dhclient lease
// file in file order (as ParseDhclient returns them, history included).
//
// For the newest block first, then older ones, it undoes the rules last to
// first: a prepend or append whose values are at the head or tail is taken
// off; a default equal to the whole list means the server may have offered
// nothing; a supersede equal to the list means the offer is lost (go to the
// next older block). A rule whose values are not where it would put them was
// not in force when the block was written (dhclient had not been restarted
// since the file changed), and the block shows the offer as it was.
func OfferedDNS(ls []Lease, conf DhclientConf, iface string) Offered {
	rules := conf.RulesFor(OptDomainNameServers, iface)
	return offered(ls, iface, rules, func(l Lease) []string { return addrStrings(l.DNS) },
		func(r Rule) []string { return addrStrings(r.Servers) },
		func(o *Offered, v []string) { o.Servers = parseAddrs(v) })
}

// OfferedSearch is OfferedDNS for the domain-search option (names compared
// without case or trailing dot; dhclient writes them with the dot).
func OfferedSearch(ls []Lease, conf DhclientConf, iface string) Offered {
	rules := conf.RulesFor(OptDomainSearch, iface)
	return offered(ls, iface, rules, func(l Lease) []string { return normDomains(l.SearchDomains) },
		func(r Rule) []string { return normDomains(r.Domains) },
		func(o *Offered, v []string) { o.Domains = v })
}

func offered(ls []Lease, iface string, rules []Rule, values func(Lease) []string, ruleValues func(Rule) []string, set func(*Offered, []string)) Offered {
	var blocks []Lease
	for _, l := range ls {
		if !l.V6 && l.Interface == iface {
			blocks = append(blocks, l)
		}
	}
	var out Offered
	for i := len(blocks) - 1; i >= 0; i-- {
		v, hidden := undo(values(blocks[i]), rules, ruleValues)
		if i == len(blocks)-1 && hidden != nil {
			h := *hidden
			out.Hidden = &h
		}
		if hidden != nil {
			continue
		}
		out.Known, out.Lease, out.Current = true, blocks[i], i == len(blocks)-1
		set(&out, v)
		return out
	}
	return out
}

// undo takes the rules' effect off one block's values, last rule first. It
// returns the rule that hid the offer, or nil with the offered values.
func undo(v []string, rules []Rule, ruleValues func(Rule) []string) ([]string, *Rule) {
	for i := len(rules) - 1; i >= 0; i-- {
		rv := ruleValues(rules[i])
		if rules[i].Expr {
			// An expression's value cannot be recomputed here: treat it as
			// a supersede whose value is unknown.
			return nil, &rules[i]
		}
		switch rules[i].Policy {
		case Supersede:
			if equal(v, rv) {
				return nil, &rules[i]
			}
			return v, nil // not in force when this block was written
		case Prepend:
			if len(v) >= len(rv) && equal(v[:len(rv)], rv) {
				v = v[len(rv):]
			}
		case Append:
			if len(v) >= len(rv) && equal(v[len(v)-len(rv):], rv) {
				v = v[:len(v)-len(rv)]
			}
		case Default:
			if equal(v, rv) {
				// dhclient uses a default only when the server sends
				// nothing: the offer was empty (or exactly the default).
				return nil, nil
			}
		}
	}
	return v, nil
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func addrStrings(as []netip.Addr) []string {
	out := make([]string, 0, len(as))
	for _, a := range as {
		out = append(out, a.String())
	}
	return out
}

func parseAddrs(v []string) []netip.Addr {
	out := make([]netip.Addr, 0, len(v))
	for _, s := range v {
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, a)
		}
	}
	return out
}

// normDomains lowercases and strips one trailing dot: kubespray writes
// "svc.cluster.local" into dhclient.conf and dhclient records
// "svc.cluster.local." in its lease file (measured, 4.4.3-P1).
func normDomains(ds []string) []string {
	out := make([]string, 0, len(ds))
	for _, d := range ds {
		out = append(out, strings.ToLower(strings.TrimSuffix(d, ".")))
	}
	return out
}
