package policy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/leases"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/netplan"
)

// NetworkdDropInHeader starts nodedns's .network drop-in.
const NetworkdDropInHeader = "Managed by nodedns: systemd-networkd must not take search domains from DHCP (they reach every pod's search list)."

// NetplanMode is the effective netplan.mode (docs/contract.md): the config's, else pin when nodedns's own
// file already pins an interface (a pin made by `nodedns netplan pin` must survive the next apply),
// else override when netplan or networkd have DHCP interfaces, else off.
func NetplanMode(cfg config.Config, s *node.Snapshot) string {
	if cfg.Netplan.Mode != "" {
		return cfg.Netplan.Mode
	}
	if s.Netplan == nil && netplanOthers(s) == nil && len(s.ProblemsFrom(node.SourceNetplan)) > 0 {
		// A netplan tree that cannot be read may well have DHCP interfaces: the netplan change is
		// blocked until it is fixed rather than silently off.
		return config.NetplanOverride
	}
	if len(ownPins(s)) > 0 {
		return config.NetplanPin
	}
	if others := netplanOthers(s); others != nil && len(others.DHCPInterfaces()) > 0 {
		return config.NetplanOverride
	}
	if len(s.Networkd) > 0 {
		return config.NetplanOverride
	}
	return config.NetplanOff
}

// netplanOthers is the node's netplan configuration without nodedns's file; Netplan when the
// snapshot was built without it (tests, older callers).
func netplanOthers(s *node.Snapshot) *netplan.Config {
	if s.NetplanOthers != nil {
		return s.NetplanOthers
	}
	if !s.NetplanOwn.Exists {
		return s.Netplan
	}
	return nil
}

// ownPins are the pins in nodedns's current file.
func ownPins(s *node.Snapshot) []netplan.Pin {
	if !s.NetplanOwn.Exists || s.NetplanOwn.Data == nil {
		return nil
	}
	own, err := netplan.Parse([]netplan.Doc{{Path: netplan.NodednsFile, Data: s.NetplanOwn.Data}})
	if err != nil {
		return nil
	}
	return netplan.Pins(own)
}

// netplan plans /etc/netplan/90-nodedns.yaml and, on nodes that run networkd without netplan, the
// .network drop-ins.
func (p *Plan) netplan(s *node.Snapshot, cfg config.Config) {
	mode := NetplanMode(cfg, s)
	if mode == config.NetplanOff {
		if s.NetplanOwn.Exists {
			p.Notes = append(p.Notes, fmt.Sprintf("netplan.mode is off: %s is left as it is (`nodedns restore` removes it)", netplan.NodednsFile))
		}
		return
	}
	p.networkdDropIns(s, cfg, mode)

	others := netplanOthers(s)
	if others == nil {
		if s.Netplan == nil {
			// An existing netplan tree that netplan rejects blocks only the netplan change (invariant 5).
			p.block(netplan.NodednsFile, "netplan's files cannot be read (%s): the netplan change waits until they are fixed", netplanProblem(s))
		}
		return
	}
	if len(others.Files) == 0 && !s.NetplanOwn.Exists {
		if mode == config.NetplanPin && len(s.Networkd) > 0 {
			p.block(netplan.NodednsFile, "netplan.mode is pin but this node has no netplan configuration (systemd-networkd only): pinning needs netplan; DHCP search domains are switched off with networkd drop-ins instead")
		}
		return
	}

	var d netplan.DropIn
	var reasons []string
	pinned := map[string]bool{}
	if mode == config.NetplanPin {
		pins, why, err := p.pins(s, others)
		if err != nil {
			p.block(netplan.NodednsFile+" (pin)", "%v", err)
		}
		for _, pin := range pins {
			d.Pins = append(d.Pins, pin)
			pinned[pin.ID] = true
		}
		reasons = append(reasons, why...)
	}
	for _, i := range others.DHCPInterfaces() {
		if pinned[i.ID] {
			continue
		}
		o, why, ok := p.netplanOverride(s, i)
		reasons = append(reasons, why...)
		if ok {
			d.Overrides = append(d.Overrides, o)
		}
	}
	p.writeNetplan(s, cfg, mode, d, reasons, others)
}

