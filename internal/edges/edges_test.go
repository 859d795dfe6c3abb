package edges

import (
	"fmt"
	"testing"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/policy"
	"github.com/nodedns/nodedns/internal/reconcile"
	"github.com/nodedns/nodedns/internal/store"
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

// TestNewSharesOneClientPerIntegration: on a live node the one Resolved of the run is its Source,
// its Actor, an event source and a closer, and so is the one NetworkManager (which also validates
// zz-nodedns.conf): one D-Bus connection per integration and run; under --root there are no event
// sources.
func TestNewSharesOneClientPerIntegration(t *testing.T) {
	e := New("/", config.Default(), nil)
	defer e.Close()
	if len(e.Events) != 2 {
		t.Fatalf("%d event sources on a live node, want 2 (the shared resolved and NetworkManager clients)", len(e.Events))
	}
	r, ok := e.Events[0].(*Resolved)
	if !ok {
		t.Fatalf("event source %T is not the resolved client", e.Events[0])
	}
	nm, ok := e.Events[1].(*NetworkManager)
	if !ok {
		t.Fatalf("event source %T is not the NetworkManager client", e.Events[1])
	}
	for _, x := range []any{r, nm} {
		var asSource, asActor, asCloser bool
		for _, s := range e.Node.Sources {
			asSource = asSource || s == x
		}
		for _, a := range e.Node.Actors {
			asActor = asActor || a == x
		}
		for _, c := range e.closers {
			asCloser = asCloser || c == x
		}
		if !asSource || !asActor || !asCloser {
			t.Errorf("%T: the event source is the Source: %v, the Actor: %v, a closer: %v; want all", x, asSource, asActor, asCloser)
		}
	}
	var asValidator bool
	for _, v := range e.Node.Validators {
		asValidator = asValidator || v == reconcile.Validator(nm)
	}
	if !asValidator || len(e.closers) != 2 {
		t.Errorf("NetworkManager validates: %v; closers %v", asValidator, e.closers)
	}
	if err := e.Close(); err != nil {
		t.Errorf("close before any dial: %v", err)
	}

	er := New(t.TempDir(), config.Default(), nil)
	if len(er.Events) != 0 {
		t.Errorf("%d event sources under --root, want none", len(er.Events))
	}
}

// testStore is a node store under root, as edges.New makes one.
func testStore(root string) *store.Store { return reconcile.NewStore(root, nil, config.Default()) }
