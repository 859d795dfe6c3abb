// Package probes is nodedns's self-check: one small type per check id of docs/contract.md, all sharing one
// observed snapshot. The ids, statuses and JSON shape are a contract for Ansible, kubespray and
// node-problem-detector: keep them stable.
//
// The files: probes.go is the report, the Env every check reads and the message helpers the checks
// share; check_<family>.go holds the checks of one family of ids (resolvconf, kubelet, resolved,
// dhcp, addressing, nodelocaldns, pods, dns, boot); parse_<format>.go a parser of outside input the
// live checks use (iptables-save, the Corefile, /proc's socket tables and process stat): pure
// functions of bytes, with no check logic, each with a table test and the decoders with a fuzz
// target (as CoreDNS's loop plugin parses in setup.go and acts in loop.go). host.go is the running
// node as the live checks reach it: its seams, in pure terms (these types, netstate's and
// podprobe's records), and what they read once per report; internal/live fills the seams with the
// real node (netlink, nf_tables, iptables-legacy-save, DNS, /proc, podnet), so this package imports
// none of that. baseline.go is boot.persistence's state file, writers.go the daemon's backoffs
// shown on the checks they break.
package probes

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/internal/policy"
	"github.com/nodedns/nodedns/resolvconf"
)

// Status of a check or a report.
type Status string

// Statuses (docs/contract.md "Check ids").
const (
	OK      Status = "ok"
	Problem Status = "problem"
	Unknown Status = "unknown"
	Skipped Status = "skipped"
)

// Result is one check's answer.
type Result struct {
	ID      string `json:"id"`
	Status  Status `json:"status"`
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"`
}

// Report is the whole self-check.
type Report struct {
	Status Status   `json:"status"`
	Checks []Result `json:"checks"`
}

// Env is what every check reads: one snapshot, the config and the plan derived from them.
type Env struct {
	Snapshot *node.Snapshot
	Config   config.Config
	Plan     policy.Plan
	// Live is false under --root: live-only checks (netlink, D-Bus, DNS queries) are skipped then.
	Live bool
	// Host is the running node for the live checks (netlink, nf_tables, DNS probes, /proc, the boot
	// id and the reboot baseline); nil under --root, where those checks report skipped.
	Host *Host
	// Files reads the node's files that are no input of the snapshot (the daemon's writers state);
	// nil: they are not read.
	Files nodefs.Reader
	// Log gets what the report has no place for (an unreadable state file); nil discards it.
	Log *slog.Logger
}

func (env *Env) log() *slog.Logger {
	if env.Log != nil {
		return env.Log
	}
	return slog.New(slog.DiscardHandler)
}

// Check is one id of docs/contract.md.
type Check interface {
	ID() string
	Run(ctx context.Context, env *Env) Result
}

// IDs lists every check id in report order (docs/contract.md "Check ids"), the ids of All. Every one
// appears once in a report.
var IDs = checkIDs(All())

func checkIDs(cs []Check) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.ID())
	}
	return out
}

// All returns every check, in report order.
func All() []Check {
	return []Check{
		resolvConfLoop{}, resolvConfSearch{}, resolvConfNameservers{}, kubeletResolvConf{},
		resolvedDNS{}, resolvedDomains{}, dhcpSearch{}, addressingStatic{},
		nodelocalInterface{}, nodelocalRoutes{}, nodelocalIptables{}, nodelocalDNS{},
		nodelocalPods{}, nodelocalStandby{}, dnsLoop{}, searchNXDomain{}, bootPersistence{},
	}
}

// Run runs the checks and folds their statuses: problem if any is, else unknown if any is, else ok.
func Run(ctx context.Context, env *Env, checks []Check) Report {
	r := Report{Status: OK}
	// The live reads that do not depend on one another start at once (the firewall, the cache's
	// probes, the search-domain probes); each check then waits only for what it reads, so a report
	// costs its slowest read, not their sum.
	var wg sync.WaitGroup
	defer wg.Wait()
	if env.Host != nil {
		for _, c := range checks {
			if p, ok := c.(prefetcher); ok {
				if f := p.prefetch(ctx, env); f != nil {
					wg.Go(f)
				}
			}
		}
	}
	for _, c := range checks {
		res := c.Run(ctx, env)
		res.ID = c.ID()
		r.Checks = append(r.Checks, res)
	}
	annotateWriters(env, &r)
	r.Status = Fold(r.Checks)
	return r
}

