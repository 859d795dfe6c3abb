package main

import (
	"context"
	"log/slog"
	"testing"

	"github.com/nodedns/nodedns/config"
	"github.com/nodedns/nodedns/node"
	"github.com/nodedns/nodedns/policy"
	"github.com/nodedns/nodedns/reconcile"
)

// TestRunSharesOneResolvedClient: on a live node the daemon's only event source is the one
// reconcile.Resolved of the run, the same value that is its Source and Actor (one D-Bus connection
// per run); under --root it has none.
func TestRunSharesOneResolvedClient(t *testing.T) {
	g := &globals{cfg: config.Default(), log: slog.New(slog.DiscardHandler)}
	n := g.node()
	srcs := eventSources(g, n)
	if len(srcs) != 1 {
		t.Fatalf("%d event sources on a live node, want 1 (the shared resolved client): %#v", len(srcs), srcs)
	}
	r, ok := srcs[0].(*reconcile.Resolved)
	if !ok || r != liveResolved(g) {
		t.Fatalf("event source %T is not the run's shared resolved client", srcs[0])
	}
	var asSource, asActor bool
	for _, s := range n.Sources {
		asSource = asSource || s == reconcile.Source(r)
	}
	for _, a := range n.Actors {
		asActor = asActor || a == reconcile.Actor(r)
	}
	if !asSource || !asActor {
		t.Errorf("the event source is the Source: %v, the Actor: %v; want both", asSource, asActor)
	}

	gr := &globals{root: t.TempDir(), cfg: config.Default(), log: slog.New(slog.DiscardHandler)}
	if srcs := eventSources(gr, gr.node()); len(srcs) != 0 {
		t.Errorf("%d event sources under --root, want none", len(srcs))
	}
}

type countingCloser struct{ closed int }

func (c *countingCloser) Name() string                                  { return "counting" }
func (c *countingCloser) Observe(context.Context, *node.Snapshot) error { return nil }
func (c *countingCloser) Handles(string) bool                           { return false }
func (c *countingCloser) Do(context.Context, policy.Action) error       { return nil }
func (c *countingCloser) Close() error                                  { c.closed++; return nil }

// TestCloseLiveClosesEachOnce: a connection registered as both Source and Actor is closed once.
func TestCloseLiveClosesEachOnce(t *testing.T) {
	c, other := &countingCloser{}, &countingCloser{}
	n := &reconcile.Node{Sources: []reconcile.Source{c, other}, Actors: []reconcile.Actor{c}}
	closeLive(&globals{log: slog.New(slog.DiscardHandler)}, n)
	if c.closed != 1 || other.closed != 1 {
		t.Errorf("closed %d and %d times, want once each", c.closed, other.closed)
	}
}
