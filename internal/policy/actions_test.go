package policy

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestAllActionsIsComplete: AllActions lists every action type this package declares (every type with
// the unexported action method), so the test in edges that every kind has an actor sees a new kind
// the moment policy can emit it.
func TestAllActionsIsComplete(t *testing.T) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, 0)
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
	var listed []string
	kinds := map[string]string{}
	for _, a := range AllActions() {
		name := reflect.TypeOf(a).Name()
		listed = append(listed, name)
		if other, dup := kinds[a.Kind()]; dup {
			t.Errorf("%s and %s share the kind %q", other, name, a.Kind())
		}
		kinds[a.Kind()] = name
	}
	slices.Sort(declared)
	slices.Sort(listed)
	if len(declared) == 0 {
		t.Fatal("found no action types: the parse above is broken")
	}
	if diff := cmp.Diff(declared, listed); diff != "" {
		t.Errorf("AllActions does not list exactly the declared action types (-declared +listed):\n%s", diff)
	}
}