// netplanOverride is the override of one netplan DHCP interface that is not pinned: DHCP search
// domains off, and, when DHCP hands out a loop address, use-dns off with the upstreams listed
// instead, with the reasons. ok is false when the interface needs none (or NetworkManager renders
// it: then the note says what to do).
func (p *Plan) netplanOverride(s *node.Snapshot, i *netplan.Interface) (o netplan.Override, reasons []string, ok bool) {
	if i.Renderer == netplan.RendererNetworkManager {
		p.Notes = append(p.Notes, fmt.Sprintf("NetworkManager renders netplan interface %s (%s): netplan's dhcp overrides do nothing there; run `nmcli connection modify <connection of %s> ipv4.ignore-auto-dns yes ipv6.ignore-auto-dns yes ipv4.dns %q`",
			i.ID, strings.Join(i.Files, ", "), i.ID, addrList(p.Facts.Upstreams)))
		return o, nil, false
	}
	o = netplan.Override{ID: i.ID, Type: i.Type}
	if i.DHCP4 && !DropsDomains(i.DHCP4Overrides) {
		o.DHCP4 = true
	}
	if i.DHCP6 && !DropsDomains(i.DHCP6Overrides) {
		o.DHCP6 = true
	}
	loops := p.dhcpLoopServers(s, i)
	if len(loops) > 0 && !(overrideOff(i.DHCP4Overrides, "use-dns") && (!i.DHCP6 || overrideOff(i.DHCP6Overrides, "use-dns"))) {
		if len(p.Facts.Upstreams) == 0 {
			p.block(netplan.NodednsFile+" ("+i.ID+" use-dns)", "DHCP on %s hands out %s and no upstream is known to list instead: use-dns is left on; set `upstreams` in the config", i.ID, strings.Join(loops, " "))
		} else {
			o.Nameservers = p.Facts.Upstreams
			reasons = append(reasons, fmt.Sprintf("DHCP on %s hands out %s: use-dns off, nameservers %s", i.ID, strings.Join(loops, " "), addrList(p.Facts.Upstreams)))
		}
	}
	// networkd has one [DHCP] section: when both families are on, both overrides get the same
	// keys (netplan 0.106 refuses them otherwise).
	if i.DHCP4 && i.DHCP6 && (o.DHCP4 || o.DHCP6 || len(o.Nameservers) > 0) {
		o.DHCP4, o.DHCP6 = true, true
	}
	if len(o.Nameservers) > 0 {
		o.DHCP4, o.DHCP6 = i.DHCP4, i.DHCP6
	}
	if !o.DHCP4 && !o.DHCP6 {
		return o, reasons, false
	}
	return o, append(reasons, fmt.Sprintf("%s takes search domains from DHCP", i.ID)), true
}

// writeNetplan plans nodedns's netplan file with d: written (with its reasons) when it has
// something in it, removed when it has nothing and exists.
func (p *Plan) writeNetplan(s *node.Snapshot, cfg config.Config, mode string, d netplan.DropIn, reasons []string, others *netplan.Config) {
	cur := s.NetplanOwn
	if d.Empty() {
		if cur.Exists {
			p.Changes = append(p.Changes, Change{Path: netplan.NodednsFile, Target: netplan.NodednsFile, Op: OpRemove, Before: cur.Data,
				Reason: "no netplan DHCP interface needs an override any more"})
			p.netplanApplied(cfg, netplan.NodednsFile)
		}
		return
	}
	d.Comments = []string{"netplan.mode: " + mode + "; validated with `netplan generate` before it was written."}
	after, err := d.Render()
	if err != nil {
		p.block(netplan.NodednsFile, "%v", err)
		return
	}
	var before []byte
	if cur.Exists {
		before = cur.Data
	}
	n := len(p.Changes)
	p.write(netplan.NodednsFile, netplan.NodednsFile, before, after, netplan.FileMode, "netplan ("+mode+"): "+strings.Join(reasons, "; "))
	if len(p.Changes) > n {
		p.netplanApplied(cfg, netplan.NodednsFile)
		if pt := passThrough(others); pt != "" {
			p.Notes = append(p.Notes, "netplan constructs nodedns does not touch (they pass through as they are): "+pt)
		}
	}
}

