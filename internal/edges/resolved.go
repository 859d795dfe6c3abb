package edges

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"path"
	"slices"
	"strings"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/policy"
	"github.com/nodedns/nodedns/internal/statefile"
	"github.com/nodedns/nodedns/internal/store"
	"github.com/nodedns/nodedns/resolvconf"
	"github.com/nodedns/nodedns/systemd"
	"github.com/nodedns/nodedns/systemd/bus"
)

// LinkRecordPath is the node path where the per-link settings nodedns changed over D-Bus are
// recorded with their original values, so `nodedns restore` can put them back (docs/contract.md invariant
// 4). It is written through store.Store, so restore removes it after the links are reverted.
const LinkRecordPath = config.LinkRecordFile

// ResolvedBus is what the resolved integration needs from systemd-resolved: its live view, one
// link's settings, and the two per-link setters. *bus.Resolved implements it over D-Bus; tests give
// a fake, so the integration's decisions (what it sets, what it records, what it refuses) are
// tested without privileges.
type ResolvedBus interface {
	State(ctx context.Context) (systemd.ResolvedState, error)
	Link(ctx context.Context, ifindex int) (systemd.LinkInfo, error)
	SetLinkDNS(ctx context.Context, ifindex int, servers []systemd.DNSServer) error
	SetLinkDomains(ctx context.Context, ifindex int, domains []systemd.Domain) error
}

// Resolved is the live systemd-resolved integration: a Source (resolved's live view into the
// snapshot), an Actor (RestartResolved, SetLinkDNS, SetLinkDomains), a Reverter (puts the per-link
// settings back and restarts resolved after its drop-in is restored) and an EventSource. All share
// one lazily dialled bus.Resolved client: one D-Bus connection per run.
type Resolved struct {
	// Options configure the D-Bus client.
	Options bus.ResolvedOptions
	// RestartCommand is config resolved.restartCommand: when set it replaces the restart over
	// systemd's D-Bus API.
	RestartCommand []string
	// Store holds the link record: the run's node store (edges.New; tests use a directory).
	Store *store.Store
	Log   *slog.Logger

	// Bus, when set, replaces the D-Bus client (tests).
	Bus ResolvedBus
	// Restart, when set, replaces bus.Restarter (tests).
	Restart func(ctx context.Context) error
	// IfIndex and IfName map link names (nil: the host's interfaces through net.Interface*).
	IfIndex func(name string) (int, error)
	IfName  func(index int) string

	// conn is the shared client; its notices are the daemon's view of the client's events
	// (resolved_events.go).
	conn lazyBus[*bus.Resolved]
}

// Client returns the shared D-Bus client, connecting on first use.
func (r *Resolved) Client(ctx context.Context) (*bus.Resolved, error) {
	return r.conn.get(ctx,
		func(ctx context.Context) (*bus.Resolved, error) { return bus.DialResolved(ctx, r.Options) },
		func(c *bus.Resolved, out chan<- string) { r.forward(c.Events(), out) })
}

// api is the bus the integration talks to: the test seam, else the shared client.
func (r *Resolved) api(ctx context.Context) (ResolvedBus, error) {
	if r.Bus != nil {
		return r.Bus, nil
	}
	return r.Client(ctx)
}

// Close closes the client if one was made.
func (r *Resolved) Close() error { return r.conn.close() }

func (r *Resolved) log() *slog.Logger {
	if r.Log != nil {
		return r.Log
	}
	return slog.New(slog.DiscardHandler)
}

func (r *Resolved) ifName(i int) string {
	if r.IfName != nil {
		return r.IfName(i)
	}
	if ifi, err := net.InterfaceByIndex(i); err == nil {
		return ifi.Name
	}
	return ""
}

// linkIndex is the ifindex of an action's link: the one policy took from the snapshot, else the
// named interface's.
func (r *Resolved) linkIndex(l policy.Link) (int, error) {
	if l.Index > 0 {
		return l.Index, nil
	}
	if r.IfIndex != nil {
		return r.IfIndex(l.Name)
	}
	ifi, err := net.InterfaceByName(l.Name)
	if err != nil {
		return 0, fmt.Errorf("link %s: %w", l.Name, err)
	}
	return ifi.Index, nil
}

