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

func TestUnitValues(t *testing.T) {
	unit := "[Unit]\nBefore=a.service\n# Before=commented.service\nBefore=kubelet.service b.service\n[Service]\nBefore=not-unit.service\n[Unit]\nAfter=x\n"
	if diff := cmp.Diff([]string{"a.service", "kubelet.service", "b.service"}, unitValues([]byte(unit), "Unit", "Before")); diff != "" {
		t.Error(diff)
	}
	// An empty assignment does not reset a dependency list: systemd 252 then still orders the unit
	// before a and b (systemd.unit(5); config_parse_unit_deps).
	if got := unitValues([]byte("[Unit]\nBefore=a\nBefore=\nBefore=b\n"), "Unit", "Before"); !cmp.Equal(got, []string{"a", "b"}) {
		t.Errorf("an empty Before=: %v", got)
	}
}

func FuzzUnitValues(f *testing.F) {
	f.Add([]byte("[Unit]\nBefore=kubelet.service\n"))
	f.Add([]byte("[Unit\nBefore\n=\n[]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, v := range unitValues(data, "Unit", "Before") {
			if v == "" {
				t.Fatal("empty value")
			}
		}
	})
}

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
	must(os.WriteFile(filepath.Join(root, "etc/systemd/system/nodedns.service.d/10-local.conf"), []byte("[Unit]\nBefore=containerd.service\n"), 0o644))
	must(os.Symlink("/lib/systemd/system/nodedns.service", filepath.Join(root, "etc/systemd/system/multi-user.target.wants/nodedns.service")))
	s := Observe(nodefs.NewReader(root), config.Default(), time.Now())
	want := Unit{Path: "/lib/systemd/system/nodedns.service", Enabled: true, WantedBy: []string{"multi-user.target"}, Before: []string{"kubelet.service", "containerd.service"}}
	if diff := cmp.Diff(want, s.Unit); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
