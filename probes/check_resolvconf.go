package probes

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"path"
	"slices"
	"strings"

	"github.com/nodedns/nodedns/config"
	"github.com/nodedns/nodedns/leases"
	"github.com/nodedns/nodedns/node"
	"github.com/nodedns/nodedns/policy"
	"github.com/nodedns/nodedns/resolvconf"
)

const hintApply = "run `nodedns plan` to see the fix, `nodedns apply` to make it"

func loopAddrs(env *Env, addrs []netip.Addr, withLoopback bool) []string {
	var out []string
	for _, a := range addrs {
		if env.Plan.Facts.IsLoop(a, withLoopback) {
			out = append(out, fmt.Sprintf("%s (%s)", a, env.Plan.Facts.LoopKind(a)))
		}
	}
	return out
}

func dhcpDomains(env *Env, domains []string) []string {
	var out []string
	for _, d := range domains {
		if env.Plan.Facts.IsDHCPDomain(d) {
			out = append(out, d)
		}
	}
	return out
}

func unreadable(rf node.ResolvFile) Result {
	return Result{Status: Unknown, Message: fmt.Sprintf("%s cannot be read: %v", rf.Target, rf.Err), Hint: "fix or replace the file; nodedns changes nothing that depends on it"}
}

type resolvConfLoop struct{}

func (resolvConfLoop) ID() string { return "resolvconf.loop" }

func (resolvConfLoop) Run(_ context.Context, env *Env) Result {
	rc := env.Snapshot.ResolvConf
	switch {
	case !rc.Exists:
		return Result{Status: OK, Message: "/etc/resolv.conf is missing: it lists no loop address (see resolvconf.nameservers)"}
	case rc.File == nil:
		return unreadable(rc)
	}
	// The host's own libc may use a loopback stub (127.0.0.53): only cache and cluster addresses loop.
	if bad := loopAddrs(env, rc.File.Nameservers(), false); len(bad) > 0 {
		hint := hintApply + ", or remove the line"
		if env.Snapshot.ResolvConfManagedByResolved() {
			hint = "systemd-resolved serves it: " + hintApply
		}
		return Result{Status: Problem, Message: fmt.Sprintf("/etc/resolv.conf lists %s", strings.Join(bad, ", ")), Hint: hint}
	}
	return Result{Status: OK, Message: fmt.Sprintf("/etc/resolv.conf lists no loop address (%s)", describeResolv(rc))}
}

func describeResolv(rc node.ResolvFile) string {
	var ns []string
	for _, a := range rc.File.Nameservers() {
		ns = append(ns, a.String())
	}
	s := "nameservers: " + strings.Join(ns, " ")
	if len(ns) == 0 {
		s = "no nameserver"
	}
	if rc.Symlink {
		s += "; a symlink to " + rc.Target
	}
	return s
}

type resolvConfSearch struct{}

func (resolvConfSearch) ID() string { return "resolvconf.search" }

// clusterSearch is what kubelet puts before the host's search domains in a ClusterFirst pod:
// <namespace>.svc.<domain> svc.<domain> <domain>.
func clusterSearch(ns, domain string) []string {
	return []string{ns + ".svc." + domain, "svc." + domain, domain}
}