// Name implements Source.
func (r *Resolved) Name() string { return "systemd-resolved over D-Bus" }

// Observe implements Source: on a node where resolved is in use it asks resolved for its live view,
// keeps it in s.ResolvedLive and folds the per-link DNS and domains into s.Links (resolved's
// answer wins over its runtime files; links resolved no longer has are dropped). Where resolved is
// not in use it asks nothing, so a node without a system bus is not a problem.
func (r *Resolved) Observe(ctx context.Context, s *node.Snapshot) error {
	if !s.ResolvedInUse() {
		return nil
	}
	c, err := r.api(ctx)
	if err != nil {
		return err
	}
	st, err := c.State(ctx)
	if err != nil {
		return err
	}
	s.ResolvedLive = &st
	MergeLiveLinks(s, st, r.ifName)
	var global []string
	for _, sv := range st.DNS {
		global = append(global, sv.String())
	}
	r.log().Debug("resolved live view", "global_dns", strings.Join(global, " "), "links", len(st.Links), "resolv_conf_mode", st.ResolvConfMode)
	return nil
}

// MergeLiveLinks folds resolved's live per-link DNS and domains into s.Links: a link resolved
// reports replaces the file-read DNS and Domains (networkd management and the files stay as read),
// a link only resolved knows is added when it has DNS or domains, and a file-read link resolved
// does not have is dropped (its runtime file is stale).
func MergeLiveLinks(s *node.Snapshot, st systemd.ResolvedState, ifName func(int) string) {
	var out []systemd.LinkState
	for _, li := range st.Links {
		var addrs []netip.Addr
		for _, sv := range li.DNS {
			addrs = append(addrs, sv.Addr)
		}
		i := slices.IndexFunc(s.Links, func(l systemd.LinkState) bool { return l.IfIndex == li.IfIndex })
		if i < 0 && len(addrs) == 0 && len(li.Domains) == 0 {
			continue
		}
		var ls systemd.LinkState
		if i >= 0 {
			ls = s.Links[i]
		} else {
			ls = systemd.LinkState{IfIndex: li.IfIndex, IfName: ifName(li.IfIndex)}
			ls.Source = fmt.Sprintf("systemd-resolved link %d (D-Bus)", li.IfIndex)
		}
		ls.DNS, ls.Domains = addrs, slices.Clone(li.Domains)
		out = append(out, ls)
	}
	s.Links = out
}

// Handles implements Actor.
func (r *Resolved) Handles(a policy.Action) bool {
	switch a.(type) {
	case policy.RestartResolved, policy.SetLinkDNS, policy.SetLinkDomains:
		return true
	}
	return false
}

// Do implements Actor.
func (r *Resolved) Do(ctx context.Context, a policy.Action) error {
	switch a := a.(type) {
	case policy.RestartResolved:
		return r.restart(ctx)
	case policy.SetLinkDNS:
		return r.setLinkDNS(ctx, a)
	case policy.SetLinkDomains:
		return r.setLinkDomains(ctx, a)
	}
	return fmt.Errorf("%s: not a systemd-resolved action", a.Kind())
}

func (r *Resolved) restart(ctx context.Context) error {
	if r.Restart != nil {
		return r.Restart(ctx)
	}
	c, err := r.Client(ctx)
	if err != nil {
		return err
	}
	rs := &bus.Restarter{Command: r.RestartCommand, Client: c}
	if err := rs.Restart(ctx); err != nil {
		return err
	}
	r.log().Info("restarted systemd-resolved", "how", restartHow(r.RestartCommand))
	return nil
}

func restartHow(cmd []string) string {
	if len(cmd) > 0 {
		return "resolved.restartCommand"
	}
	return "systemd D-Bus RestartUnit"
}

func busyError(op, link string, err error) error {
	if errors.Is(err, bus.ErrLinkBusy) {
		return fmt.Errorf("%s on %s: systemd-networkd manages this link, so systemd-resolved refuses (LinkBusy): switch it off in netplan (dhcp4-overrides/dhcp6-overrides use-dns/use-domains: false, netplan.mode: override) or in a networkd .network drop-in (UseDNS=no, UseDomains=no), then `networkctl reload` (%w)", op, link, err)
	}
	return fmt.Errorf("%s on %s: %w", op, link, err)
}

