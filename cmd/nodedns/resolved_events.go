package main

import (
	"io"
	"reflect"
	"slices"

	"github.com/nodedns/nodedns/reconcile"
)

// The resolved client's events reach `nodedns run` without a registration of their own: the one
// reconcile.Resolved per run (liveResolved) is the Source, the Actor and, through its Events
// method, the reconcile.EventSource, and eventSources picks it up once from the node's sources.
// closeLive ends its bus connection when the daemon stops.

// closeLive closes the live integrations that hold a connection (io.Closer: the shared resolved
// D-Bus client), each once, so the daemon's bus connection and its goroutines end with Run rather
// than with the process.
func closeLive(g *globals, n *reconcile.Node) {
	var seen []any
	for _, x := range append(append([]any{}, anySlice(n.Sources)...), anySlice(n.Actors)...) {
		c, ok := x.(io.Closer)
		if !ok {
			continue
		}
		if reflect.TypeOf(x).Comparable() {
			if slices.Contains(seen, x) {
				continue
			}
			seen = append(seen, x)
		}
		if err := c.Close(); err != nil {
			g.log.Warn("closing a live connection failed", "what", reflect.TypeOf(x).String(), "err", err)
		}
	}
}

func anySlice[T any](xs []T) []any {
	out := make([]any, 0, len(xs))
	for _, x := range xs {
		out = append(out, x)
	}
	return out
}
