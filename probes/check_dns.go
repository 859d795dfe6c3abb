package probes

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/miekg/dns"

	"github.com/nodedns/nodedns/resolvconf"
)

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
	var qs []answer
	for _, d := range domains {
		name := env.Host.Random() + "." + d + "."
		for _, u := range ups {
			for _, t := range []uint16{dns.TypeA, dns.TypeAAAA} {
				qs = append(qs, answer{server: u, network: "udp", name: name, qtype: t})
			}
		}
	}
	var nodata, unsure, wild []string
	var nodataDomains []string
	for i, a := range env.Host.query(ctx, qs) {
		d := domains[i/(2*len(ups))]
		switch {
		case a.err != nil:
			unsure = append(unsure, a.String())
		case a.msg.Rcode == dns.RcodeNameError:
		case a.msg.Rcode == dns.RcodeSuccess && len(a.msg.Answer) == 0:
			// Seed 003: NOERROR without records (NODATA) for a name that does not exist. musl stops
			// walking the search list there, so `svc.ns` never reaches `svc.ns.svc.cluster.local`.
			nodata = append(nodata, fmt.Sprintf("%s answers NODATA for %s %s", a.server, a.name, dns.TypeToString[a.qtype]))
			if !slices.Contains(nodataDomains, d) {
				nodataDomains = append(nodataDomains, d)
			}
		case a.msg.Rcode == dns.RcodeSuccess:
			// A wildcard: every name under d exists. Not seed 003, but worth knowing.
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
