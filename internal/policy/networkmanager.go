package policy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/nodedns/nodedns/internal/networkmanager"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/resolvconf"
)

// NMUpstreamSource names NetworkManager's DHCP servers as a source of upstreams (docs/contract.md
// "Upstreams", source 3).
const NMUpstreamSource = "NetworkManager's DHCP servers"

// nmDHCPServers are the DNS servers DHCP handed NetworkManager's devices, by ifindex, DHCPv4 before
// DHCPv6; a family whose connection ignores automatic DNS (ipv4.ignore-auto-dns) is left out, as
// NM leaves it out of resolv.conf.
func nmDHCPServers(s *node.Snapshot) []netip.Addr {
	var out []netip.Addr
	for _, d := range s.NetworkManager.DHCPDevices() {
		v4, v6 := nmAutoDNS(s, d)
		if v4 {
			out = append(out, d.DHCP4.Servers...)
		}
		if v6 {
			out = append(out, d.DHCP6.Servers...)
		}
	}
	return out
}

// nmAutoDNS says whether NM takes DNS from DHCP for the device's families: not when the profile of
// its connection (known from the device state file) sets ignore-auto-dns.
func nmAutoDNS(s *node.Snapshot, d node.NMDevice) (v4, v6 bool) {
	cs := s.NetworkManager.Connections
	if cs == nil || d.ConnectionUUID == "" {
		return true, true
	}
	c, ok := cs.ByUUID(d.ConnectionUUID)
	if !ok {
		return true, true
	}
	return !c.IPv4.IgnoreAutoDNS, !c.IPv6.IgnoreAutoDNS
}

// addNetworkManager adds what DHCP handed NetworkManager's devices: their interfaces are DHCP links,
// and every domain is a DHCP search domain (docs/contract.md "DHCP search domains"), whether or not
// NM passes it on now (a DHCP server that handed a domain out once will again).
func (f *Facts) addNetworkManager(s *node.Snapshot) {
	for _, d := range s.NetworkManager.DHCPDevices() {
		if d.IfName != "" {
			f.DHCPLinks[d.IfName] = true
		} else {
			f.DHCPLinks[fmt.Sprintf("#%d", d.IfIndex)] = true
		}
		for _, dom := range append(d.DHCP4.Domains(), d.DHCP6.Domains()...) {
			f.addDHCPDomain(dom, d.Source)
		}
	}
}

// nmDevName names a device for messages.
func nmDevName(d node.NMDevice) string {
	if d.IfName != "" {
		return d.IfName
	}
	return fmt.Sprintf("ifindex %d", d.IfIndex)
}