// currentLink finds a link and reads its current settings from resolved, for a setter that changes
// only what it must and records the original first.
func (r *Resolved) currentLink(ctx context.Context, l policy.Link, op string) (int, ResolvedBus, systemd.LinkInfo, error) {
	idx, err := r.linkIndex(l)
	if err != nil {
		return 0, nil, systemd.LinkInfo{}, err
	}
	c, err := r.api(ctx)
	if err != nil {
		return 0, nil, systemd.LinkInfo{}, err
	}
	li, err := c.Link(ctx, idx)
	if err != nil {
		return 0, nil, systemd.LinkInfo{}, busyError(op, l.String(), err)
	}
	return idx, c, li, nil
}

func (r *Resolved) setLinkDNS(ctx context.Context, a policy.SetLinkDNS) error {
	bad := map[netip.Addr]bool{}
	for _, d := range a.Drop {
		bad[d.WithZone("").Unmap()] = true
	}
	if len(bad) == 0 {
		return fmt.Errorf("set DNS on %s: the action names nothing to drop", a.Link)
	}
	idx, c, li, err := r.currentLink(ctx, a.Link, "read DNS")
	if err != nil {
		return err
	}
	var keep []systemd.DNSServer
	for _, sv := range li.DNS {
		if !bad[sv.Addr.WithZone("").Unmap()] {
			keep = append(keep, sv)
		}
	}
	if len(keep) == len(li.DNS) {
		return nil // already gone (another writer or a previous pass)
	}
	added, err := r.record(idx, a.Link.String(), &li.DNS, nil)
	if err != nil {
		return err
	}
	if err := c.SetLinkDNS(ctx, idx, keep); err != nil {
		if added {
			r.unrecord(idx, true)
		}
		return busyError("set DNS", a.Link.String(), err)
	}
	return nil
}

func (r *Resolved) setLinkDomains(ctx context.Context, a policy.SetLinkDomains) error {
	bad := map[string]bool{}
	for _, d := range a.Drop {
		bad[resolvconf.CanonicalDomain(d)] = true
	}
	if len(bad) == 0 {
		return fmt.Errorf("set domains on %s: the action names nothing to drop", a.Link)
	}
	idx, c, li, err := r.currentLink(ctx, a.Link, "read domains")
	if err != nil {
		return err
	}
	var keep []systemd.Domain
	for _, d := range li.Domains {
		// Routing-only domains (~example.org) never reach a search list: they stay.
		if d.RoutingOnly || !bad[resolvconf.CanonicalDomain(d.Name)] {
			keep = append(keep, d)
		}
	}
	if len(keep) == len(li.Domains) {
		return nil
	}
	added, err := r.record(idx, a.Link.String(), nil, &li.Domains)
	if err != nil {
		return err
	}
	if err := c.SetLinkDomains(ctx, idx, keep); err != nil {
		if added {
			r.unrecord(idx, false)
		}
		return busyError("set domains", a.Link.String(), err)
	}
	return nil
}

// LinkRecord is what nodedns changed on one link over D-Bus, with the values before its first
// change. DNS and Domains are nil when nodedns never changed them.
type LinkRecord struct {
	IfIndex int            `json:"ifindex"`
	IfName  string         `json:"ifname,omitempty"`
	DNS     *[]RecordedDNS `json:"dns,omitempty"`
	Domains *[]RecordedDom `json:"domains,omitempty"`
}

// RecordedDNS is one recorded server.
type RecordedDNS struct {
	Addr string `json:"addr"`
	Port uint16 `json:"port,omitempty"`
	Name string `json:"name,omitempty"`
}

// RecordedDom is one recorded domain.
type RecordedDom struct {
	Name        string `json:"name"`
	RoutingOnly bool   `json:"routingOnly,omitempty"`
}

type linkRecordFile struct {
	Comment string       `json:"comment"`
	Links   []LinkRecord `json:"links"`
}

