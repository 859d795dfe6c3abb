package netplancmd

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/netplan"
)

const cloudInit = "/etc/netplan/50-cloud-init.yaml"

// writeNodeFile writes a netplan file under root with mode 0600, as netplan wants them (it warns on
// anything readable by others).
func writeNodeFile(t *testing.T, root, nodePath string, data []byte) {
	t.Helper()
	full := filepath.Join(root, nodePath)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestGenerateRejects: netplan's own error comes back with its position, as node paths.
func TestGenerateRejects(t *testing.T) {
	if _, err := exec.LookPath("netplan"); err != nil {
		t.Skip("netplan is not installed (apt-get install --no-install-recommends netplan.io)")
	}
	root := t.TempDir()
	writeNodeFile(t, root, cloudInit, []byte("network:\n  ethernets:\n    eth0: {dhcp4: true}\n"))
	var r Runner
	bad := []byte("network:\n  ethernets:\n    eth0:\n      dhcp4-overrides: {use-dns: maybe}\n")
	err := r.Validate(context.Background(), root, netplan.NodednsFile, bad)
	var ge *GenerateError
	if !errors.As(err, &ge) {
		t.Fatalf("Validate = %v, want a *GenerateError", err)
	}
	if !strings.HasPrefix(ge.Message, netplan.NodednsFile+":4:") || !strings.Contains(ge.Message, "Error in network definition") {
		t.Errorf("message %q does not name %s:4:col", ge.Message, netplan.NodednsFile)
	}
	if strings.Contains(ge.Output, root) {
		t.Errorf("output still names the temporary root:\n%s", ge.Output)
	}
	// A semantic error of networkd's backend has no position; netplan's line is kept as it is.
	err = r.Validate(context.Background(), root, netplan.NodednsFile, []byte("network:\n  ethernets:\n    eth0: {dhcp6: true, dhcp4-overrides: {use-domains: false}}\n"))
	if !errors.As(err, &ge) || !strings.Contains(ge.Message, "networkd requires that use-domains has the same value") {
		t.Errorf("Validate = %v, want networkd's same-value error", err)
	}
	// The node's tree is never touched by a validation.
	cfg, err, _, _ := netplan.LoadSplit(nodefs.NewReader(root), "")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{cloudInit}, cfg.Files); diff != "" {
		t.Errorf("files under root changed (-want +got):\n%s", diff)
	}
	// And an accepted file renders networkd's UseDomains=false.
	good, _ := netplan.DropIn{Overrides: []netplan.Override{{ID: "eth0", Type: "ethernets", DHCP4: true}}}.Render()
	gen, err := r.Generate(context.Background(), root, map[string][]byte{netplan.NodednsFile: good})
	if err != nil {
		t.Fatal(err)
	}
	if n := string(gen["/run/systemd/network/10-netplan-eth0.network"]); !strings.Contains(n, "\nUseDomains=false\n") {
		t.Errorf("generated network file lacks UseDomains=false:\n%s", n)
	}
	if _, err := (Runner{Bin: filepath.Join(root, "no-netplan")}).Generate(context.Background(), root, nil); err == nil || !strings.Contains(err.Error(), "install netplan.io") {
		t.Errorf("missing netplan: %v", err)
	}
}
