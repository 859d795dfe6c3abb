package netplan

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nodedns/nodedns/internal/testutil/fixture"
)

func TestDepthLimit(t *testing.T) {
	limit := fmt.Sprintf("nested deeper than %d levels", MaxDepth)
	tests := []struct {
		name    string
		data    []byte
		wantErr string // "" accepted
	}{
		// Real netplan structures stay far below the limit.
		{"routing policy", []byte("network:\n  ethernets:\n    e0:\n      routing-policy:\n        - {from: 10.0.0.0/8, table: 100}\n"), ""},
		{"just under", fixture.DeepBlockNetplan(MaxDepth - 4), ""},
		{"block over", fixture.DeepBlockNetplan(MaxDepth), limit},
		{"flow over", fixture.DeepFlowNetplan(MaxDepth), limit},
		// Beyond the YAML library's own bound (10,000): still our error, naming the limit.
		{"flow 100,000 deep", fixture.DeepFlowNetplan(100000), limit},
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
