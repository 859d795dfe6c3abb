package probes

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"

	"github.com/nodedns/nodedns/internal/policy"
	"github.com/nodedns/nodedns/resolvconf"
	"github.com/nodedns/nodedns/systemd"
)

// resolvedLoops lists the loop addresses systemd-resolved forwards to: its global and per-link
// servers as configured, and its uplink view /run/systemd/resolve/resolv.conf.
func resolvedLoops(env *Env) []netip.Addr {
	s := env.Snapshot
	var out []netip.Addr
	for _, a := range policy.ResolvedServers(s, s.Resolved, true) {
		if env.Plan.Facts.IsLoop(a, false) && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// chainLoops walks the cache's upstream chain: the forward targets of every server block that is not
// the cluster domain or a reverse zone (those forward to kube-dns on purpose), the resolv.conf files
// they name, and systemd-resolved behind a loopback stub. podCopy is true when every loop comes from a
// resolv.conf file listing a loop address: the pod's own copy, which only re-creating the pod renews.
func chainLoops(env *Env, cp *CacheProcess) (loops []string, upstreams []string, podCopy bool) {
	f := env.Plan.Facts
	podCopy = true
	judge := func(a netip.Addr, via string, fromFile bool) {
		upstreams = append(upstreams, a.String()+via)
		switch {
		case a.IsLoopback():
			if !systemd.IsStub(a) {
				return // another local resolver (dnsmasq, unbound): not followed
			}
			if rl := resolvedLoops(env); len(rl) > 0 {
				podCopy = false
				loops = append(loops, fmt.Sprintf("%s%s is systemd-resolved's stub, and resolved forwards to %s (%s): queries loop through the stub, which CoreDNS's loop plugin does not catch", a, via, addrList(rl), f.LoopKind(rl[0])))
			}
		case f.IsLoop(a, false):
			podCopy = podCopy && fromFile
			loops = append(loops, fmt.Sprintf("%s%s is %s", a, via, f.LoopKind(a)))
		}
	}
	for _, fw := range cp.Forwards {
		if slices.ContainsFunc(fw.Zones, func(z string) bool { return f.IsClusterDomain(z) || strings.HasSuffix(z, ".arpa") || z == "arpa" }) {
			continue
		}
		for file, addrs := range cp.targets(fw) {
			via := fmt.Sprintf(" (%s line %d)", cp.Corefile, fw.Line)
			if file != "" {
				via = fmt.Sprintf(" (from %s, read through /proc/%d/root)", file, cp.PID)
			}
			for _, a := range addrs {
				judge(a, via, file != "")
			}
		}
	}
	return loops, upstreams, podCopy && len(loops) > 0
}

type dnsLoop struct{}

func (dnsLoop) ID() string { return "dns.loop" }

func (dnsLoop) Run(ctx context.Context, env *Env) Result {
	if env.Host == nil {
		return liveSkipped()
	}
	l := env.Host
	p := env.probeCache(ctx)
	cp := env.cacheProcess(ctx)

	// The live probe: a random name the cache cannot have cached (the CoreDNS loop plugin's shape,
	// <random>.<random>. HINFO), sent through the cache so it travels the whole upstream chain.
	var probe *answer
	if p.answered {
		name := l.Random() + "." + l.Random() + "."
		a := l.query(ctx, []answer{{server: p.probed[0], network: "udp", name: name, qtype: dns.TypeHINFO}})[0]
		probe = &a
	}
	probeFailed := probe != nil && (probe.err != nil || probe.msg.Rcode == dns.RcodeServerFailure)

	// The cluster side of the chain (check_chain.go): judged whether or not the cache is up, since
	// a cache that loops through CoreDNS is stopped by its own loop plugin.
	r, looped, judged := clusterSideLoop(ctx, env, p, cp, probe, probeFailed)
	if looped {
		return r
	}
	okResult := func(msg string) Result {
		if judged != "" {
			msg += "; " + judged
		}
		return Result{Status: OK, Message: msg}
	}

	if cp == nil {
		if !p.answered {
			return Result{Status: Unknown, Message: "the cache is down (no process bound to a cache address answers): a loop cannot be probed"}
		}
		if !p.mode.Interface() && !probeFailed {
			// The cache runs in a pod (lrp) or there is none on this node (none): its process may
			// well be elsewhere, and the random name through the cluster DNS came back.
			return okResult(fmt.Sprintf("%s: no cache process on this node to read the upstream chain of; a random name through %s got %s (no loop)", p.mode, p.probed[0], dns.RcodeToString[probe.msg.Rcode]))
		}
		return Result{Status: Unknown, Message: fmt.Sprintf("no node-cache or coredns process bound to %s port 53 was found: the upstream chain cannot be read (probe: %s)", addrList(env.Plan.Facts.CacheAddrs), probe),
			Hint: "run nodedns on the host (host PID namespace) so it can read the cache's /proc"}
	}
	who := fmt.Sprintf("%s (pid %d)", cp.Comm, cp.PID)
	loops, ups, podCopy := chainLoops(env, cp)
	if len(loops) > 0 {
		msg := who + " forwards in a loop: " + strings.Join(loops, "; ")
		switch {
		case probeFailed:
			msg += fmt.Sprintf("; confirmed: %s", probe)
		case probe != nil:
			msg += fmt.Sprintf("; a random name still got %s (another upstream answers first: the loop bites when it fails)", dns.RcodeToString[probe.msg.Rcode])
		}
		hint := "give the cache real upstreams: " + hintApply + " (kubelet's resolvConf and resolved's DNS= lose the loop address), then re-create the node-local-dns pod on this node (" + recreateNodeLocal() + ")"
		if loops, known := kubeletResolvLoops(env); podCopy && known && !loops {
			// After apply: the file kubelet hands pods is loop-free; the pod still has the copy it
			// was made with.
			hint = "kubelet's resolvConf is loop-free, but the pod keeps the resolv.conf it was made with: re-create the node-local-dns pod on this node (" + recreateNodeLocal() + ")"
		}
		return Result{Status: Problem, Message: msg, Hint: hint}
	}
	if cp.Err != nil {
		return Result{Status: Unknown, Message: who + ": " + cp.Err.Error()}
	}
	switch {
	case probe == nil:
		return Result{Status: Unknown, Message: fmt.Sprintf("%s forwards to %s (no loop address), but the cache does not answer: a loop cannot be probed", who, strings.Join(ups, ", "))}
	case probeFailed:
		return Result{Status: Unknown, Message: fmt.Sprintf("%s forwards to %s (no loop address), but a random name failed: %s (an upstream fails, or a loop nodedns cannot see)", who, strings.Join(ups, ", "), probe),
			Hint: "query the upstreams directly with dig; check the cache's logs"}
	}
	if len(ups) == 0 {
		return okResult(fmt.Sprintf("%s forwards nothing outside the cluster domain; a random name got %s", who, dns.RcodeToString[probe.msg.Rcode]))
	}
	return okResult(fmt.Sprintf("%s forwards to %s: no loop address; a random name got %s", who, strings.Join(ups, ", "), dns.RcodeToString[probe.msg.Rcode]))
}

// clusterSideLoop judges the DNS pods the cache forwards the cluster domain and reverse zones to;
// looped is false when none sends them back, and judged then names the servers found loop-free.
func clusterSideLoop(ctx context.Context, env *Env, p *cacheProbe, cp *CacheProcess, probe *answer, probeFailed bool) (r Result, looped bool, judged string) {
	if cp == nil && !p.mode.Interface() {
		return Result{}, false, "" // no cache on this node to come back to
	}
	var fws []Forward
	if cp != nil {
		fws = cp.Forwards
	}
	cf := CacheClusterForwards(env.Plan.Facts, fws, cp != nil && len(cp.Blocks) > 0)
	if len(cf.Zones) == 0 {
		return Result{}, false, ""
	}
	// Only the servers that may be the cluster DNS's are judged (serverTrust): a process that merely
	// calls itself coredns, in a tenant's pod or in namespaces of its own, is named and left out.
	pods, _ := env.podNamespaces(ctx)
	var others []*CacheProcess
	var ignored []string
	for _, s := range env.dnsServers() {
		if cp != nil && s.PID == cp.PID {
			continue
		}
		if _, why := serverTrust(s, pods); why != "" {
			l, _, _ := dnsPodName(s, pods)
			ignored = append(ignored, l+": "+why)
			continue
		}
		others = append(others, s)
	}
	notJudged := ""
	if len(ignored) > 0 {
		notJudged = "not judged: " + listSome(ignored, 3)
	}
	pls := PodLoops(env.Plan.Facts, cf, others)
	if len(pls) == 0 {
		if len(others) == 0 {
			return Result{}, false, notJudged
		}
		var names []string
		for _, s := range others {
			l, _, _ := dnsPodName(s, pods)
			names = append(names, l)
		}
		judged = fmt.Sprintf("%s: %s not sent back to a loop address", strings.Join(names, ", "), strings.Join(cf.Zones, ", "))
		if notJudged != "" {
			judged += "; " + notJudged
		}
		return Result{}, false, judged
	}
	var cacheLoops []string
	if cp != nil {
		cacheLoops, _, _ = chainLoops(env, cp)
	}
	var ps string
	switch {
	case probeFailed:
		ps = fmt.Sprintf("a random name through the cache failed: %s", probe)
	case probe == nil:
		ps = "the cache does not answer"
	}
	r = podLoopResult(ctx, env, cf, pls, cacheLoops, ps)
	if notJudged != "" {
		r.Message += "; " + notJudged
	}
	return r, true, ""
}

type searchNXDomain struct{}

func (searchNXDomain) ID() string { return "dns.search-nxdomain" }

// passedOnSearch is every search domain the node passes on: the host's /etc/resolv.conf (host
// lookups, hostNetwork pods) and kubelet's resolvConf (every ClusterFirst pod's search list after the
// cluster's own), minus the cluster domain, which the cache answers itself.
func passedOnSearch(env *Env) []string {
	var out []string
	for _, rf := range []*resolvconf.File{env.Snapshot.ResolvConf.File, env.Snapshot.KubeletResolv.File} {
		if rf == nil {
			continue
		}
		for _, d := range rf.Search() {
			d = resolvconf.CanonicalDomain(d)
			if d == "" || env.Plan.Facts.IsClusterDomain(d) || slices.Contains(out, d) {
				continue
			}
			out = append(out, d)
		}
	}
	return out
}

func (searchNXDomain) Run(ctx context.Context, env *Env) Result {
	if env.Host == nil {
		return liveSkipped()
	}
	domains := passedOnSearch(env)
	if len(domains) == 0 {
		return Result{Status: OK, Message: "the node passes on no search domain outside the cluster domain"}
	}
	ups := env.Plan.Facts.Upstreams
	if len(ups) == 0 {
		return Result{Status: Unknown, Message: fmt.Sprintf("no upstream to ask about search domain %s (see resolvconf.nameservers)", strings.Join(domains, ", "))}
	}
	var nodata, unsure, wild []string
	var nodataDomains []string
	for i, a := range env.Host.nxProbe(ctx, env, domains, ups) {
		d := domains[i/(2*len(ups))]
		switch {
		case a.err != nil:
			unsure = append(unsure, a.String())
		case a.msg.Rcode == dns.RcodeNameError:
		case a.msg.Rcode == dns.RcodeSuccess && len(a.msg.Answer) == 0:
			// Incident 003 (docs/incidents.md): NOERROR without records (NODATA) for a name that does not exist. musl stops
			// walking the search list there, so `svc.ns` never reaches `svc.ns.svc.cluster.local`.
			nodata = append(nodata, fmt.Sprintf("%s answers NODATA for %s %s", a.server, a.name, dns.TypeToString[a.qtype]))
			if !slices.Contains(nodataDomains, d) {
				nodataDomains = append(nodataDomains, d)
			}
		case a.msg.Rcode == dns.RcodeSuccess:
			// A wildcard: every name under d exists. Not incident 003, but worth knowing.
			wild = append(wild, fmt.Sprintf("%s at %s", a.name, a.server))
		default:
			unsure = append(unsure, a.String())
		}
	}
	if len(nodata) > 0 {
		return Result{Status: Problem, Message: fmt.Sprintf("search domain %s: %s", strings.Join(nodataDomains, ", "), strings.Join(nodata, "; ")),
			Hint: fmt.Sprintf("musl (Alpine) pods stop searching at a NODATA answer: drop %s from the search list (a DHCP domain: %s), or have the DNS server answer NXDOMAIN for names that do not exist", nodataDomains[0], hintApply)}
	}
	if len(unsure) > 0 {
		return Result{Status: Unknown, Message: "cannot tell for every search domain: " + strings.Join(unsure, "; ")}
	}
	msg := fmt.Sprintf("random names under %s get NXDOMAIN from %s (A and AAAA)", strings.Join(domains, ", "), addrList(ups))
	if len(wild) > 0 {
		msg = fmt.Sprintf("random names under %s get NXDOMAIN or a wildcard answer (%s) from %s", strings.Join(domains, ", "), strings.Join(wild, ", "), addrList(ups))
	}
	return Result{Status: OK, Message: msg}
}

// prefetch starts the search-domain probes before the checks ahead of this one: they ask the
// upstreams, not the cache, so nothing else has to come first.
func (searchNXDomain) prefetch(ctx context.Context, env *Env) func() {
	domains, ups := passedOnSearch(env), env.Plan.Facts.Upstreams
	if len(domains) == 0 || len(ups) == 0 {
		return nil
	}
	env.Host.nxQueries(env, domains, ups)
	return func() { env.Host.nxProbe(ctx, env, domains, ups) }
}

// nxQueries are the search-domain probes: a random name under each domain, A and AAAA, to every
// upstream, made once per report (on the goroutine that asks first: Run's).
func (l *Host) nxQueries(env *Env, domains []string, ups []netip.Addr) []answer {
	if l.nxQs != nil {
		return l.nxQs
	}
	for _, d := range domains {
		name := l.Random() + "." + d + "."
		for _, u := range ups {
			for _, t := range []uint16{dns.TypeA, dns.TypeAAAA} {
				l.nxQs = append(l.nxQs, answer{server: u, network: "udp", name: name, qtype: t})
			}
		}
	}
	return l.nxQs
}

// nxProbe asks the search-domain probes once per report, in parallel.
func (l *Host) nxProbe(ctx context.Context, env *Env, domains []string, ups []netip.Addr) []answer {
	qs := l.nxQueries(env, domains, ups)
	l.nxOnce.Do(func() { l.nx = l.query(ctx, qs) })
	return l.nx
}
