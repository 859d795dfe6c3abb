package netplan

import (
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nodedns/nodedns/internal/nodefs"
)

// TestAgainstNetplanGet checks the merge against netplan itself: the
// fixtures and the semantic cases netplan accepts are written to a temporary
// root, `netplan get --root-dir` prints netplan's merged state, and parsing
// that output must give the same interfaces as parsing the files.
func TestAgainstNetplanGet(t *testing.T) {
	bin := netplanBinary(t)
	if testing.Short() {
		t.Skip("runs netplan once per case (about a second each)")
	}
	t.Run("fixtures", func(t *testing.T) {
		for _, f := range fixtures {
			t.Run(f.name, func(t *testing.T) {
				t.Parallel()
				src := filepath.Join("testdata", "nodes", f.name)
				rd := nodefs.NewReader(src)
				found, shadowed, err := find(rd)
				if err != nil {
					t.Fatal(err)
				}
				root := t.TempDir()
				for _, p := range slices.Concat(found, shadowed) {
					data, err := ReadFile(rd, p)
					if err != nil {
						t.Fatal(err)
					}
					writeNodeFile(t, root, p, data)
				}
				ours, err := load(nodefs.NewReader(root))
				if err != nil {
					t.Fatal(err)
				}
				compareWithNetplan(t, bin, root, ours.Interfaces)
			})
		}
	})
	t.Run("semantics", func(t *testing.T) {
		for _, c := range semanticCases {
			if !c.netplan {
				continue
			}
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				root := t.TempDir()
				for i, d := range c.docs {
					writeNodeFile(t, root, "/etc/netplan/"+string(rune('a'+i))+".yaml", []byte(d))
				}
				ours, err := load(nodefs.NewReader(root))
				if err != nil {
					t.Fatal(err)
				}
				compareWithNetplan(t, bin, root, ours.Interfaces)
			})
		}
	})
}

func compareWithNetplan(t *testing.T, bin, root string, ours []*Interface) {
	t.Helper()
	cmd := exec.Command(bin, "get", "--root-dir", root, "all")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("netplan get: %v\n%s", err, out)
	}
	theirs, err := Parse([]Doc{{Path: "netplan-get", Data: out}})
	if err != nil {
		t.Fatalf("parse netplan get output: %v\n%s", err, out)
	}
	opts := cmp.Options{
		cmpAddr,
		// Where the definitions came from is ours only.
		cmp.FilterPath(func(p cmp.Path) bool {
			s := p.Last().String()
			return s == ".Files" || s == ".Line"
		}, cmp.Ignore()),
		// netplan does not keep the interfaces: list; `get` prints the
		// members in its own order.
		cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Members" },
			cmp.Transformer("sorted", func(s []string) []string { return slices.Sorted(slices.Values(s)) })),
	}
	if diff := cmp.Diff(theirs.Interfaces, ours, opts...); diff != "" {
		t.Errorf("netplan get (-) vs ours (+):\n%s\nnetplan get printed:\n%s", diff, out)
	}
}