// passThrough names the netplan definitions other than plain ethernets (bonds, bridges, VLANs, wifis,
// tunnels, ...): nodedns's file adds overrides beside them and changes none of them, and an operator
// reading the plan should see that they were considered, not missed.
func passThrough(c *netplan.Config) string {
	byType := map[string][]string{}
	var types []string
	for _, i := range c.Interfaces {
		if i.Type == "ethernets" {
			continue
		}
		if _, ok := byType[i.Type]; !ok {
			types = append(types, i.Type)
		}
		byType[i.Type] = append(byType[i.Type], i.ID)
	}
	var parts []string
	for _, t := range types {
		parts = append(parts, t+" "+strings.Join(byType[t], ", "))
	}
	return strings.Join(parts, "; ")
}

// netplanApplied adds the action that makes a netplan change live, or says that none will run.
func (p *Plan) netplanApplied(cfg config.Config, path string) {
	if cfg.Netplan.Apply {
		p.Actions = append(p.Actions, NetplanApply{File: path, Reason: "netplan.apply is true: `netplan apply` makes the change live"})
		return
	}
	p.Notes = append(p.Notes, fmt.Sprintf("%s changes but `netplan apply` is not run (netplan.apply is false): it takes effect at the next `netplan apply` or boot", path))
}

func netplanProblem(s *node.Snapshot) string {
	if ps := s.ProblemsFrom(node.SourceNetplan); len(ps) > 0 {
		return ps[0].String()
	}
	return "unknown error"
}

// DropsDomains reports whether DHCP overrides keep DHCP search domains out of the search list:
// use-domains false, or route (routing-only domains, which resolved never searches).
func DropsDomains(o map[string]any) bool {
	v, ok := o["use-domains"]
	if !ok {
		return false
	}
	switch t := v.(type) {
	case bool:
		return !t
	case string:
		if b, ok := netplan.Bool(t); ok {
			return !b
		}
		return t == "route"
	}
	return false
}

func overrideOff(o map[string]any, key string) bool {
	b, ok := o[key].(bool)
	return ok && !b
}

// leaseFor returns the leases of the interfaces a definition configures.
func leasesFor(s *node.Snapshot, i *netplan.Interface) []leases.Lease {
	var out []leases.Lease
	for _, l := range s.Leases {
		if l.Interface != "" && i.Matches(l.Interface) {
			out = append(out, l)
		}
	}
	return out
}

// dhcpLoopServers lists the loop addresses the definition's current leases hand out as DNS servers.
func (p *Plan) dhcpLoopServers(s *node.Snapshot, i *netplan.Interface) []string {
	var out []string
	for _, l := range leasesFor(s, i) {
		if !l.Current(s.Now) {
			continue
		}
		for _, a := range l.DNS {
			if p.Facts.IsLoop(a, false) && !slices.Contains(out, a.String()) {
				out = append(out, a.String())
			}
		}
	}
	return out
}

// pins computes the pin of the default-route interface. A pin already in nodedns's file is kept as
// it is: once DHCP is off the lease is gone, and the address must not move.
func (p *Plan) pins(s *node.Snapshot, others *netplan.Config) ([]netplan.Pin, []string, error) {
	var kept []netplan.Pin
	for _, pin := range ownPins(s) {
		def := others.Interface(pin.ID)
		if def == nil || !def.DHCP4 {
			continue // the node's own files no longer use DHCP there: nothing to pin
		}
		pin.Type, pin.DHCP6 = def.Type, def.DHCP6
		kept = append(kept, pin)
	}
	if len(kept) > 0 {
		return kept, []string{"keeps the pin of " + pinIDs(kept)}, nil
	}
	anyDHCP4 := false
	for _, i := range others.DHCPInterfaces() {
		anyDHCP4 = anyDHCP4 || (i.DHCP4 && i.Renderer == netplan.RendererNetworkd)
	}
	if !anyDHCP4 {
		return nil, nil, nil // statically addressed already: nothing to pin
	}
	pin, err := p.PinFor(s, others)
	if err != nil {
		return nil, nil, err
	}
	if pin == nil {
		return nil, nil, nil
	}
	return []netplan.Pin{*pin}, []string{fmt.Sprintf("pins %s to %s via %s (from its DHCP lease)", pin.ID, pin.Address, pin.Gateway)}, nil
}

