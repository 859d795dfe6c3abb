package policy

import (
	"fmt"
	"net/netip"
	"path"
	"slices"
	"strings"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/kubelet"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/netplan"
	"github.com/nodedns/nodedns/systemd"
)

// Pending is a step that completes a fix whose files are already in place but which apply does not
// carry out itself: a resolved restart under --root, `netplan apply` with netplan.apply false, the
// next DHCP renewal, pointing kubelet at nodedns's file. `plan` lists them and the checks name them
// as their hint, so that `plan` never goes quiet while `check` still reports a problem
// (docs/contract.md "Check and plan agree").
type Pending struct {
	// Target is what the step acts on: a unit, a file, kubelet's config.
	Target string
	// Step says what to do.
	Step string
	// Why says what is still wrong until it is done.
	Why string
	// About is what the step completes: PendingDNS (loop servers), PendingSearch (DHCP or cluster
	// search domains), PendingKubelet (kubelet's resolvConf); a check names only its own.
	About []string
}

// What a pending step completes.
const (
	PendingDNS     = "dns"
	PendingSearch  = "search"
	PendingKubelet = "kubelet"
)

// String renders the pending step for people and for plan's notes.
func (p Pending) String() string { return fmt.Sprintf("pending: %s: %s (%s)", p.Target, p.Step, p.Why) }

// busyLink is a link systemd-networkd manages whose DHCP settings (loop servers, DHCP domains)
// resolved cannot change over D-Bus: only networkd's configuration can (resolved(), LinkBusy).
type busyLink struct {
	name, networkFile string
	bad               []string
	dns, domains      bool // bad has loop servers, DHCP domains
}

// pending fills p.Pending once every target is planned, and turns the notes about networkd links
// into pending steps where nodedns's override is already in place.
func (p *Plan) pending(s *node.Snapshot, cfg config.Config) {
	p.pendingResolvedRestart(s)
	p.pendingNetworkd(s, cfg)
	p.pendingKubelet(s, cfg)
}

// planned reports whether the plan changes, acts on or blocks target.
func (p Plan) planned(target string) bool {
	return slices.ContainsFunc(p.Changes, func(c Change) bool { return c.Path == target || c.Target == target }) ||
		slices.ContainsFunc(p.Actions, func(a Action) bool { return a.Target() == target }) ||
		slices.ContainsFunc(p.Blocked, func(b Blocked) bool { return b.Target == target })
}

// pendingResolvedRestart: resolved's configuration no longer lists a loop address, but its own
// resolv.conf (written when it last started) still does, and no link's servers explain it: resolved
// runs with the old configuration until it restarts. On the live node resolvedStale plans the
// restart as an action from resolved's live view; this is the files-only answer (--root, or no bus).
func (p *Plan) pendingResolvedRestart(s *node.Snapshot) {
	if s.ResolvedLive != nil || !s.ResolvedInUse() || s.Resolved == nil || s.ResolvedResolv.File == nil || p.planned(systemd.ResolvedUnit) {
		return
	}
	for _, sv := range s.Resolved.DNS {
		if p.Facts.IsLoop(sv.Addr, false) {
			return // the files still ask for it: blocked, or the drop-in is the fix
		}
	}
	var linkDNS []netip.Addr
	for _, l := range s.Links {
		linkDNS = append(linkDNS, l.DNS...)
	}
	var stale []string
	for _, a := range s.ResolvedResolv.File.Nameservers() {
		if p.Facts.IsLoop(a, false) && !slices.Contains(linkDNS, a) {
			stale = append(stale, a.String())
		}
	}
	if len(stale) == 0 {
		return
	}
	p.Pending = append(p.Pending, Pending{Target: systemd.ResolvedUnit, Step: "restart it: `systemctl restart systemd-resolved` (SIGHUP kills resolved 252)", About: []string{PendingDNS},
		Why: fmt.Sprintf("%s still lists %s, which its configuration no longer does: resolved reads resolved.conf.d only when it starts", node.ResolvedResolvConf, strings.Join(stale, " "))})
}