const recordComment = "Managed by nodedns: per-link systemd-resolved settings it changed over D-Bus, with their original values; `nodedns restore` puts them back."

// ParseLinkRecords decodes the link record file (strictly: statefile.Decode); name is used in errors
// only.
func ParseLinkRecords(name string, data []byte) ([]LinkRecord, error) {
	var f linkRecordFile
	if err := statefile.Decode(data, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	for i, l := range f.Links {
		if l.IfIndex <= 0 {
			return nil, fmt.Errorf("%s: link %d: bad ifindex %d", name, i, l.IfIndex)
		}
		if l.DNS != nil {
			for _, d := range *l.DNS {
				if _, err := netip.ParseAddr(d.Addr); err != nil {
					return nil, fmt.Errorf("%s: link %d: %w", name, l.IfIndex, err)
				}
			}
		}
	}
	return f.Links, nil
}

func (r *Resolved) loadRecords(st *store.Store) ([]LinkRecord, error) {
	// Trusted state only: restore sets what this file says on every link.
	data, err := st.ReadState(LinkRecordPath, statefile.Kind)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", LinkRecordPath, err)
	}
	return ParseLinkRecords(LinkRecordPath, data)
}

// record keeps the original DNS or domains of a link before nodedns's first change to them; a
// later change to the same setting keeps the first original. It reports whether this call added the
// original (so a change that then fails can take it back: nodedns changed nothing).
func (r *Resolved) record(idx int, name string, dns *[]systemd.DNSServer, doms *[]systemd.Domain) (bool, error) {
	st := r.Store
	recs, err := r.loadRecords(st)
	if err != nil {
		return false, fmt.Errorf("record the original settings of link %s: %w", name, err)
	}
	i := slices.IndexFunc(recs, func(l LinkRecord) bool { return l.IfIndex == idx })
	if i < 0 {
		recs = append(recs, LinkRecord{IfIndex: idx, IfName: name})
		i = len(recs) - 1
	}
	changed := false
	if dns != nil && recs[i].DNS == nil {
		out := []RecordedDNS{}
		for _, s := range *dns {
			out = append(out, RecordedDNS{Addr: s.Addr.String(), Port: s.Port, Name: s.Name})
		}
		recs[i].DNS, changed = &out, true
	}
	if doms != nil && recs[i].Domains == nil {
		out := []RecordedDom{}
		for _, d := range *doms {
			out = append(out, RecordedDom{Name: d.Name, RoutingOnly: d.RoutingOnly})
		}
		recs[i].Domains, changed = &out, true
	}
	if !changed {
		return false, nil
	}
	if err := r.saveRecords(st, recs); err != nil {
		return false, fmt.Errorf("record the original settings of link %s: %w", name, err)
	}
	return true, nil
}

// unrecord takes back an original that record just added, after the change it was for failed.
func (r *Resolved) unrecord(idx int, dns bool) {
	st := r.Store
	recs, err := r.loadRecords(st)
	i := slices.IndexFunc(recs, func(l LinkRecord) bool { return l.IfIndex == idx })
	if err != nil || i < 0 {
		return
	}
	if dns {
		recs[i].DNS = nil
	} else {
		recs[i].Domains = nil
	}
	if recs[i].DNS == nil && recs[i].Domains == nil {
		recs = slices.Delete(recs, i, i+1)
	}
	if err := r.saveRecords(st, recs); err != nil {
		r.log().Warn("could not take back a link record", "ifindex", idx, "err", err)
	}
}

func (r *Resolved) saveRecords(st *store.Store, recs []LinkRecord) error {
	data, err := statefile.Encode(linkRecordFile{Comment: recordComment, Links: recs})
	if err != nil {
		return err
	}
	_, err = st.Write(LinkRecordPath, data, 0o600)
	return err
}