func (resolvConfSearch) Run(_ context.Context, env *Env) Result {
	rc := env.Snapshot.ResolvConf
	switch {
	case !rc.Exists:
		return Result{Status: OK, Message: "/etc/resolv.conf is missing: no search list"}
	case rc.File == nil:
		return unreadable(rc)
	}
	search := rc.File.Search()
	var problems []string
	if bad := dhcpDomains(env, search); len(bad) > 0 {
		problems = append(problems, fmt.Sprintf("DHCP search domain %s reaches the host search list (every pod inherits it: failed cluster lookups leak to the LAN resolver)", strings.Join(bad, ", ")))
	}
	// kubelet's limits (validation MaxDNSSearchPaths, MaxDNSSearchListChars) count the 3 cluster domains
	// it adds; a 63-character namespace is the worst case.
	worst := append(clusterSearch(strings.Repeat("n", 63), env.Plan.Facts.ClusterDomain), search...)
	if n := len(worst); n > resolvconf.KubeletMaxSearch {
		problems = append(problems, fmt.Sprintf("%d search domains with the cluster's 3: kubelet allows %d", n, resolvconf.KubeletMaxSearch))
	}
	if n := len(strings.Join(worst, " ")); n > resolvconf.KubeletMaxSearchLen {
		problems = append(problems, fmt.Sprintf("the search list is %d characters with the cluster's domains: kubelet allows %d", n, resolvconf.KubeletMaxSearchLen))
	}
	// musl ignores a whole search line of 255+ characters: Alpine pods then search nothing.
	podLine := "search " + strings.Join(append(clusterSearch("default", env.Plan.Facts.ClusterDomain), search...), " ")
	if len(podLine) >= resolvconf.MuslMaxSearchLine {
		problems = append(problems, fmt.Sprintf("a pod's search line would be %d characters: musl ignores a line of %d or more", len(podLine), resolvconf.MuslMaxSearchLine))
	}
	if len(problems) > 0 {
		return Result{Status: Problem, Message: strings.Join(problems, "; "), Hint: hintApply + " (DHCP domains), or shorten the search list"}
	}
	if len(search) == 0 {
		return Result{Status: OK, Message: "no host search domain"}
	}
	return Result{Status: OK, Message: "host search domains: " + strings.Join(search, " ")}
}

type resolvConfNameservers struct{}

func (resolvConfNameservers) ID() string { return "resolvconf.nameservers" }

func (resolvConfNameservers) Run(_ context.Context, env *Env) Result {
	f := env.Plan.Facts
	rc := env.Snapshot.ResolvConf
	var problems []string
	if len(f.Upstreams) == 0 {
		problems = append(problems, "no usable upstream DNS server is known (every source lists only loop addresses or none)")
	}
	switch {
	case !rc.Exists:
		problems = append(problems, "/etc/resolv.conf is missing (glibc then asks 127.0.0.1)")
	case rc.File == nil:
		return unreadable(rc)
	case len(rc.File.Nameservers()) > resolvconf.MaxNameservers:
		problems = append(problems, fmt.Sprintf("/etc/resolv.conf lists %d nameservers: glibc and musl use the first %d, kubelet truncates to %d", len(rc.File.Nameservers()), resolvconf.MaxNameservers, resolvconf.MaxNameservers))
	}
	if len(problems) > 0 {
		return Result{Status: Problem, Message: strings.Join(problems, "; "), Hint: "set `upstreams` in /etc/nodedns/config.yaml to the node's real resolvers"}
	}
	var ups []string
	for _, a := range f.Upstreams {
		ups = append(ups, a.String())
	}
	return Result{Status: OK, Message: fmt.Sprintf("upstreams %s (from %s)", strings.Join(ups, " "), f.UpstreamSource)}
}

type kubeletResolvConf struct{}

func (kubeletResolvConf) ID() string { return "kubelet.resolvconf" }

