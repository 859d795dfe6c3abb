package netplan

import (
	"cmp"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"
)

// FuzzParse feeds any bytes as two netplan files: Parse must not panic, and
// whatever it accepts must be coherent and encodable for the writer.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "nodes", "*", "*", "netplan", "*.yaml"))
	for _, p := range seeds {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, []byte("network: {ethernets: {eth0: {nameservers: {search: [x]}}}}\n"))
	}
	for _, c := range errorCases {
		f.Add([]byte(c.a), []byte(c.b))
	}
	for _, c := range semanticCases {
		second := ""
		if len(c.docs) > 1 {
			second = c.docs[1]
		}
		f.Add([]byte(c.docs[0]), []byte(second))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		cfg, err := Parse([]Doc{{Path: pathA, Data: a}, {Path: pathB, Data: b}})
		if err != nil {
			if cfg != nil {
				t.Fatalf("config returned with error %v", err)
			}
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error %T is not an *Error: %v", err, err)
			}
			return
		}
		if !slices.IsSortedFunc(cfg.Interfaces, func(x, y *Interface) int {
			return cmp.Or(cmp.Compare(x.Type, y.Type), cmp.Compare(x.ID, y.ID))
		}) {
			t.Fatalf("interfaces not sorted")
		}
		seen := map[string]bool{}
		for _, i := range cfg.Interfaces {
			if seen[i.ID] {
				t.Fatalf("duplicate ID %q", i.ID)
			}
			seen[i.ID] = true
			if i.Renderer != RendererNetworkd && i.Renderer != RendererNetworkManager {
				t.Fatalf("%s: renderer %q", i.ID, i.Renderer)
			}
			if len(i.Files) == 0 || i.Line < 1 {
				t.Fatalf("%s: no origin (%v, line %d)", i.ID, i.Files, i.Line)
			}
			if cfg.Interface(i.ID) != i {
				t.Fatalf("Interface(%q) does not find it", i.ID)
			}
			if m := cfg.MemberOf(i.ID); m != "" && cfg.Interface(m) == nil {
				t.Fatalf("%s: member of undefined %q", i.ID, m)
			}
		}
		if hasAlias(cfg.Root) {
			t.Fatalf("alias left in Root")
		}
		out, err := yaml.Marshal(cfg.Root)
		if err != nil {
			t.Fatalf("marshal Root: %v", err)
		}
		var back yaml.Node
		if err := yaml.Unmarshal(out, &back); err != nil {
			t.Fatalf("Root does not read back: %v\n%s", err, out)
		}
	})
}

func hasAlias(n *yaml.Node) bool {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return true
	}
	for _, c := range n.Content {
		if hasAlias(c) {
			return true
		}
	}
	return false
}