// BeforeRestore implements Reverter: it puts back the recorded original DNS and domains of every
// link nodedns changed (with the recorded values, not RevertLink, which would also drop settings
// others made). A link that is gone, or whose ifindex now belongs to another interface, is skipped
// and said so.
func (r *Resolved) BeforeRestore(ctx context.Context) ([]store.RestoreResult, error) {
	recs, err := r.loadRecords(r.Store)
	if err != nil || len(recs) == 0 {
		return nil, err
	}
	c, err := r.api(ctx)
	if err != nil {
		return nil, fmt.Errorf("revert per-link settings: %w", err)
	}
	var res []store.RestoreResult
	var errs []error
	for _, l := range recs {
		where := fmt.Sprintf("systemd-resolved link %s (ifindex %d)", l.IfName, l.IfIndex)
		if l.IfName != "" && !strings.HasPrefix(l.IfName, "ifindex ") {
			if now := r.ifName(l.IfIndex); now != l.IfName {
				res = append(res, store.RestoreResult{Path: where, Action: store.ActionKept, Reason: fmt.Sprintf("the link is gone (ifindex %d is now %q): nothing to revert", l.IfIndex, now)})
				continue
			}
		}
		var what []string
		if l.DNS != nil {
			var servers []systemd.DNSServer
			for _, d := range *l.DNS {
				a, _ := netip.ParseAddr(d.Addr)
				servers = append(servers, systemd.DNSServer{IfIndex: l.IfIndex, Addr: a, Port: d.Port, Name: d.Name})
			}
			if err := c.SetLinkDNS(ctx, l.IfIndex, servers); err != nil {
				if errors.Is(err, bus.ErrLinkGone) {
					res = append(res, store.RestoreResult{Path: where, Action: store.ActionKept, Reason: "the link is gone: nothing to revert"})
					continue
				}
				errs = append(errs, fmt.Errorf("revert DNS of %s: %w", where, err))
			} else {
				what = append(what, "DNS")
			}
		}
		if l.Domains != nil {
			var doms []systemd.Domain
			for _, d := range *l.Domains {
				doms = append(doms, systemd.Domain{Name: d.Name, RoutingOnly: d.RoutingOnly})
			}
			if err := c.SetLinkDomains(ctx, l.IfIndex, doms); err != nil {
				if errors.Is(err, bus.ErrLinkGone) {
					res = append(res, store.RestoreResult{Path: where, Action: store.ActionKept, Reason: "the link is gone: nothing to revert"})
					continue
				}
				errs = append(errs, fmt.Errorf("revert domains of %s: %w", where, err))
			} else {
				what = append(what, "domains")
			}
		}
		if len(what) > 0 {
			res = append(res, store.RestoreResult{Path: where, Action: store.ActionRestored, Reason: strings.Join(what, " and ") + " set back over D-Bus"})
		}
	}
	return res, errors.Join(errs...)
}

// AfterRestore implements Reverter: when restore put back resolved's configuration (nodedns's
// drop-in removed, another one restored), resolved is restarted to read it; it only reads its
// configuration at start, and SIGHUP kills resolved 252.
func (r *Resolved) AfterRestore(ctx context.Context, restored []store.RestoreResult) ([]store.RestoreResult, error) {
	touched := false
	for _, x := range restored {
		if x.Action != store.ActionKept && isResolvedConfig(x.Path) {
			touched = true
		}
	}
	if !touched {
		return nil, nil
	}
	if err := r.restart(ctx); err != nil {
		return nil, fmt.Errorf("restart systemd-resolved after restoring its configuration: %w", err)
	}
	return []store.RestoreResult{{Path: systemd.ResolvedUnit, Action: policy.RestartResolved{}.Kind(), Reason: "reload the restored resolved.conf.d"}}, nil
}

func isResolvedConfig(p string) bool {
	p = path.Clean(p)
	for _, d := range []string{"/etc/systemd", "/run/systemd", "/usr/local/lib/systemd", "/usr/lib/systemd", "/lib/systemd"} {
		if p == d+"/resolved.conf" || path.Dir(p) == d+"/resolved.conf.d" {
			return true
		}
		// DNS delegates (systemd 258+), and their drop-ins: resolved reads them only at start too.
		if dir := d + "/dns-delegate.d"; path.Dir(p) == dir || path.Dir(path.Dir(p)) == dir {
			return true
		}
	}
	return p == node.ResolvedDropIn
}