// NMStarServers are the valid addresses of a global DNS configuration's "*" domain (nil when it has
// none).
func NMStarServers(g *networkmanager.GlobalDNS) []netip.Addr {
	if g == nil {
		return nil
	}
	d, ok := g.Domain("*")
	if !ok {
		return nil
	}
	var out []netip.Addr
	for _, s := range d.Servers {
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// NMOverrideReasons says why NetworkManager's own configuration (without nodedns's override) puts
// a loop address or a DHCP search domain into the resolv.conf it writes; none when it does not.
// While the global DNS has a "*" domain, NM 1.42 writes only the global servers and searches
// (networkmanager/FACTS.md), so DHCP's servers and domains count only without one; and from 1.56
// a global DNS without one puts its searches in place of DHCP's domains (NMSearchesReplaceDHCP).
func NMOverrideReasons(s *node.Snapshot, f Facts) []string {
	nm := &s.NetworkManager
	if nm.Others == nil {
		return nil
	}
	var why []string
	g := nm.Others.GlobalDNS()
	if g.Overrides() {
		var loops []string
		for _, a := range NMStarServers(g) {
			if f.IsLoop(a, false) {
				loops = append(loops, a.String())
			}
		}
		if len(loops) > 0 {
			why = append(why, fmt.Sprintf("NetworkManager's global DNS lists %s, from %s", strings.Join(loops, " "), node.NMGlobalDNSSource(g)))
		}
		return why
	}
	replaced := NMSearchesReplaceDHCP(nm, g)
	if replaced {
		var dhcp []string
		for _, dom := range g.Searches {
			if f.IsDHCPDomain(dom) && !slices.Contains(dhcp, dom) {
				dhcp = append(dhcp, dom)
			}
		}
		if len(dhcp) > 0 {
			from := node.NMGlobalDNSSource(g)
			if !g.Internal && g.SearchesFrom.Path != "" {
				from = fmt.Sprintf("[global-dns] searches= in %s", g.SearchesFrom)
			}
			why = append(why, fmt.Sprintf("NetworkManager's global DNS searches DHCP domain %s, from %s", strings.Join(dhcp, " "), from))
		}
	}
	for _, d := range nm.DHCPDevices() {
		v4, v6 := nmAutoDNS(s, d)
		var servers []netip.Addr
		var doms []string
		if v4 {
			servers, doms = append(servers, d.DHCP4.Servers...), append(doms, d.DHCP4.Domains()...)
		}
		if v6 {
			servers, doms = append(servers, d.DHCP6.Servers...), append(doms, d.DHCP6.Domains()...)
		}
		var loops, dhcp []string
		for _, a := range servers {
			if f.IsLoop(a, false) {
				loops = append(loops, a.String())
			}
		}
		for _, dom := range doms {
			if replaced {
				break // NM writes the global searches instead
			}
			if f.IsDHCPDomain(dom) && !slices.Contains(dhcp, dom) {
				dhcp = append(dhcp, dom)
			}
		}
		if len(loops) > 0 {
			why = append(why, fmt.Sprintf("DHCP hands NetworkManager %s on %s (%s)", strings.Join(loops, " "), nmDevName(d), d.Source))
		}
		if len(dhcp) > 0 {
			why = append(why, fmt.Sprintf("NetworkManager puts DHCP search domain %s from %s (%s) into /etc/resolv.conf", strings.Join(dhcp, " "), nmDevName(d), d.Source))
		}
	}
	return why
}

// NMSearchesReplaceDHCP reports whether NetworkManager writes a global DNS's searches instead of
// DHCP's search domains: from NetworkManager 1.56 a global DNS without a "*" domain does (measured
// on 1.58.1: `[global-dns] searches=corp.example` gives `search corp.example`, an empty searches=
// no DHCP domain at all, while DHCP's servers stay; networkmanager/FACTS.md), where 1.42.4 merges
// them. Without NM's version (not on the bus, or under --root) 1.42's merge is assumed: the DHCP
// domains the devices hand out are then reported.
func NMSearchesReplaceDHCP(nm *node.NetworkManager, g *networkmanager.GlobalDNS) bool {
	if g == nil || g.Overrides() || nm.Live == nil {
		return false
	}
	var major, minor int
	if _, err := fmt.Sscanf(nm.Live.Version, "%d.%d", &major, &minor); err != nil {
		return false
	}
	return major > 1 || major == 1 && minor >= 56
}

// NMOverride is the zz-nodedns.conf nodedns wants: the upstreams as the global "*" servers (on NM
// 1.42-1.52 no per-connection setting keeps DHCP's servers while it drops DHCP's search domains,
// and per-connection DNS is ignored while a global "*" domain has servers: so the override lists
// the current DHCP servers, and the daemon rewrites it when they change), and as searches the
// search domains NM would otherwise write, minus DHCP search domains and cluster search domains
// (docs/contract.md "Cluster search domains on the host"). Options are left to the other files.
func NMOverride(s *node.Snapshot, f Facts) networkmanager.Override {
	nm := &s.NetworkManager
	var base []string
	if nm.Others != nil {
		g := nm.Others.GlobalDNS()
		if g != nil {
			base = append(base, g.Searches...)
		}
		if !g.Overrides() && nm.Connections != nil {
			// Without a "*" domain NM writes each active connection's own dns-search too: keep those
			// of the connections on DHCP devices (the ones nodedns can tell are active).
			for _, d := range nm.DHCPDevices() {
				if c, ok := nm.Connections.ByUUID(d.ConnectionUUID); ok && d.ConnectionUUID != "" {
					base = append(base, c.IPv4.DNSSearch...)
					base = append(base, c.IPv6.DNSSearch...)
				}
			}
		}
	}
	var searches []string
	for _, d := range base {
		d = strings.TrimSuffix(d, ".")
		if d == "" || strings.HasPrefix(d, "~") || f.IsDHCPDomain(d) || f.IsClusterDomain(d) ||
			slices.ContainsFunc(searches, func(x string) bool { return resolvconf.CanonicalDomain(x) == resolvconf.CanonicalDomain(d) }) {
			continue
		}
		searches = append(searches, d)
	}
	// NM 1.42's global DNS takes plain addresses only: a link-local upstream with a zone
	// (fe80::1%eth0) cannot be written there.
	var servers []netip.Addr
	for _, a := range f.Upstreams {
		if a.Zone() == "" {
			servers = append(servers, a)
		}
	}
	return networkmanager.Override{Servers: servers, Searches: searches}
}

// nmReload is the reload that makes a change of NetworkManager's configuration count; it backs up
// NetworkManager-intern.conf first when that holds a global DNS set over D-Bus and the reload makes
// a config file set one (NM then drops the D-Bus one for good).
func nmReload(s *node.Snapshot, expect []netip.Addr, byFile bool, reason string) ReloadNetworkManager {
	a := ReloadNetworkManager{Expect: expect, Reason: reason}
	if c := s.NetworkManager.Config; byFile && c != nil && c.InternGlobalDNS() != nil {
		a.BackUp = []string{networkmanager.InternConfPath}
	}
	return a
}

// networkManager plans NetworkManager's side (docs/contract.md "What nodedns manages",
// NetworkManager): when NM writes /etc/resolv.conf and its own configuration puts a loop address or
// a DHCP search domain there, /etc/NetworkManager/conf.d/zz-nodedns.conf overrides its global DNS,
// and NM is reloaded. nodedns never edits NM's resolv.conf itself (etcResolvConf leaves it).
func (p *Plan) networkManager(s *node.Snapshot) {
	nm := &s.NetworkManager
	if !s.NMOwnsResolvConf() {
		if NMPushesToResolved(s) {
			p.nmOverResolved(s)
		}
		return
	}
	const target = networkmanager.NodeDNSConfPath
	if !p.nmOverridable(nm) {
		return
	}
	cur := nm.Override
	why := NMOverrideReasons(s, p.Facts)
	if len(why) == 0 {
		if cur.Exists && len(nm.DHCPDevices()) == 0 && !nm.Others.GlobalDNS().Overrides() {
			// No device reports DHCP options right now: NetworkManager is (re)starting or a lease is
			// pending (seen with 1.42.4: for a few ms after a restart NM is on the bus with its
			// devices not yet configured). Whether DHCP hands out a search domain cannot be told,
			// so the override stays; removing it would let NM put the domain back for a moment.
			p.nmStale(s)
			return
		}
		if cur.Exists {
			p.Changes = append(p.Changes, Change{Path: target, Target: target, Op: OpRemove, Before: cur.Data,
				Reason: "NetworkManager's own configuration no longer puts a loop address or a DHCP search domain into /etc/resolv.conf"})
			p.Actions = append(p.Actions, nmReload(s, NMStarServers(nm.Others.GlobalDNS()), false, "NetworkManager reads conf.d only on Reload or restart"))
			return
		}
		p.nmStale(s)
		return
	}
	if len(p.Facts.Upstreams) == 0 {
		p.block(target, "%s, but no upstream DNS server is known: an override would leave NetworkManager with no server; set `upstreams` in the config", strings.Join(why, "; "))
		return
	}
	o := NMOverride(s, p.Facts)
	if len(o.Servers) == 0 {
		p.block(target, "%s, but the upstreams (%s) are link-local addresses with a zone, which NetworkManager 1.42's global DNS does not take; set `upstreams` in the config", strings.Join(why, "; "), addrList(p.Facts.Upstreams))
		return
	}
	after, err := networkmanager.RenderOverride(o)
	if err != nil {
		p.block(target, "%v", err)
		return
	}
	var before []byte
	if cur.Exists {
		before = cur.Data
	}
	n := len(p.Changes)
	p.write(target, target, before, after, 0o644, strings.Join(why, "; ")+"; upstreams from "+p.Facts.UpstreamSource)
	if len(p.Changes) > n {
		p.Actions = append(p.Actions, nmReload(s, o.Servers, true, "NetworkManager reads conf.d only on Reload or restart"))
		return
	}
	p.nmStale(s)
}

// nmStale plans a reload when NetworkManager still runs with (or still wrote) a global DNS that its
// files no longer ask for: zz-nodedns.conf written while the reload failed, or NM restarted with an
// older file. Live, NM's GlobalDnsConfiguration over D-Bus tells (a reload action); under --root, a
// loop address in NM's resolv.conf that the files' "*" servers no longer list (a pending step, and
// `check` says so).
func (p *Plan) nmStale(s *node.Snapshot) {
	nm := &s.NetworkManager
	if nm.Config == nil {
		return
	}
	g := nm.Config.GlobalDNS()
	want := NMStarServers(g)
	ours := false
	if g != nil {
		d, ok := g.Domain("*")
		ours = ok && d.ServersFrom.Path == networkmanager.NodeDNSConfPath
	}
	hasLoop := func(as []netip.Addr) []string {
		var out []string
		for _, a := range as {
			if p.Facts.IsLoop(a, false) && !slices.Contains(want, a.Unmap()) {
				out = append(out, a.String())
			}
		}
		return out
	}
	if nm.Live != nil {
		live := NMStarServers(nm.Live.GlobalDNS)
		stale := hasLoop(live)
		if (ours && !slices.Equal(live, want)) || len(stale) > 0 {
			p.Actions = append(p.Actions, nmReload(s, want, ours, fmt.Sprintf("NetworkManager runs with global DNS %s while its configuration says %s: reload it", nmAddrs(live), nmAddrs(want))))
		}
		return
	}
	if !g.Overrides() || s.ResolvConf.File == nil {
		return
	}
	// Without NM's live view (--root, or NM not on the bus) nodedns cannot reload it: the reload is
	// a pending step, as resolved's restart is (pendingResolvedRestart). One rule for both: an
	// action apply cannot carry out is listed as pending, never planned, so that `plan
	// --detailed-exitcode` settles once the files are right (docs/contract.md "Check and plan agree").
	if stale := hasLoop(s.ResolvConf.File.Nameservers()); len(stale) > 0 {
		p.Pending = append(p.Pending, Pending{Target: ReloadNetworkManager{}.Target(), Step: "reload it: `nmcli general reload`", About: []string{PendingDNS, PendingSearch},
			Why: fmt.Sprintf("NetworkManager's /etc/resolv.conf still lists %s, which its configuration no longer does: NetworkManager reads conf.d only on Reload or restart", strings.Join(stale, " "))})
	}
}

// nmAddrs is addrList that says "(none)" for no address.
func nmAddrs(as []netip.Addr) string {
	if len(as) == 0 {
		return "(none)"
	}
	return addrList(as)
}

// NMPushesToResolved reports whether NetworkManager hands its links' DNS servers and domains to
// systemd-resolved over D-Bus (`[main] dns=systemd-resolved`, Ubuntu's setup; or dns= unset while
// /etc/resolv.conf is resolved's stub, which NM 1.42 takes for the same). Live, NM's DnsManager Mode
// says it; under --root, its configuration.
func NMPushesToResolved(s *node.Snapshot) bool {
	nm := &s.NetworkManager
	if nm.Live != nil {
		return nm.Live.DNSMode == "systemd-resolved"
	}
	if nm.Config == nil || len(nm.Devices) == 0 {
		return false
	}
	mode, _ := nm.Config.DNSMode()
	return mode == "systemd-resolved" || (mode == "" && s.ResolvConfManagedByResolved())
}

// NMResolvedDevice returns the NetworkManager device that is resolved's link ifindex when NM
// pushes that link's DNS to resolved. resolved then holds what NM last pushed: a SetLinkDNS or
// SetLinkDomains from nodedns lasts only until NM pushes again (measured on NM 1.42.4 with resolved
// 252: a renewal with an unchanged lease keeps nodedns's value, an NM restart puts DHCP's search
// domain back; networkmanager/FACTS.md "NetworkManager over systemd-resolved").
func NMResolvedDevice(s *node.Snapshot, ifindex int) (node.NMDevice, bool) {
	if !NMPushesToResolved(s) {
		return node.NMDevice{}, false
	}
	for _, d := range s.NetworkManager.Devices {
		if d.IfIndex == ifindex {
			return d, true
		}
	}
	return node.NMDevice{}, false
}

// nmResolvedLinkNote is the note for a resolved link NetworkManager pushes, carrying loop servers or
// DHCP search domains nodedns does not set away in resolved (NM would write them back). Over
// resolved no conf.d file drops only DHCP's search domains, on NM 1.58.1 either: a `[global-dns]
// searches=` without a "*" domain, which there replaces them in the resolv.conf NM writes, changes
// nothing NM pushes to resolved (networkmanager/FACTS.md "NetworkManager over systemd-resolved").
func nmResolvedLinkNote(link string, d node.NMDevice, bad []string) string {
	return fmt.Sprintf("link %s gets its DNS from NetworkManager (dns=systemd-resolved; %s): %s would come back at NetworkManager's next push (its restart or a changed lease), so nodedns does not change the link in resolved; NetworkManager (1.42.4 to 1.58.1 measured) has no conf.d setting that drops the DHCP search domains it pushes to resolved while it keeps DHCP's servers (a global DNS without a \"*\" domain does not reach resolved): `nmcli connection modify CONNECTION ipv4.ignore-auto-dns yes ipv4.dns UPSTREAMS` drops both",
		link, d.Source, strings.Join(bad, " "))
}

// nmOverridable blocks zz-nodedns.conf, and says so, while NetworkManager refuses its own
// configuration (a reload would keep the old one, a restart would not come up) or the override
// cannot be read (nodedns does not write over what it cannot see).
func (p *Plan) nmOverridable(nm *node.NetworkManager) bool {
	const target = networkmanager.NodeDNSConfPath
	if nm.Others == nil {
		p.block(target, "NetworkManager refuses its configuration (%v): a reload would keep the old configuration and a restart would not come up (NetworkManager 1.42); fix that file first", nm.OthersErr)
		return false
	}
	if err := nm.Override.Err; err != nil {
		p.block(target, "cannot read it (%v): nodedns does not write over what it cannot see", err)
		return false
	}
	return true
}

// nmOverResolved plans NetworkManager's side when it hands DNS to systemd-resolved
// (dns=systemd-resolved): NM is the source of the links' DNS, resolved serves it. A global "*"
// domain (kubespray's dns.conf) that lists a loop address is NM's configuration to fix; NM 1.42
// then hands resolved no server at all (networkmanager/FACTS.md "NetworkManager over
// systemd-resolved"), so zz-nodedns.conf drops the domain (RenderResolvedOverride) and NM hands
// resolved each link's DHCP servers again. Links NM pushes are never set in resolved (resolved()).
func (p *Plan) nmOverResolved(s *node.Snapshot) {
	nm := &s.NetworkManager
	const target = networkmanager.NodeDNSConfPath
	if !p.nmOverridable(nm) {
		return
	}
	cur := nm.Override
	g := nm.Others.GlobalDNS()
	var loops []string
	if g.Overrides() {
		for _, a := range NMStarServers(g) {
			if p.Facts.IsLoop(a, false) {
				loops = append(loops, a.String())
			}
		}
	}
	if len(loops) == 0 {
		if cur.Exists {
			p.Changes = append(p.Changes, Change{Path: target, Target: target, Op: OpRemove, Before: cur.Data,
				Reason: "NetworkManager's own global DNS no longer lists a loop address"})
			p.Actions = append(p.Actions, nmReload(s, NMStarServers(g), false, "NetworkManager reads conf.d only on Reload or restart"))
		}
		return
	}
	var before []byte
	if cur.Exists {
		before = cur.Data
	}
	n := len(p.Changes)
	p.write(target, target, before, networkmanager.RenderResolvedOverride(), 0o644,
		fmt.Sprintf("NetworkManager's global DNS lists %s, from %s; NetworkManager hands DNS to systemd-resolved (dns=systemd-resolved) and, while that \"*\" domain is set, hands it no server at all (NetworkManager 1.42 to 1.58): drop the domain so NetworkManager hands resolved each link's own servers",
			strings.Join(loops, " "), node.NMGlobalDNSSource(g)))
	if len(p.Changes) > n {
		p.Actions = append(p.Actions, nmReload(s, nil, true, "NetworkManager reads conf.d only on Reload or restart"))
		return
	}
	if nm.Live != nil {
		if live := NMStarServers(nm.Live.GlobalDNS); len(live) > 0 {
			p.Actions = append(p.Actions, nmReload(s, nil, true, fmt.Sprintf("NetworkManager runs with global DNS %s while its configuration has none: reload it", nmAddrs(live))))
		}
	}
}