func (kubeletResolvConf) Run(_ context.Context, env *Env) Result {
	s := env.Snapshot
	k := s.Kubelet
	if k.ResolvConf == "" {
		return Result{Status: OK, Message: fmt.Sprintf("kubelet's resolvConf is empty in %s: pods get no host resolv.conf", k.Path)}
	}
	where := fmt.Sprintf("kubelet's resolvConf %s", k.ResolvConf)
	if !k.Exists {
		where += " (kubelet's default: " + k.Path + " is missing)"
	}
	ours := k.ResolvConf == env.Config.Kubelet.ResolvConf
	pointHint := fmt.Sprintf("set resolvConf: %s in %s (kubespray: kube_resolv_conf) so kubelet uses nodedns's loop-free file", env.Config.Kubelet.ResolvConf, k.Path)
	rf := s.KubeletResolv
	switch {
	case !rf.Exists:
		hint := hintApply
		if !ours {
			hint = pointHint
		}
		return Result{Status: Problem, Message: where + " is missing: kubelet cannot start pods", Hint: hint}
	case rf.File == nil:
		return unreadable(rf)
	}
	var problems []string
	// kubelet hands the file to pods and to the cache's `forward . /etc/resolv.conf`: a loopback stub
	// there is the pod's own loopback, or loops back through resolved.
	if bad := loopAddrs(env, rf.File.Nameservers(), true); len(bad) > 0 {
		problems = append(problems, "lists "+strings.Join(bad, ", "))
	}
	if bad := dhcpDomains(env, rf.File.Search()); len(bad) > 0 {
		problems = append(problems, "searches DHCP domain "+strings.Join(bad, ", "))
	}
	if len(rf.File.Nameservers()) == 0 {
		problems = append(problems, "lists no nameserver")
	}
	if len(problems) > 0 {
		hint := hintApply
		if !ours {
			hint = pointHint
		}
		return Result{Status: Problem, Message: where + " " + strings.Join(problems, "; "), Hint: hint}
	}
	res := Result{Status: OK, Message: where + " is loop-free (" + describeResolv(rf) + ")"}
	if !ours {
		res.Hint = pointHint
	} else if want := policy.KubeletResolvConf(env.Plan.Facts, hostSearch(s), hostOptions(s)); len(env.Plan.Facts.Upstreams) > 0 && !bytes.Equal(rf.Data, want) {
		res.Message += "; out of date with the node's upstreams"
		res.Hint = hintApply
	}
	return res
}

func hostSearch(s *node.Snapshot) []string {
	if s.ResolvConf.File == nil {
		return nil
	}
	return s.ResolvConf.File.Search()
}

func hostOptions(s *node.Snapshot) []string {
	if s.ResolvConf.File == nil {
		return nil
	}
	return s.ResolvConf.File.Options()
}

type resolvedDNS struct{}

func (resolvedDNS) ID() string { return "resolved.dns" }

func (resolvedDNS) Run(_ context.Context, env *Env) Result {
	s := env.Snapshot
	if !s.ResolvedInUse() {
		return Result{Status: Skipped, Message: "systemd-resolved is not in use (/etc/resolv.conf is not its file and it left no runtime files)"}
	}
	if s.Resolved == nil {
		return Result{Status: Unknown, Message: "resolved.conf could not be read"}
	}
	var problems []string
	var global []netip.Addr
	for _, sv := range s.Resolved.DNS {
		global = append(global, sv.Addr)
	}
	if bad := loopAddrs(env, global, false); len(bad) > 0 {
		var src []string
		for _, d := range s.Resolved.DNSSources {
			src = append(src, fmt.Sprintf("%s:%d", d.Path, d.Line))
		}
		problems = append(problems, fmt.Sprintf("global DNS= lists %s (set in %s)", strings.Join(bad, ", "), strings.Join(src, ", ")))
	}
	if live := s.ResolvedLive; live != nil {
		// What resolved runs with, over D-Bus: differs from the files until resolved is restarted.
		var running []netip.Addr
		for _, sv := range live.DNS {
			running = append(running, sv.Addr)
		}
		if bad := loopAddrs(env, running, false); len(bad) > 0 && len(problems) == 0 {
			// Only when the files are clean: otherwise the line above already names the source.
			problems = append(problems, fmt.Sprintf("runs with global DNS %s (live over D-Bus; restart it to load its configuration)", strings.Join(bad, ", ")))
		}
	}
	for _, l := range s.Links {
		if bad := loopAddrs(env, l.DNS, false); len(bad) > 0 {
			problems = append(problems, fmt.Sprintf("link %s lists %s", linkName(l.IfName, l.IfIndex), strings.Join(bad, ", ")))
		}
	}
	if len(problems) > 0 {
		return Result{Status: Problem, Message: "systemd-resolved " + strings.Join(problems, "; "), Hint: hintApply}
	}
	var g []string
	for _, a := range global {
		g = append(g, a.String())
	}
	msg := "systemd-resolved's configured servers are loop-free"
	if len(g) > 0 {
		msg += " (global: " + strings.Join(g, " ") + ")"
	}
	if !env.Live {
		msg += "; read from files"
	} else if s.ResolvedLive != nil {
		msg += "; confirmed over D-Bus"
	}
	return Result{Status: OK, Message: msg}
}

