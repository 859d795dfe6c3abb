package netplan

import (
	"errors"
	"fmt"
	"strings"
	"testing"
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
