package reconcile

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/policy"
	"github.com/nodedns/nodedns/internal/store"
)

func TestMarks(t *testing.T) {
	if diff := cmp.Diff([]string{"Managed by nodedns", "Edited by nodedns"}, marks); diff != "" {
		t.Errorf("marks (-want +got):\n%s", diff)
	}
}

// TestLostBackupsAreLoud: files with nodedns's mark and no backup make restore fail naming them;
// other files (a large binary the packages keep in the state directory for purge, a file without the
// mark) are not judged; --forget removes what nodedns created and drops its header line elsewhere.
func TestLostBackupsAreLoud(t *testing.T) {
	root := t.TempDir()
	write := func(p, data string) {
		t.Helper()
		hp := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(hp), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(hp, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	edited := "# " + policy.EditedHeader + "\n# from the admin\nnameserver 10.0.0.2\n"
	write("etc/resolv.conf", edited)
	write("etc/dhcp/dhclient-enter-hooks.d/nodedns", "#!/bin/sh\n# "+policy.HookHeader+"\n")
	write("etc/systemd/resolved.conf.d/zz-nodedns.conf", "[Resolve]\nDNS=\n") // no mark: someone else's
	write("var/lib/nodedns/nodedns-purge", strings.Repeat("\x7fELF", 1<<19))
	n := &Node{Root: root, Config: config.Default()}

	res, err := n.RestoreWith(context.Background(), RestoreOptions{})
	var lost *LostBackupsError
	if !errors.As(err, &lost) {
		t.Fatalf("RestoreWith = %v, %v; want a LostBackupsError", res, err)
	}
	if diff := cmp.Diff([]string{"/etc/dhcp/dhclient-enter-hooks.d/nodedns", "/etc/resolv.conf"}, lost.Paths); diff != "" {
		t.Errorf("lost (-want +got):\n%s", diff)
	}
	if !strings.Contains(err.Error(), "nodedns restore --forget") {
		t.Errorf("the error gives no way out: %v", err)
	}

	res, err = n.RestoreWith(context.Background(), RestoreOptions{Forget: true})
	if err != nil {
		t.Fatalf("RestoreWith(Forget): %v", err)
	}
	want := []store.RestoreResult{
		{Path: "/etc/dhcp/dhclient-enter-hooks.d/nodedns", Action: store.ActionRemoved, Reason: "no backup: nodedns created it (forgotten knowingly)"},
		{Path: "/etc/resolv.conf", Action: ActionUnmarked, Reason: "no backup: nodedns's header line dropped, the rest left as nodedns edited it"},
	}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("forget (-want +got):\n%s", diff)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "etc/resolv.conf")); string(got) != "# from the admin\nnameserver 10.0.0.2\n" {
		t.Errorf("/etc/resolv.conf after forget = %q", got)
	}
	if _, err := os.Stat(filepath.Join(root, "etc/systemd/resolved.conf.d/zz-nodedns.conf")); err != nil {
		t.Errorf("forget removed a file without nodedns's mark: %v", err)
	}
	if entries, err := n.store().Backups(); err != nil || len(entries) != 0 {
		t.Errorf("forget left backups: %v, %v", entries, err)
	}
}
