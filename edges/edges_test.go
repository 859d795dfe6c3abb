package edges

import (
	"fmt"
	"testing"

	"github.com/nodedns/nodedns/config"
	"github.com/nodedns/nodedns/policy"
	"github.com/nodedns/nodedns/reconcile"
)

// TestEveryActionHasAnActor: every action kind policy can put into a plan (policy.AllActions, which
// policy's own test keeps complete) is handled by exactly one actor of the live node New builds. An
// action no actor handles would silently stay "pending" on every node.
func TestEveryActionHasAnActor(t *testing.T) {
	e := New("/", config.Default(), nil)
	defer e.Close()
	for _, a := range policy.AllActions() {
		var by []string
		for _, ac := range e.Node.Actors {
			if ac.Handles(a) {
				by = append(by, fmt.Sprintf("%T", ac))
			}
		}
		if len(by) != 1 {
			t.Errorf("action %s (%T) is handled by %d actors %v, want exactly one", a.Kind(), a, len(by), by)
		}
	}
}

// TestNewSharesOneResolvedClient: on a live node the one Resolved of the run is its Source, its
// Actor, its only event source and its only closer (one D-Bus connection per run); under --root
// there are no event sources.
func TestNewSharesOneResolvedClient(t *testing.T) {
	e := New("/", config.Default(), nil)
	defer e.Close()
	if len(e.Events) != 1 {
		t.Fatalf("%d event sources on a live node, want 1 (the shared resolved client)", len(e.Events))
	}
	r, ok := e.Events[0].(*Resolved)
	if !ok {
		t.Fatalf("event source %T is not the resolved client", e.Events[0])
	}
	var asSource, asActor bool
	for _, s := range e.Node.Sources {
		asSource = asSource || s == reconcile.Source(r)
	}
	for _, a := range e.Node.Actors {
		asActor = asActor || a == reconcile.Actor(r)
	}
	if !asSource || !asActor || len(e.closers) != 1 || e.closers[0] != r {
		t.Errorf("the event source is the Source: %v, the Actor: %v, the closer: %v; want all", asSource, asActor, e.closers)
	}
	if err := e.Close(); err != nil {
		t.Errorf("close before any dial: %v", err)
	}

	er := New(t.TempDir(), config.Default(), nil)
	if len(er.Events) != 0 {
		t.Errorf("%d event sources under --root, want none", len(er.Events))
	}
}
