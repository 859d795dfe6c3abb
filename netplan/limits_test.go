package netplan

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// deepFlow is a netplan file nested n levels deep in flow style ({a: {a: ...}}), the shape that
// kept `netplan generate` busy for 50 s at 100,000 levels.
func deepFlow(n int) []byte {
	return []byte("network:\n  ethernets:\n    x: " + strings.Repeat("{a: ", n) + "1" + strings.Repeat("}", n) + "\n")
}

// deepBlock nests n block mappings under an interface, two spaces a level.
func deepBlock(n int) []byte {
	var b strings.Builder
	b.WriteString("network:\n  ethernets:\n    x:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "%sk%d:\n", strings.Repeat("  ", i+3), i)
	}
	fmt.Fprintf(&b, "%sv: 1\n", strings.Repeat("  ", n+3))
	return []byte(b.String())
}

func TestDepthLimit(t *testing.T) {
	limit := fmt.Sprintf("nested deeper than %d levels", MaxDepth)
	tests := []struct {
		name    string
		data    []byte
		wantErr string // "" accepted
	}{
		// Real netplan structures stay far below the limit.
		{"routing policy", []byte("network:\n  ethernets:\n    e0:\n      routing-policy:\n        - {from: 10.0.0.0/8, table: 100}\n"), ""},
		{"just under", deepBlock(MaxDepth - 4), ""},
		{"block over", deepBlock(MaxDepth), limit},
		{"flow over", deepFlow(MaxDepth), limit},
		// Beyond the YAML library's own bound (10,000): still our error, naming the limit.
		{"flow 100,000 deep", deepFlow(100000), limit},
		{"sequences 100,000 deep", []byte("network: " + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + "\n"), limit},
		{"aliases", []byte("network:\n  ethernets:\n    x: &a {a: {a: {a: 1}}}\n    y: " + strings.Repeat("[", MaxDepth-3) + "*a" + strings.Repeat("]", MaxDepth-3) + "\n"), limit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decode(pathA, tt.data)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("decode: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.HasPrefix(err.Error(), pathA) {
				t.Fatalf("decode: %v; want an error naming %s and %q", err, pathA, tt.wantErr)
			}
			if !errors.Is(err, ErrLimit) {
				t.Errorf("%v is not ErrLimit", err)
			}
		})
	}
}

// TestRunnerRefusesUnboundedFiles: a file over nodedns's bounds never reaches netplan. The netplan
// binary here is a script that records being run: it must not be.
func TestRunnerRefusesUnboundedFiles(t *testing.T) {
	root, bin := t.TempDir(), filepath.Join(t.TempDir(), "netplan")
	ran := filepath.Join(t.TempDir(), "ran")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\ntouch "+ran+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "etc/netplan"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := Runner{Bin: bin, TempDir: t.TempDir()}
	ctx := context.Background()

	// The node's own file is too deep: Generate and Get refuse it.
	if err := os.WriteFile(filepath.Join(root, "etc/netplan/50-deep.yaml"), deepFlow(100000), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := r.Generate(ctx, root, nil); !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "/etc/netplan/50-deep.yaml") {
		t.Errorf("Generate: %v; want ErrLimit naming the file", err)
	}
	if _, err := r.Get(ctx, root, nil); !errors.Is(err, ErrLimit) {
		t.Errorf("Get: %v; want ErrLimit", err)
	}
	t.Logf("refused in %v", time.Since(start))

	// A change over the bounds is refused too.
	if err := os.Remove(filepath.Join(root, "etc/netplan/50-deep.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := r.Validate(ctx, root, NodednsFile, deepBlock(MaxDepth+1)); !errors.Is(err, ErrLimit) {
		t.Errorf("Validate: %v; want ErrLimit", err)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("netplan ran on a file over nodedns's bounds")
	}
	// The script does run for a bounded tree: the check above can fail.
	if err := r.Validate(ctx, root, NodednsFile, []byte("network: {version: 2}\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ran); err != nil {
		t.Errorf("netplan did not run on a bounded tree: %v", err)
	}
}
