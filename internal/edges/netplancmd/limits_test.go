package netplancmd

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/testutil/fixture"

	"github.com/nodedns/nodedns/netplan"
)

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
	if err := os.WriteFile(filepath.Join(root, "etc/netplan/50-deep.yaml"), fixture.DeepFlowNetplan(100000), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := r.Generate(ctx, root, nil); !errors.Is(err, netplan.ErrLimit) || !strings.Contains(err.Error(), "/etc/netplan/50-deep.yaml") {
		t.Errorf("Generate: %v; want netplan.ErrLimit naming the file", err)
	}
	if _, err := r.Get(ctx, root, nil); !errors.Is(err, netplan.ErrLimit) {
		t.Errorf("Get: %v; want netplan.ErrLimit", err)
	}
	t.Logf("refused in %v", time.Since(start))

	// A change over the bounds is refused too.
	if err := os.Remove(filepath.Join(root, "etc/netplan/50-deep.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := r.Validate(ctx, root, netplan.NodednsFile, fixture.DeepBlockNetplan(netplan.MaxDepth+1)); !errors.Is(err, netplan.ErrLimit) {
		t.Errorf("Validate: %v; want netplan.ErrLimit", err)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("netplan ran on a file over nodedns's bounds")
	}
	// The script does run for a bounded tree: the check above can fail.
	if err := r.Validate(ctx, root, netplan.NodednsFile, []byte("network: {version: 2}\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ran); err != nil {
		t.Errorf("netplan did not run on a bounded tree: %v", err)
	}
}