func linkName(name string, index int) string {
	if name != "" {
		return name
	}
	return fmt.Sprintf("ifindex %d", index)
}

type resolvedDomains struct{}

func (resolvedDomains) ID() string { return "resolved.domains" }

func (resolvedDomains) Run(_ context.Context, env *Env) Result {
	s := env.Snapshot
	if !s.ResolvedInUse() {
		return Result{Status: Skipped, Message: "systemd-resolved is not in use"}
	}
	var problems []string
	hint := hintApply
	for _, l := range s.Links {
		var bad []string
		for _, d := range l.Domains {
			if !d.RoutingOnly && env.Plan.Facts.IsDHCPDomain(d.Name) {
				bad = append(bad, d.Name)
			}
		}
		if len(bad) == 0 {
			continue
		}
		problems = append(problems, fmt.Sprintf("link %s searches DHCP domain %s", linkName(l.IfName, l.IfIndex), strings.Join(bad, ", ")))
		if l.NetworkdManaged {
			hint = "systemd-networkd manages the link: set dhcp4-overrides/dhcp6-overrides use-domains: false in netplan (netplan.mode: override), or UseDomains=no in a .network drop-in, then `networkctl reload`"
		}
	}
	if len(problems) > 0 {
		return Result{Status: Problem, Message: strings.Join(problems, "; "), Hint: hint}
	}
	return Result{Status: OK, Message: "no DHCP search domain on any resolved link"}
}

type dhcpSearch struct{}

func (dhcpSearch) ID() string { return "dhcp.search" }

func (dhcpSearch) Run(_ context.Context, env *Env) Result {
	s := env.Snapshot
	f := env.Plan.Facts
	doms := f.SortedDHCPDomains()
	// A lease or netplan file nodedns could not read may hold DHCP domains it does not know about:
	// then "ok" would be a guess.
	var unread []string
	for _, p := range s.Problems {
		if isLeasePath(p.Path) || strings.Contains(p.Path, "/netplan/") || strings.Contains(p.Msg, "/netplan/") {
			unread = append(unread, p.String())
		}
	}
	if len(doms) == 0 {
		if len(unread) > 0 {
			return Result{Status: Unknown, Message: "no readable DHCP lease hands out a search domain, but some sources could not be read: " + strings.Join(unread, "; "), Hint: "fix or remove the unreadable files"}
		}
		return Result{Status: OK, Message: "no DHCP lease hands out a search domain"}
	}
	var problems, hints []string
	if s.DhclientConf && !bytes.Equal(s.DhclientHook.Data, policy.DhclientHook(f)) {
		state := "missing"
		if s.DhclientHook.Exists {
			state = "out of date"
		}
		problems = append(problems, "dhclient's enter hook "+node.DhclientHook+" is "+state)
		hints = append(hints, "`nodedns apply` installs the dhclient hook")
	}
	if s.Netplan != nil {
		for _, i := range s.Netplan.DHCPInterfaces() {
			if i.Renderer == "NetworkManager" {
				problems = append(problems, fmt.Sprintf("NetworkManager renders %s (netplan %s)", i.ID, strings.Join(i.Files, ", ")))
				hints = append(hints, fmt.Sprintf("nmcli connection modify <connection of %s> ipv4.ignore-auto-dns yes ipv6.ignore-auto-dns yes ipv4.dns %q", i.ID, upstreamList(f)))
				continue
			}
			var missing []string
			if i.DHCP4 && !overridesDomains(i.DHCP4Overrides) {
				missing = append(missing, "dhcp4-overrides")
			}
			if i.DHCP6 && !overridesDomains(i.DHCP6Overrides) {
				missing = append(missing, "dhcp6-overrides")
			}
			if len(missing) > 0 {
				problems = append(problems, fmt.Sprintf("netplan interface %s takes DHCP domains (no %s use-domains: false)", i.ID, strings.Join(missing, "/")))
				hints = append(hints, "`nodedns apply` writes the override to /etc/netplan/90-nodedns.yaml (netplan.mode: override), then `netplan apply`")
			}
		}
	}
	// Nodes with networkd but no netplan: nodedns's .network drop-in switches DHCP domains off.
	for _, n := range s.Networkd {
		if !bytes.Equal(n.DropIn.Data, policy.NetworkdDropIn(n)) {
			problems = append(problems, fmt.Sprintf("systemd-networkd's %s takes DHCP domains (no UseDomains=no drop-in)", n.Path))
			hints = append(hints, "`nodedns apply` writes "+node.NetworkdDropIn(n.Path)+", then `networkctl reload`")
		}
	}
	if len(problems) > 0 {
		return Result{Status: Problem, Message: fmt.Sprintf("DHCP hands out %s and will again on renewal: %s", strings.Join(doms, ", "), strings.Join(problems, "; ")), Hint: strings.Join(uniq(hints), "; ")}
	}
	if len(unread) > 0 {
		return Result{Status: Unknown, Message: fmt.Sprintf("DHCP hands out %s; the known clients drop it, but some sources could not be read: %s", strings.Join(doms, ", "), strings.Join(unread, "; ")), Hint: "fix or remove the unreadable files"}
	}
	return Result{Status: OK, Message: fmt.Sprintf("DHCP hands out %s; every DHCP client drops it", strings.Join(doms, ", "))}
}