func pinIDs(ps []netplan.Pin) string {
	var ids []string
	for _, p := range ps {
		ids = append(ids, p.ID)
	}
	return strings.Join(ids, ", ")
}

// rootLeasesOnly says why a lease can be missing under --root (docs/contract.md "DHCP search domains").
const rootLeasesOnly = "under --root nodedns reads lease files only; systemd-networkd 262 keeps its lease in no file but on its varlink interface, io.systemd.Network, which only the live node answers: run `nodedns netplan pin` on the node itself"

// PinFor computes the pin of the node's default-route interface from its current DHCP lease (and,
// on the live node, the addresses netlink shows). It returns nil without error when that interface
// is not addressed by DHCP, and an error saying why when a pin would not be safe: no or an expired
// lease, no router (no default route), the interface in a bond or bridge, the lease disagreeing with
// the live link, no nameserver left.
func (p *Plan) PinFor(s *node.Snapshot, others *netplan.Config) (*netplan.Pin, error) {
	ifname, err := uplinkName(s, others)
	if err != nil {
		return nil, err
	}
	var def *netplan.Interface
	for _, i := range others.Interfaces {
		if i.Matches(ifname) && (def == nil || (i.DHCP4 && !def.DHCP4)) {
			def = i
		}
	}
	if def == nil {
		return nil, fmt.Errorf("no netplan definition configures the default-route interface %s (by name): cannot pin it", ifname)
	}
	if m := others.MemberOf(def.ID); m != "" {
		return nil, fmt.Errorf("the default-route interface %s is part of %s: refusing to pin a member; pin %s itself", ifname, m, m)
	}
	if !def.DHCP4 {
		return nil, nil
	}
	if def.Renderer == netplan.RendererNetworkManager {
		return nil, fmt.Errorf("NetworkManager renders %s: pin it with nmcli (ipv4.method manual), not netplan", def.ID)
	}
	var lease *leases.Lease
	var expired *leases.Lease
	for i := range s.Leases {
		l := &s.Leases[i]
		if l.Interface != ifname || l.V6 || !l.Address.IsValid() || !l.Address.Addr().Is4() {
			continue
		}
		if !l.Current(s.Now) {
			expired = l
			continue
		}
		lease = l
	}
	if lease == nil {
		if expired != nil {
			return nil, fmt.Errorf("the DHCP lease of %s (%s) expired at %s: renew it before pinning", ifname, expired.Path, expired.Expire.Format("2006-01-02 15:04:05 MST"))
		}
		if !s.LiveLeases {
			return nil, fmt.Errorf("no DHCP lease file found for %s: nothing to pin (%s)", ifname, rootLeasesOnly)
		}
		return nil, fmt.Errorf("no DHCP lease found for %s: nothing to pin", ifname)
	}
	if len(lease.Routers) == 0 {
		return nil, fmt.Errorf("the DHCP lease of %s (%s) has no router: the pinned configuration would have no default route", ifname, lease.Path)
	}
	gw := lease.Routers[0]
	if u := s.Uplink; u != nil {
		if u.Gateway.IsValid() && u.Gateway != gw {
			return nil, fmt.Errorf("the default route of %s goes via %s but its lease (%s) says %s: refusing to pin a stale lease", ifname, u.Gateway, lease.Path, gw)
		}
		if len(u.Addrs) > 0 && !slices.Contains(u.Addrs, lease.Address) {
			return nil, fmt.Errorf("%s does not carry the leased address %s (it has %s): refusing to pin a stale lease", ifname, lease.Address, prefixList(u.Addrs))
		}
	}
	var ns []netip.Addr
	for _, a := range lease.DNS {
		if !p.Facts.IsLoop(a, true) && !slices.Contains(ns, a) {
			ns = append(ns, a)
		}
	}
	if len(ns) == 0 {
		ns = p.Facts.Upstreams
	}
	if len(ns) == 0 {
		return nil, fmt.Errorf("the DHCP lease of %s lists no usable DNS server and no upstream is known: a pinned %s would have no nameserver; set `upstreams` in the config", ifname, ifname)
	}
	if len(ns) > 3 {
		ns = ns[:3]
	}
	pin := &netplan.Pin{ID: def.ID, Type: def.Type, Address: lease.Address, Gateway: gw, Nameservers: ns, DHCP6: def.DHCP6}
	if def.DHCP6 && len(p.dhcpLoopServers(s, def)) > 0 {
		pin.NoDNS6 = true
	}
	return pin, nil
}

