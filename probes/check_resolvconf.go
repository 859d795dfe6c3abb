package probes

import (
	"context"
	"fmt"
	"strings"

	"github.com/nodedns/nodedns/internal/networkmanager"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/policy"
	"github.com/nodedns/nodedns/resolvconf"
)

type resolvConfLoop struct{}

func (resolvConfLoop) ID() string { return "resolvconf.loop" }

func (resolvConfLoop) Run(_ context.Context, env *Env) Result {
	rc := env.Snapshot.ResolvConf
	switch {
	case !rc.Exists && rc.Symlink:
		return Result{Status: OK, Message: fmt.Sprintf("/etc/resolv.conf is a dangling symlink to %s: it lists no loop address (see resolvconf.nameservers)", rc.LinkTarget)}
	case !rc.Exists:
		return Result{Status: OK, Message: "/etc/resolv.conf is missing: it lists no loop address (see resolvconf.nameservers)"}
	case rc.File == nil:
		return unreadable(rc)
	}
	// The host's own libc may use a loopback stub (127.0.0.53): only cache and cluster addresses loop.
	bad := loopAddrs(env, rc.File.Nameservers(), false)
	if len(bad) > 0 && env.Snapshot.NMOwnsResolvConf() {
		return nmResolvConfLoop(env, bad, rc.File.Nameservers()) // check_networkmanager.go
	}
	note, renewal := dhclientLoopNote(env, len(bad) > 0)
	if len(bad) > 0 {
		hint := applyHint(env, policy.PendingDNS, hintApply+", or remove the line", "remove the line", node.EtcResolvConf, rc.Target)
		if env.Snapshot.ResolvConfManagedByResolved() {
			hint = "systemd-resolved serves it: " + planHint(env, policy.PendingDNS, "fix resolved's DNS=", resolvedTargets(env.Snapshot)...)
		}
		return Result{Status: Problem, Message: fmt.Sprintf("/etc/resolv.conf lists %s%s", strings.Join(bad, ", "), note), Hint: hint}
	}
	if renewal {
		return Result{Status: Problem, Message: fmt.Sprintf("/etc/resolv.conf lists no loop address (%s)%s", describeResolv(rc), note), Hint: planHint(env, policy.PendingDNS, "install nodedns's dhclient hook", node.DhclientHook)}
	}
	return Result{Status: OK, Message: fmt.Sprintf("/etc/resolv.conf lists no loop address (%s)%s", describeResolv(rc), note)}
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
	if c := clusterSearchOnHost(env, search); c != "" {
		problems = append(problems, c)
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
		targets := []string{node.EtcResolvConf, rc.Target}
		switch {
		case env.Snapshot.ResolvConfManagedByResolved():
			targets = resolvedTargets(env.Snapshot)
		case env.Snapshot.NMOwnsResolvConf():
			targets = []string{networkmanager.NodeDNSConfPath, policy.ReloadNetworkManager{}.Target()}
		}
		return Result{Status: Problem, Message: strings.Join(problems, "; "), Hint: planHint(env, policy.PendingSearch, "shorten the search list", targets...)}
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
	case !rc.Exists && rc.Symlink:
		problems = append(problems, fmt.Sprintf("/etc/resolv.conf is a dangling symlink to %s (%s does not exist, so glibc asks 127.0.0.1)", rc.LinkTarget, rc.Target))
	case !rc.Exists:
		problems = append(problems, "/etc/resolv.conf is missing (glibc then asks 127.0.0.1)")
	case rc.File == nil:
		return unreadable(rc)
	case len(rc.File.Nameservers()) > resolvconf.MaxNameservers:
		problems = append(problems, fmt.Sprintf("/etc/resolv.conf lists %d nameservers: glibc and musl use the first %d, kubelet truncates to %d", len(rc.File.Nameservers()), resolvconf.MaxNameservers, resolvconf.MaxNameservers))
	}
	if len(problems) > 0 {
		hint := "set `upstreams` in /etc/nodedns/config.yaml to the node's real resolvers"
		if !rc.Exists && rc.Symlink {
			// Upstreams do not bring the link's target back: whoever writes it must run, or the
			// link must go.
			hint = fmt.Sprintf("start what writes %s (systemd-resolved for /run/systemd/resolve, NetworkManager for /run/NetworkManager), or replace the symlink with a file", rc.Target)
			if len(f.Upstreams) == 0 {
				hint += "; and " + "set `upstreams` in /etc/nodedns/config.yaml to the node's real resolvers"
			}
		}
		return Result{Status: Problem, Message: strings.Join(problems, "; "), Hint: hint}
	}
	if static := netplanLoopNameservers(env); len(static) > 0 {
		return Result{Status: Problem, Message: strings.Join(static, "; ") + ": netplan renders it into the link's DNS, and the host's lookups loop through the cache",
			Hint: "remove it from nameservers.addresses (nodedns does not edit a static netplan nameserver); list the real resolvers there, or in `upstreams`"}
	}
	var ups []string
	for _, a := range f.Upstreams {
		ups = append(ups, a.String())
	}
	return Result{Status: OK, Message: fmt.Sprintf("upstreams %s (from %s%s)", strings.Join(ups, " "), f.UpstreamSource, offeredNote(f))}
}

// netplanLoopNameservers lists the static netplan nameservers that are loop addresses, in any
// spelling (::ffff:169.254.25.10 is 169.254.25.10), as "netplan sets nameserver A (KIND) on ID in
// FILE".
func netplanLoopNameservers(env *Env) []string {
	np := env.Snapshot.Netplan
	if np == nil {
		return nil
	}
	f := env.Plan.Facts
	var out []string
	for _, i := range np.Interfaces {
		for _, a := range i.Nameservers {
			if f.IsLoop(a, false) {
				out = append(out, fmt.Sprintf("netplan sets nameserver %s (%s) on %s in %s", a, f.LoopKind(a), i.ID, strings.Join(i.Files, ", ")))
			}
		}
	}
	return out
}