func isLeasePath(p string) bool {
	for _, d := range leases.Dirs() {
		if strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// overridesDomains: use-domains false, or route (routing-only domains are never searched).
func overridesDomains(o map[string]any) bool {
	return policy.DropsDomains(o)
}

func upstreamList(f policy.Facts) string {
	var out []string
	for _, a := range f.Upstreams {
		out = append(out, a.String())
	}
	return strings.Join(out, " ")
}

func uniq(s []string) []string {
	var out []string
	for _, x := range s {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

type addressingStatic struct{}

func (addressingStatic) ID() string { return "addressing.static" }

// EffectiveNetplanMode is config netplan.mode, defaulting to override when netplan has DHCP interfaces
// (design.md) and off otherwise.
//
// It is policy.NetplanMode: a pin nodedns already wrote keeps the mode at pin.
func EffectiveNetplanMode(cfg config.Config, s *node.Snapshot) string {
	return policy.NetplanMode(cfg, s)
}

func (addressingStatic) Run(_ context.Context, env *Env) Result {
	mode := EffectiveNetplanMode(env.Config, env.Snapshot)
	if mode != config.NetplanPin {
		return Result{Status: OK, Message: fmt.Sprintf("netplan.mode is %s: DHCP addressing is allowed", mode)}
	}
	// The default-route interface: netlink's on the live node; under --root those whose current
	// lease carries a router. Whether DHCP addresses it is what the node's configuration says
	// (netplan, else networkd), the lease only when neither knows the interface.
	s := env.Snapshot
	var names []string
	if s.Uplink != nil && s.Uplink.IfName != "" {
		names = []string{s.Uplink.IfName}
	} else {
		for _, l := range s.Leases {
			if len(l.Routers) > 0 && !l.V6 && l.Current(s.Now) && l.Interface != "" && !slices.Contains(names, l.Interface) {
				names = append(names, l.Interface)
			}
		}
	}
	var dhcp []string
	for _, n := range names {
		if addressedByDHCP(s, n) {
			dhcp = append(dhcp, n)
		}
	}
	if len(dhcp) > 0 {
		return Result{Status: Problem, Message: fmt.Sprintf("the default-route interface %s is addressed by DHCP and netplan.mode is pin", strings.Join(dhcp, ", ")),
			Hint: "run `nodedns netplan pin --dry-run`, then `nodedns netplan pin` (or `nodedns apply`)"}
	}
	if len(names) == 0 {
		return Result{Status: OK, Message: "no default-route interface is addressed by DHCP"}
	}
	return Result{Status: OK, Message: fmt.Sprintf("the default-route interface %s has static addressing", strings.Join(names, ", "))}
}

// addressedByDHCP says whether the node's configuration gives ifname a DHCPv4 address: the merged
// netplan definition that matches it by name, else a networkd DHCP network matching it, else
// (nothing configures it by name) whether it holds a current lease.
func addressedByDHCP(s *node.Snapshot, ifname string) bool {
	if s.Netplan != nil {
		found, dhcp := false, false
		for _, i := range s.Netplan.Interfaces {
			if i.Matches(ifname) {
				found = true
				dhcp = dhcp || i.DHCP4
			}
		}
		if found {
			return dhcp
		}
	}
	for _, n := range s.Networkd {
		for _, m := range n.MatchNames {
			if ok, _ := path.Match(m, ifname); ok && n.DHCP4 {
				return true
			}
		}
	}
	for _, l := range s.Leases {
		if l.Interface == ifname && !l.V6 && l.Current(s.Now) {
			return true
		}
	}
	return false
}

type bootPersistence struct{}

func (bootPersistence) ID() string { return "boot.persistence" }

func (bootPersistence) Run(ctx context.Context, env *Env) Result {
	s := env.Snapshot
	u := s.Unit
	var problems, hints []string
	switch {
	case u.Path == "":
		problems = append(problems, "the nodedns unit is not installed")
		hints = append(hints, "install the nodedns package")
	default:
		if !u.Enabled {
			problems = append(problems, u.Path+" is not enabled")
			hints = append(hints, "systemctl enable nodedns.service")
		}
		if !slices.Contains(u.Before, "kubelet.service") {
			problems = append(problems, u.Path+" is not ordered Before=kubelet.service")
			hints = append(hints, "reinstall the packaged unit (it has Before=kubelet.service)")
		}
	}
	// A fix that lives only in /run is gone after a reboot while the loop source in /etc stays.
	if s.Resolved != nil && s.ResolvedPersistent != nil && s.ResolvedInUse() {
		var now, boot []netip.Addr
		for _, sv := range s.Resolved.DNS {
			now = append(now, sv.Addr)
		}
		for _, sv := range s.ResolvedPersistent.DNS {
			boot = append(boot, sv.Addr)
		}
		if len(loopAddrs(env, now, false)) == 0 {
			if bad := loopAddrs(env, boot, false); len(bad) > 0 {
				problems = append(problems, fmt.Sprintf("resolved's loop-free DNS lives only in /run: after a reboot it lists %s again", strings.Join(bad, ", ")))
				hints = append(hints, hintApply+" (writes "+node.ResolvedDropIn+")")
			}
		}
	}
	// After a reboot, what the cache needed at the last good boot must come back (probes/boot.go).
	var live bootLive
	if env.Host != nil {
		live = env.checkBaseline(ctx)
		problems = append(problems, live.problems...)
		hints = append(hints, live.hints...)
	}
	if len(problems) > 0 {
		return Result{Status: Problem, Message: strings.Join(problems, "; "), Hint: strings.Join(uniq(hints), "; ")}
	}
	msg := u.Path + " is enabled (" + strings.Join(u.WantedBy, ", ") + ") and ordered before kubelet.service"
	switch {
	case env.Host == nil:
		msg += "; the reboot baseline is a live check"
	case live.unknown:
		return Result{Status: Unknown, Message: msg + "; " + live.note, Hint: "wait for the grace period (`nodedns check --wait`), or fix the state file"}
	default:
		msg += "; " + live.note
	}
	return Result{Status: OK, Message: msg}
}