// uplinkName is the default-route interface: netlink's on the live node; under --root the one
// interface whose current lease has a router (with several, the lowest netplan route-metric).
func uplinkName(s *node.Snapshot, others *netplan.Config) (string, error) {
	if s.Uplink != nil && s.Uplink.IfName != "" {
		return s.Uplink.IfName, nil
	}
	var names []string
	for _, l := range s.Leases {
		if l.Interface != "" && !l.V6 && len(l.Routers) > 0 && l.Current(s.Now) && !slices.Contains(names, l.Interface) {
			names = append(names, l.Interface)
		}
	}
	switch len(names) {
	case 0:
		for _, l := range s.Leases {
			if !l.V6 && len(l.Routers) > 0 && l.Interface != "" {
				return l.Interface, nil // its lease expired: PinFor says so
			}
		}
		if !s.LiveLeases {
			return "", fmt.Errorf("no interface has a current DHCP lease with a router: no default route to pin (%s)", rootLeasesOnly)
		}
		return "", fmt.Errorf("no interface has a current DHCP lease with a router: no default route to pin")
	case 1:
		return names[0], nil
	}
	best, bestMetric, tie := "", 1<<31, false
	for _, n := range names {
		m := 100 // networkd's default DHCP RouteMetric (netplan 0.106 writes it)
		for _, i := range others.Interfaces {
			if i.Matches(n) && i.DHCP4 {
				if v, ok := i.DHCP4Overrides["route-metric"].(int); ok {
					m = v
				}
				if v, ok := i.DHCP4Overrides["use-routes"].(bool); ok && !v {
					m = 1 << 30
				}
			}
		}
		switch {
		case m < bestMetric:
			best, bestMetric, tie = n, m, false
		case m == bestMetric:
			tie = true
		}
	}
	if tie {
		return "", fmt.Errorf("several interfaces have a DHCP default route (%s) with the same metric: run pin on the live node, where the routing table decides", strings.Join(names, ", "))
	}
	return best, nil
}

func addrList(as []netip.Addr) string {
	var out []string
	for _, a := range as {
		out = append(out, a.String())
	}
	return strings.Join(out, " ")
}

func prefixList(ps []netip.Prefix) string {
	var out []string
	for _, a := range ps {
		out = append(out, a.String())
	}
	return strings.Join(out, " ")
}

// networkdDropIns writes [DHCPv4]/[DHCPv6] UseDomains=no drop-ins for networkd's own DHCP networks
// (nodes with networkd but no netplan; netplan's generated files are changed through netplan).
func (p *Plan) networkdDropIns(s *node.Snapshot, cfg config.Config, mode string) {
	changed := false
	for _, n := range s.Networkd {
		path := node.NetworkdDropIn(n.Path)
		after := NetworkdDropIn(n)
		var before []byte
		if n.DropIn.Exists {
			before = n.DropIn.Data
		}
		k := len(p.Changes)
		p.write(path, path, before, after, 0o644, fmt.Sprintf("networkd (%s): %s takes search domains from DHCP", mode, n.Path))
		changed = changed || len(p.Changes) > k
	}
	if !changed {
		return
	}
	if cfg.Netplan.Apply {
		p.Actions = append(p.Actions, NetworkctlReload{Reason: "netplan.apply is true: `networkctl reload` makes the drop-ins live"})
	} else {
		p.Notes = append(p.Notes, "networkd drop-ins change but `networkctl reload` is not run (netplan.apply is false): they take effect at the next reload or boot")
	}
}

// NetworkdDropIn renders nodedns's drop-in for a .network file. UseDomains= exists in both [DHCPv4]
// and [DHCPv6] in systemd 252; both are written so a later DHCP= change stays covered.
func NetworkdDropIn(n node.NetworkdNetwork) []byte {
	return []byte("# " + NetworkdDropInHeader + "\n# Drop-in for " + n.Path + "; `nodedns restore` removes it.\n[DHCPv4]\nUseDomains=no\n\n[DHCPv6]\nUseDomains=no\n")
}
