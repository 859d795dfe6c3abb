package node

// dhcpdomains.go reads nodedns's record of the DHCP search domains systemd-networkd's links were
// handed (docs/contract.md "DHCP search domains"): networkd's lease is gone for a moment while it
// re-takes it (after `networkctl reload`, which nodedns's own drop-in asks for; networkd 262 keeps it
// in no file at all, and its varlink reply lacks it then), and without the record a pass in that
// moment would no longer know the domain and let it into a search list nodedns writes.

import (
	"fmt"
	"strings"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/internal/statefile"
	"github.com/nodedns/nodedns/resolvconf"
)

// DHCPDomainsStatePath is the node path of the record (policy writes it through a plan change, so
// restore removes it).
const DHCPDomainsStatePath = config.DHCPDomainsFile

// DHCPDomainsState is the content of DHCPDomainsStatePath.
type DHCPDomainsState struct {
	// Comment says what the file is (docs/contract.md "Where things live").
	Comment string `json:"comment"`
	// Links maps an interface name to the domains its networkd lease last handed out.
	Links map[string]DHCPDomainsRecord `json:"links"`
}

// DHCPDomainsRecord is what one link's lease handed out, and where that was read.
type DHCPDomainsRecord struct {
	Domains []string `json:"domains"`
	From    string   `json:"from"`
}

// DHCPDomainsStateComment is DHCPDomainsState.Comment.
const DHCPDomainsStateComment = "Managed by nodedns: the search domains DHCP handed systemd-networkd's links, kept while a lease is gone for a moment (networkd re-taking it) and forgotten with the link (nodedns restore removes it)."

// ParseDHCPDomainsState parses DHCPDomainsStatePath's content; name is for the error.
func ParseDHCPDomainsState(name string, data []byte) (DHCPDomainsState, error) {
	var st DHCPDomainsState
	if err := statefile.Decode(data, &st); err != nil {
		return DHCPDomainsState{}, fmt.Errorf("parse %s: %w", name, err)
	}
	for iface, r := range st.Links {
		if iface == "" {
			return DHCPDomainsState{}, fmt.Errorf("parse %s: an empty interface name", name)
		}
		for _, d := range r.Domains {
			if resolvconf.CanonicalDomain(d) == "" || strings.ContainsFunc(d, func(c rune) bool { return c <= ' ' || c == 0x7f }) {
				return DHCPDomainsState{}, fmt.Errorf("parse %s: %s: %q is no domain name", name, iface, d)
			}
		}
	}
	return st, nil
}

// MarshalDHCPDomainsState renders the record, indented, with a final newline; map keys sorted.
func MarshalDHCPDomainsState(st DHCPDomainsState) []byte {
	st.Comment = DHCPDomainsStateComment
	if st.Links == nil {
		st.Links = map[string]DHCPDomainsRecord{}
	}
	b, err := statefile.Encode(st)
	if err != nil {
		panic(err) // strings always marshal
	}
	return b
}

// readDHCPDomains reads the record and the names of the node's links (nil when /sys/class/net
// cannot be listed: then no link counts as gone).
func (s *Snapshot) readDHCPDomains(r nodefs.Reader) {
	s.DHCPDomainsState = s.readStateRecord(r, DHCPDomainsStatePath)
	s.DHCPDomains = nil
	if s.DHCPDomainsState.Exists && s.DHCPDomainsState.Err == nil {
		st, err := ParseDHCPDomainsState(DHCPDomainsStatePath, s.DHCPDomainsState.Data)
		if err != nil {
			s.problem(SourceManaged, DHCPDomainsStatePath, 0, err.Error())
		} else {
			s.DHCPDomains = st.Links
		}
	}
	s.LinkNames = nil
	if _, err := r.ReadDir(nodefs.SysClassNet); err != nil {
		return
	}
	names, _ := nodefs.IfNames(r) // a bad ifindex is the lease reader's problem to report
	s.LinkNames = map[string]bool{}
	for _, n := range names {
		s.LinkNames[n] = true
	}
}
