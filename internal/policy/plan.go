package policy

import (
	"bytes"
	"fmt"
	"io/fs"
	"net/netip"
	"slices"
	"strings"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/resolvconf"
	"github.com/nodedns/nodedns/systemd"
)

// Op is what a Change does to its file.
type Op string

// Ops.
const (
	OpWrite  Op = "write"
	OpRemove Op = "remove"
)

// Change is one file nodedns would write or remove.
type Change struct {
	// Path is the node path the change is about (/etc/resolv.conf); Target the file actually written
	// (the symlink's final target; equal to Path for regular files).
	Path   string
	Target string
	Op     Op
	Before []byte // current content; nil when the file does not exist
	After  []byte // new content; nil for OpRemove
	Mode   fs.FileMode
	Reason string
}

// Blocked is a target nodedns cannot fix safely; it is left exactly as it is.
type Blocked struct {
	Target string
	Reason string
}

// Plan is what apply would do.
type Plan struct {
	Facts   Facts
	Changes []Change
	Actions []Action
	Blocked []Blocked
	// Notes are things an operator should know that this plan does not change (e.g. a link whose
	// DHCP domains only netplan can switch off).
	Notes []string
	// Pending are the steps that complete fixes already in place (pending.go).
	Pending []Pending

	busyLinks []busyLink
}

// Empty reports whether the plan changes nothing and blocks nothing.
func (p Plan) Empty() bool {
	return len(p.Changes) == 0 && len(p.Actions) == 0 && len(p.Blocked) == 0
}

// Header texts of the files nodedns creates or edits (docs/contract.md: every file starts with a comment
// naming nodedns and saying it is managed).
const (
	KubeletHeader = "Managed by nodedns: the loop-free resolv.conf for kubelet (resolvConf). Edits are overwritten."
	EditedHeader  = "Edited by nodedns: loop addresses and DHCP search domains removed; `nodedns restore` puts the original back from /var/lib/nodedns/backup."
	DropInHeader  = "Managed by nodedns: keeps systemd-resolved from forwarding to the node-local cache or cluster DNS."
	HookHeader    = "Managed by nodedns: drops DHCP search domains and loop addresses before dhclient-script writes resolv.conf."
)

// Compute derives the plan for a snapshot. It implements docs/contract.md's invariants: no written file lists
// a loop address; nothing written has zero nameservers (if no upstream is known the target is
// Blocked and its last good file kept).
func Compute(s *node.Snapshot, cfg config.Config) Plan {
	f := Derive(s, cfg)
	p := Plan{Facts: f}
	p.kubeletResolvConf(s, cfg)
	p.etcResolvConf(s)
	p.resolved(s)
	p.dnsDelegates(s)
	p.networkManager(s)
	p.dhclientHook(s)
	p.offeredState(s)
	p.dhcpDomainsState(s)
	p.netplan(s, cfg)
	p.kubeletManage(s, cfg)
	p.blockOnKubelet(s, cfg)
	p.pending(s, cfg)
	return p
}

func (p *Plan) block(target, format string, args ...any) {
	p.Blocked = append(p.Blocked, Blocked{Target: target, Reason: fmt.Sprintf(format, args...)})
}

func (p *Plan) write(path, target string, before, after []byte, mode fs.FileMode, reason string) {
	if before != nil && bytes.Equal(before, after) {
		return
	}
	p.Changes = append(p.Changes, Change{Path: path, Target: target, Op: OpWrite, Before: before, After: after, Mode: mode, Reason: reason})
}

// KubeletResolvConf renders the kubelet resolv.conf for facts and the host's search and options: the
// upstreams; the host search domains minus DHCP and cluster domains (kubelet adds the cluster ones
// itself, and counts them against its limits); the host options minus trust-ad (it tells the stub's
// clients to trust an AD bit that pods' upstreams do not vouch for).
func KubeletResolvConf(f Facts, hostSearch, hostOptions []string) []byte {
	var search []string
	for _, d := range hostSearch {
		if f.IsDHCPDomain(d) || f.IsClusterDomain(d) || slices.ContainsFunc(search, func(x string) bool {
			return resolvconf.CanonicalDomain(x) == resolvconf.CanonicalDomain(d)
		}) {
			continue
		}
		search = append(search, strings.TrimSuffix(d, "."))
	}
	var opts []string
	for _, o := range hostOptions {
		if o != "trust-ad" && !slices.Contains(opts, o) {
			opts = append(opts, o)
		}
	}
	return resolvconf.Render(resolvconf.Spec{
		Header:      []string{KubeletHeader, "Upstreams from " + f.UpstreamSource + "."},
		Nameservers: f.Upstreams,
		Search:      search,
		Options:     opts,
	})
}