// pendingNetworkd: links networkd manages that still carry DHCP domains or loop servers. Before
// nodedns's override exists (or while it changes) the plan writes it and a note says why; once it is
// in place, only `netplan apply` / `networkctl reload` and the next renewal (or a reboot) make
// networkd drop them: pending.
func (p *Plan) pendingNetworkd(s *node.Snapshot, cfg config.Config) {
	for _, l := range p.busyLinks {
		step, target := "", ""
		switch {
		case s.NetplanOwn.Exists && s.NetplanOwn.Err == nil && !p.planned(netplan.NodednsFile):
			target, step = netplan.NodednsFile, "`netplan apply` (or a reboot), then the next DHCP renewal"
			if cfg.Netplan.Apply {
				step = "the next DHCP renewal (or a reboot)"
			}
		case p.networkdDropInInPlace(s, l.networkFile):
			target, step = node.NetworkdDropIn(l.networkFile), "`networkctl reload` (or a reboot), then the next DHCP renewal"
		}
		if target == "" {
			p.Notes = append(p.Notes, fmt.Sprintf("link %s is managed by systemd-networkd (%s): its DHCP settings (%s) can only be switched off in netplan or networkd (dhcp4-overrides use-domains/use-dns: false)",
				l.name, l.networkFile, strings.Join(l.bad, " ")))
			continue
		}
		var about []string
		if l.dns {
			about = append(about, PendingDNS)
		}
		if l.domains {
			about = append(about, PendingSearch)
		}
		p.Pending = append(p.Pending, Pending{Target: target, Step: step, About: about,
			Why: fmt.Sprintf("link %s (systemd-networkd, %s) still has %s from before the override", l.name, l.networkFile, strings.Join(l.bad, " "))})
	}
}

func (p *Plan) networkdDropInInPlace(s *node.Snapshot, networkFile string) bool {
	for _, n := range s.Networkd {
		if n.Path == networkFile {
			return n.DropIn.Exists && !p.planned(node.NetworkdDropIn(n.Path))
		}
	}
	return false
}

// pendingKubelet: kubelet reads a resolv.conf that loops or searches a DHCP domain, while nodedns's
// loop-free file is written: only the operator can point kubelet at it (nodedns does not edit
// kubelet's config), then restart kubelet.
func (p *Plan) pendingKubelet(s *node.Snapshot, cfg config.Config) {
	k := s.Kubelet
	if cfg.Kubelet.Manage && (s.KubeletManage != nil || s.KubeletRestart != nil) {
		return // kubelet.manage points kubelet at nodedns's file, or says why not (kubeletmanage.go)
	}
	if k.Err != nil || k.ResolvConf == "" || path.Clean(k.ResolvConf) == path.Clean(cfg.Kubelet.ResolvConf) ||
		len(p.Changes) > 0 || len(p.Actions) > 0 {
		// nodedns's file already; or apply has work left, which may fix the file kubelet reads
		// (/etc/resolv.conf itself, or through resolved or NetworkManager): pending is for after.
		return
	}
	var bad []string
	if rf := s.KubeletResolv; rf.File != nil {
		for _, a := range rf.File.Nameservers() {
			if p.Facts.IsLoop(a, true) {
				bad = append(bad, a.String())
			}
		}
		for _, d := range rf.File.Search() {
			if p.Facts.IsDHCPDomain(d) {
				bad = append(bad, d)
			}
		}
	} else if !s.KubeletResolv.Exists {
		bad = append(bad, "(missing)")
	}
	if len(bad) == 0 {
		return
	}
	where, step := kubelet.Point(k, cfg.Kubelet.ResolvConf)
	p.Pending = append(p.Pending, Pending{Target: where, About: []string{PendingKubelet},
		Step: step,
		Why:  fmt.Sprintf("kubelet reads %s, which lists %s; nodedns does not edit kubelet's config", k.ResolvConf, strings.Join(bad, " "))})
}

// PendingFor returns the pending steps about what (any, when "") for any of the targets.
func (p Plan) PendingFor(about string, targets ...string) []Pending {
	var out []Pending
	for _, pd := range p.Pending {
		if slices.Contains(targets, pd.Target) && (about == "" || slices.Contains(pd.About, about)) {
			out = append(out, pd)
		}
	}
	return out
}

// Planned reports whether the plan changes or acts on any of the targets (not counting blocked).
func (p Plan) Planned(targets ...string) bool {
	for _, t := range targets {
		if slices.ContainsFunc(p.Changes, func(c Change) bool { return c.Path == t || c.Target == t }) ||
			slices.ContainsFunc(p.Actions, func(a Action) bool { return a.Target() == t }) {
			return true
		}
	}
	return false
}

// BlockedFor returns the blocked entries for any of the targets.
func (p Plan) BlockedFor(targets ...string) []Blocked {
	var out []Blocked
	for _, b := range p.Blocked {
		if slices.Contains(targets, b.Target) {
			out = append(out, b)
		}
	}
	return out
}
