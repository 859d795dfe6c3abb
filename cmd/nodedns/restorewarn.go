package main

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"github.com/nodedns/nodedns/internal/reconcile"
	"github.com/nodedns/nodedns/internal/store"
)

// warnRestoredLoops looks at the node as restore left it and warns (stderr and the log) when a file
// it gave back lists a loop address: a purge on a kubespray host_resolvconf node puts back
// `nameserver 169.254.25.10`, and the operator must hear that the loop is back (docs/incidents.md,
// incident 002), not find out at the next reboot.
func warnRestoredLoops(ctx context.Context, g *globals, n *reconcile.Node, res []store.RestoreResult) {
	restored := map[string]bool{}
	for _, r := range res {
		if r.Action == store.ActionRestored {
			restored[r.Path] = true
		}
	}
	if len(restored) == 0 {
		return
	}
	s, p := n.Observe(ctx)
	loops := func(addrs []netip.Addr) []string {
		var out []string
		for _, a := range addrs {
			if p.Facts.IsLoop(a, false) {
				out = append(out, fmt.Sprintf("%s (%s)", a, p.Facts.LoopKind(a)))
			}
		}
		return out
	}
	warn := func(path string, bad []string) {
		msg := fmt.Sprintf("restored %s lists %s: the loop nodedns kept out is back; run `nodedns apply` (or reinstall nodedns) to keep it out", path, strings.Join(bad, ", "))
		fmt.Fprintln(g.stderr, "nodedns: warning: "+msg)
		g.log.Warn("restored file lists a loop address", "path", path, "loop", bad)
	}
	if rc := s.ResolvConf; rc.File != nil && (restored[rc.Path] || restored[rc.Target]) {
		if bad := loops(rc.File.Nameservers()); len(bad) > 0 {
			warn(rc.Path, bad)
		}
	}
	if r := s.ResolvedOthers; r != nil {
		for _, src := range r.DNSSources {
			if !restored[src.Path] {
				continue
			}
			var addrs []netip.Addr
			for _, sv := range r.DNS {
				addrs = append(addrs, sv.Addr)
			}
			if bad := loops(addrs); len(bad) > 0 {
				warn(src.Path, bad)
				break
			}
		}
	}
}