func (p *Plan) kubeletResolvConf(s *node.Snapshot, cfg config.Config) {
	target := cfg.Kubelet.ResolvConf
	if len(p.Facts.Upstreams) == 0 {
		p.block(target, "no upstream DNS server is known (config upstreams, systemd-resolved, DHCP leases, netplan and /etc/resolv.conf list none but loop addresses): the last good file is kept; set `upstreams` in the config%s", withHint(p.Facts.HiddenOfferHint()))
		return
	}
	var search, opts []string
	if rf := s.ResolvConf.File; rf != nil {
		search, opts = rf.Search(), rf.Options()
	}
	after := KubeletResolvConf(p.Facts, search, opts)
	var before []byte
	if s.NodednsResolv.Exists {
		before = s.NodednsResolv.Data
	}
	p.write(target, s.NodednsResolv.Target, before, after, 0o644, "kubelet's resolv.conf: upstreams from "+p.Facts.UpstreamSource+", no loop address, no DHCP search domain")
}

// etcResolvConf edits a regular (or non-resolved symlinked) /etc/resolv.conf in place: loop addresses
// and DHCP search domains out, everything else kept.
func (p *Plan) etcResolvConf(s *node.Snapshot) {
	rc := s.ResolvConf
	if !rc.Exists || s.ResolvConfManagedByResolved() || s.NMOwnsResolvConf() {
		return // resolved's or NetworkManager's own file: fixed through them, never edited
	}
	if rc.File == nil {
		p.block(node.EtcResolvConf, "cannot read it (%v): nothing that depends on it is changed", rc.Err)
		return
	}
	f, err := resolvconf.Parse(rc.Data)
	if err != nil {
		p.block(node.EtcResolvConf, "cannot parse it: %v", err)
		return
	}
	var reasons []string
	removed := f.RemoveNameservers(func(a netip.Addr) bool { return p.Facts.IsLoop(a, false) })
	for _, a := range removed {
		reasons = append(reasons, fmt.Sprintf("nameserver %s is %s", a, p.Facts.LoopKind(a)))
	}
	// Upstreams fill an emptied file before the search lines go: AddNameservers places them after
	// the search and domain lines, where the cache's line was (inside kubespray's Ansible block).
	filled := false
	if len(f.Nameservers()) == 0 && len(p.Facts.Upstreams) > 0 {
		f.AddNameservers(p.Facts.Upstreams)
		filled = true
	}
	for _, d := range f.FilterSearch(func(d string) bool { return !p.Facts.IsDHCPDomain(d) }) {
		reasons = append(reasons, fmt.Sprintf("search domain %s came from DHCP", d))
	}
	if r := p.dropClusterSearch(f); r != "" {
		reasons = append(reasons, r)
	}
	if len(f.Nameservers()) == 0 {
		if len(reasons) > 0 {
			p.block(node.EtcResolvConf, "removing %s would leave no nameserver and no upstream is known: left as it is; set `upstreams` in the config%s", strings.Join(reasons, ", "), withHint(p.Facts.HiddenOfferHint()))
		}
		return
	}
	if filled {
		reasons = append(reasons, "no nameserver left: upstreams from "+p.Facts.UpstreamSource+" added")
	}
	if len(reasons) == 0 {
		return
	}
	// Being edited anyway: nameservers past the third are never read (glibc and musl MAXNS, kubelet
	// truncates), so they go too and the file says what the node really uses.
	n := 0
	for _, a := range f.RemoveNameservers(func(netip.Addr) bool { n++; return n > resolvconf.MaxNameservers }) {
		reasons = append(reasons, fmt.Sprintf("nameserver %s is past the third (never read)", a))
	}
	if len(f.Lines) > 0 && strings.HasPrefix(f.Lines[0].Raw, "# Edited by nodedns") {
		f.Lines = f.Lines[1:] // an older nodedns's header: one header line, the current one
	}
	f.EnsureHeader(EditedHeader)
	path := node.EtcResolvConf
	p.write(path, rc.Target, rc.Data, f.Bytes(), rc.Mode, strings.Join(reasons, "; "))
}