// prefetcher is a check whose live reads can run before its turn. prefetch prepares them on the
// caller's goroutine (the seams such as Random are called there) and returns what reads, to run
// concurrently with the checks before it, or nil; Run then finds the result read once (the Host's
// sync.Once caches).
type prefetcher interface {
	prefetch(ctx context.Context, env *Env) func()
}

// Fold computes the overall status of results.
func Fold(rs []Result) Status {
	st := OK
	for _, c := range rs {
		switch c.Status {
		case Problem:
			return Problem
		case Unknown:
			st = Unknown
		}
	}
	return st
}

// ExitCode is the check command's exit code as node-problem-detector reads it: 0 ok, 1 problem,
// 2 unknown.
func (r Report) ExitCode() int {
	switch r.Status {
	case OK:
		return 0
	case Problem:
		return 1
	default:
		return 2
	}
}

// NPDMaxLen is node-problem-detector's limit for a custom plugin's message that we keep to.
const NPDMaxLen = 80

// NPD renders one line of at most 80 characters: "ok", or the first problem (else the first unknown)
// with its id and how many others there are.
func (r Report) NPD() string {
	if r.Status == OK {
		return "ok"
	}
	var first *Result
	n := 0
	for i := range r.Checks {
		if r.Checks[i].Status == r.Status {
			if first == nil {
				first = &r.Checks[i]
			}
			n++
		}
	}
	line := first.ID + ": " + first.Message
	if n > 1 {
		suffix := fmt.Sprintf(" (+%d more)", n-1)
		line = clip(line, NPDMaxLen-len(suffix)) + suffix
	}
	return clip(line, NPDMaxLen)
}

func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	// Cut on a rune boundary and mark the cut.
	r := []rune(s)
	for len(string(r)) > n-3 {
		r = r[:len(r)-1]
	}
	return string(r) + "..."
}

// What follows is shared by the checks' messages.

// hintApply is the hint of every problem `nodedns apply` fixes.
const hintApply = "run `nodedns plan` to see the fix, `nodedns apply` to make it"

// loopAddrs names the loop addresses among addrs, each with its kind (cache, cluster DNS...).
func loopAddrs(env *Env, addrs []netip.Addr, withLoopback bool) []string {
	var out []string
	for _, a := range addrs {
		if env.Plan.Facts.IsLoop(a, withLoopback) {
			out = append(out, fmt.Sprintf("%s (%s)", a, env.Plan.Facts.LoopKind(a)))
		}
	}
	return out
}

// dhcpDomains are the domains some DHCP lease handed out, as messages show them (domainText).
func dhcpDomains(env *Env, domains []string) []string {
	var out []string
	for _, d := range domains {
		if env.Plan.Facts.IsDHCPDomain(d) {
			out = append(out, domainText(d))
		}
	}
	return out
}

// domainText shows a domain in a message: as it is when it is a domain name, else quoted and
// escaped (a hostile DHCP offer's word, docs/contract.md "The dhclient hook").
func domainText(d string) string {
	if resolvconf.ValidDomain(d) {
		return d
	}
	return strconv.Quote(d)
}

// unreadable is the answer of a check whose resolv.conf exists but cannot be read.
func unreadable(rf node.ResolvFile) Result {
	return Result{Status: Unknown, Message: fmt.Sprintf("%s cannot be read: %v", rf.Target, rf.Err), Hint: "fix or replace the file; nodedns changes nothing that depends on it"}
}

// describeResolv lists a resolv.conf's nameservers and where its symlink points.
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

// uniq drops repeats, keeping the first of each.
func uniq(s []string) []string {
	var out []string
	for _, x := range s {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}
