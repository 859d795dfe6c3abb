package main

import (
	"sync"

	"github.com/nodedns/nodedns/reconcile"
)

// The live systemd-resolved integration is one reconcile.Resolved per command run: the source, the
// actor and the reverter share its single D-Bus connection.
var (
	resolvedMu  sync.Mutex
	resolvedFor = map[*globals]*reconcile.Resolved{}
)

func liveResolved(g *globals) *reconcile.Resolved {
	resolvedMu.Lock()
	defer resolvedMu.Unlock()
	if r, ok := resolvedFor[g]; ok {
		return r
	}
	r := &reconcile.Resolved{RestartCommand: g.cfg.Resolved.RestartCommand, Root: "/", Log: g.log}
	resolvedFor[g] = r
	return r
}

func init() {
	sourceFactories = append(sourceFactories, func(g *globals) reconcile.Source { return liveResolved(g) })
	actorFactories = append(actorFactories, func(g *globals) reconcile.Actor { return liveResolved(g) })
}