// resolved handles systemd-resolved's global DNS (through a drop-in) and its per-link settings
// (through D-Bus actions, which the live layer carries out).
func (p *Plan) resolved(s *node.Snapshot) {
	if !s.ResolvedInUse() || s.ResolvedOthers == nil {
		return
	}
	f := p.Facts
	var keep []string
	var loops []string
	for _, sv := range s.ResolvedOthers.DNS {
		if systemd.IsStub(sv.Addr) {
			continue // resolved ignores its own stub addresses as servers (dns_server_address_valid)
		}
		if f.IsLoop(sv.Addr, false) {
			loops = append(loops, sv.Raw)
			continue
		}
		keep = append(keep, sv.Raw)
	}
	linkHasServer := false
	for _, l := range s.Links {
		for _, a := range l.DNS {
			if !f.IsLoop(a, false) && !systemd.IsStub(a) {
				linkHasServer = true
			}
		}
	}
	cur := s.ResolvedDropIn
	switch {
	case len(loops) == 0 && cur.Exists:
		// Nobody asks for a loop address any more (kubespray's drop-in is gone): nodedns's reset is
		// no longer needed and would pin servers nobody configures.
		p.Changes = append(p.Changes, Change{Path: node.ResolvedDropIn, Target: node.ResolvedDropIn, Op: OpRemove, Before: cur.Data,
			Reason: "no resolved.conf file lists a loop address any more"})
		p.Actions = append(p.Actions, RestartResolved{Reason: "reload resolved.conf.d (SIGHUP kills resolved 252)"})
	case len(loops) > 0 && s.Resolved != nil && s.Resolved.Halted != nil:
		// resolved 252 stops reading at a fatal error (a bad section header, an unreadable drop-in):
		// a drop-in sorted after it would be ignored, so writing one would only look like a fix.
		p.block(node.ResolvedDropIn, "resolved's global DNS= lists %s, but resolved stops reading its configuration at %s: fix that file first", strings.Join(loops, " "), s.Resolved.Halted)
		return
	case len(loops) > 0:
		servers := keep
		if len(servers) == 0 && !linkHasServer {
			for _, a := range f.Upstreams {
				servers = append(servers, a.String())
			}
			if len(servers) == 0 {
				p.block(node.ResolvedDropIn, "resolved's global DNS= lists only loop addresses (%s), no link has a server and no upstream is known: resetting it would leave resolved with no server; set `upstreams` in the config", strings.Join(loops, " "))
				return
			}
		}
		after := DropIn(servers, loops, dnsSources(s.ResolvedOthers))
		if len(servers) > 0 {
			after = dropClusterDomains(after, s.ResolvedOthers.Domains, f)
		}
		var before []byte
		if cur.Exists {
			before = cur.Data
		}
		n := len(p.Changes)
		p.write(node.ResolvedDropIn, node.ResolvedDropIn, before, after, 0o644, fmt.Sprintf("resolved's global DNS= lists %s", strings.Join(loops, " ")))
		if len(p.Changes) > n {
			p.Actions = append(p.Actions, RestartResolved{Reason: "reload resolved.conf.d (SIGHUP kills resolved 252)"})
		}
	}

	p.resolvedStale(s)

	for _, l := range s.Links {
		link := Link{Index: l.IfIndex, Name: l.IfName}
		name := link.String()
		var badDNS []netip.Addr
		for _, a := range l.DNS {
			if f.IsLoop(a, false) {
				badDNS = append(badDNS, a)
			}
		}
		var badDom []string
		for _, d := range l.Domains {
			if !d.RoutingOnly && f.IsDHCPDomain(d.Name) {
				badDom = append(badDom, d.Name)
			}
		}
		if len(badDNS) == 0 && len(badDom) == 0 {
			continue
		}
		if l.NetworkdManaged {
			// resolved answers SetLink* on networkd links with LinkBusy: only networkd's own config
			// (netplan's dhcp4-overrides, or a .network drop-in) can change them.
			var bad []string
			for _, a := range badDNS {
				bad = append(bad, a.String())
			}
			// A note, or a pending step once nodedns's override is in place (pending.go).
			p.busyLinks = append(p.busyLinks, busyLink{name: name, networkFile: l.NetworkFile, bad: append(bad, badDom...), dns: len(badDNS) > 0, domains: len(badDom) > 0})
			continue
		}
		if d, ok := NMResolvedDevice(s, l.IfIndex); ok {
			// NetworkManager is the source of this link's DNS: a per-link value set in resolved is
			// rewritten at NM's next push (docs/contract.md "NetworkManager").
			var bad []string
			for _, a := range badDNS {
				bad = append(bad, a.String())
			}
			p.Notes = append(p.Notes, nmResolvedLinkNote(name, d, append(bad, badDom...)))
			continue
		}
		if len(badDNS) > 0 {
			p.Actions = append(p.Actions, SetLinkDNS{Link: link, Drop: badDNS, Reason: "per-link DNS lists a loop address"})
		}
		if len(badDom) > 0 {
			p.Actions = append(p.Actions, SetLinkDomains{Link: link, Drop: badDom, Reason: "per-link search domains from DHCP"})
		}
	}
}

