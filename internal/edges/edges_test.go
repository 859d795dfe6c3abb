package edges

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/policy"
	"github.com/nodedns/nodedns/internal/reconcile"
	"github.com/nodedns/nodedns/internal/store"
)

// allActions has one value of every action kind policy declares; TestEveryActionHasAnActor holds
// the list to policy's source.
var allActions = []policy.Action{policy.RestartResolved{}, policy.SetLinkDNS{}, policy.SetLinkDomains{}, policy.NetplanApply{},
	policy.NetworkctlReload{}, policy.ReloadNetworkManager{}, policy.RestartKubelet{}}

// declaredActions names the action types policy's source declares: every type with the unexported
// action method.
func declaredActions(t *testing.T) []string {
	t.Helper()
	dir := filepath.Join("..", "policy")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var declared []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || fd.Name.Name != "action" {
				continue
			}
			typ := fd.Recv.List[0].Type
			if st, ok := typ.(*ast.StarExpr); ok {
				typ = st.X
			}
			declared = append(declared, typ.(*ast.Ident).Name)
		}
	}
	if len(declared) == 0 {
		t.Fatal("found no action types: the parse above is broken")
	}
	slices.Sort(declared)
	return declared
}

// TestEveryActionHasAnActor: every action kind policy can put into a plan (every type policy's
// source declares as one, each with its own kind) is handled by exactly one actor of the live node
// New builds. An action no actor handles would silently stay "pending" on every node.
func TestEveryActionHasAnActor(t *testing.T) {
	var listed []string
	kinds := map[string]string{}
	for _, a := range allActions {
		name := reflect.TypeOf(a).Name()
		listed = append(listed, name)
		if other, dup := kinds[a.Kind()]; dup {
			t.Errorf("%s and %s share the kind %q", other, name, a.Kind())
		}
		kinds[a.Kind()] = name
	}
	slices.Sort(listed)
	if diff := cmp.Diff(declaredActions(t), listed); diff != "" {
		t.Errorf("allActions does not list exactly the action types policy declares (-declared +listed):\n%s", diff)
	}
	// docs/contract.md "Plan JSON" names every kind a script may meet in actions[].Kind.
	contract, err := os.ReadFile("../../docs/contract.md")
	if err != nil {
		t.Fatal(err)
	}
	var row string
	for _, l := range strings.Split(string(contract), "\n") {
		if strings.HasPrefix(l, "| `actions[].Kind` |") {
			row = l
		}
	}
	for _, a := range allActions {
		if !strings.Contains(row, "`"+a.Kind()+"`") {
			t.Errorf("docs/contract.md's actions[].Kind row does not name %q (%T)", a.Kind(), a)
		}
	}
	e := New("/", config.Default(), nil)
	defer e.Close()
	for _, a := range allActions {
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
