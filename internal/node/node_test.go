package node

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/nodefs"
)

// TestObserveUnitInsideRoot: the enable symlink is absolute, as systemctl makes it, and must be
// followed inside the root, not on the host.
func TestObserveUnitInsideRoot(t *testing.T) {
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "lib/systemd/system"), 0o755))
	must(os.MkdirAll(filepath.Join(root, "etc/systemd/system/multi-user.target.wants"), 0o755))
	must(os.MkdirAll(filepath.Join(root, "etc/systemd/system/nodedns.service.d"), 0o755))
	must(os.WriteFile(filepath.Join(root, "lib/systemd/system/nodedns.service"), []byte("[Unit]\nBefore=kubelet.service\n"), 0o644))
	// A continued line with a comment inside, as systemd reads it (the lexer of package systemd).
	must(os.WriteFile(filepath.Join(root, "etc/systemd/system/nodedns.service.d/10-local.conf"), []byte("[Unit]\nBefore=containerd.service \\\n# crio.service\n  docker.service\n"), 0o644))
	must(os.Symlink("/lib/systemd/system/nodedns.service", filepath.Join(root, "etc/systemd/system/multi-user.target.wants/nodedns.service")))
	s := Observe(nodefs.NewReader(root), config.Default(), time.Now())
	want := Unit{Path: "/lib/systemd/system/nodedns.service", Enabled: true, WantedBy: []string{"multi-user.target"}, Before: []string{"kubelet.service", "containerd.service", "docker.service"}}
	if diff := cmp.Diff(want, s.Unit); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestObserveUnitSystemdRefuses: a unit file systemd refuses to load (here a drop-in's bad section
// header) is a problem of the unit source, and Before= holds what was read before it.
func TestObserveUnitSystemdRefuses(t *testing.T) {
	root := t.TempDir()
	for p, data := range map[string]string{
		"lib/systemd/system/nodedns.service":               "[Unit]\nBefore=kubelet.service\n",
		"etc/systemd/system/nodedns.service.d/broken.conf": "[Unit\nBefore=containerd.service\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := Observe(nodefs.NewReader(root), config.Default(), time.Now())
	if diff := cmp.Diff([]string{"kubelet.service"}, s.Unit.Before); diff != "" {
		t.Errorf("Before (-want +got):\n%s", diff)
	}
	want := []Problem{{Path: "/etc/systemd/system/nodedns.service.d/broken.conf", Line: 1, Source: SourceUnit,
		Msg: `invalid section header "[Unit": systemd refuses to load the unit`}}
	if diff := cmp.Diff(want, s.ProblemsFrom(SourceUnit)); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}