// resolvedStale restarts resolved when its live global DNS (over D-Bus) still lists a loop address
// that its configuration files no longer do: a drop-in written while a restart failed, or an edit
// nobody restarted resolved for. resolved reads its configuration only at start (SIGHUP kills
// resolved 252), so without a restart the fix would never reach it.
func (p *Plan) resolvedStale(s *node.Snapshot) {
	if s.ResolvedLive == nil || s.Resolved == nil || p.HasAction(RestartResolved{}.Kind()) {
		return
	}
	for _, sv := range s.Resolved.DNS {
		if p.Facts.IsLoop(sv.Addr, false) {
			return // the files still ask for it: the drop-in above is the fix, or it is blocked
		}
	}
	var stale []string
	for _, sv := range s.ResolvedLive.DNS {
		if p.Facts.IsLoop(sv.Addr, false) {
			stale = append(stale, sv.Addr.String())
		}
	}
	if len(stale) > 0 {
		p.Actions = append(p.Actions, RestartResolved{
			Reason: fmt.Sprintf("resolved still runs with global DNS %s, which its configuration no longer lists: restart it to reload (SIGHUP kills resolved 252)", strings.Join(stale, " "))})
	}
}

// dnsSources names the file:line of every DNS= setting.
func dnsSources(c *systemd.ResolvedConfig) []string {
	var out []string
	for _, src := range c.DNSSources {
		out = append(out, fmt.Sprintf("%s:%d", src.Path, src.Line))
	}
	return out
}

// DropIn renders /etc/systemd/resolved.conf.d/zz-nodedns.conf. The name sorts after kubespray's
// kubespray.conf and most others, and an empty DNS= resets everything before it (resolved.conf(5)).
func DropIn(servers, dropped, sources []string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n", DropInHeader)
	fmt.Fprintf(&b, "# Dropped: %s", strings.Join(dropped, " "))
	if len(sources) > 0 {
		fmt.Fprintf(&b, " (DNS= set in %s)", strings.Join(sources, ", "))
	}
	b.WriteString("\n[Resolve]\nDNS=\n")
	if len(servers) > 0 {
		fmt.Fprintf(&b, "DNS=%s\n", strings.Join(servers, " "))
	}
	return []byte(b.String())
}

// dropClusterDomains resets resolved's global Domains= in the drop-in when it lists cluster search
// domains (kubespray's `Domains=default.svc.cluster.local svc.cluster.local`) and the drop-in gives
// the global scope servers: harmless while that scope has no server (the lookups fail locally), a
// leak of cluster names to the LAN resolver once it has (docs/contract.md "Cluster search domains
// on the host"). The other domains, and routing-only ones, are kept in their order.
func dropClusterDomains(dropIn []byte, domains []string, f Facts) []byte {
	var keep, dropped []string
	for _, d := range domains {
		if !strings.HasPrefix(d, "~") && f.IsClusterDomain(d) {
			dropped = append(dropped, d)
			continue
		}
		keep = append(keep, d)
	}
	if len(dropped) == 0 {
		return dropIn
	}
	var b strings.Builder
	b.Write(dropIn)
	fmt.Fprintf(&b, "# Cluster search domains dropped from the global scope, which now has servers: %s\nDomains=\n", strings.Join(dropped, " "))
	if len(keep) > 0 {
		fmt.Fprintf(&b, "Domains=%s\n", strings.Join(keep, " "))
	}
	return []byte(b.String())
}

func (p *Plan) dhclientHook(s *node.Snapshot) {
	if !s.DhclientConf {
		return
	}
	after := DhclientHook(p.Facts)
	var before []byte
	if s.DhclientHook.Exists {
		before = s.DhclientHook.Data
	}
	p.write(node.DhclientHook, node.DhclientHook, before, after, 0o644, "dhclient would put DHCP search domains and loop addresses back on the next renewal")
}
