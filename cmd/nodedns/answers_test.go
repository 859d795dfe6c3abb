package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoSilentAnswers: what nodedns would otherwise drop or misname without a word.
func TestNoSilentAnswers(t *testing.T) {
	t.Run("a loop address as an upstream is a config error naming the key", func(t *testing.T) {
		root := t.TempDir()
		copyDir(t, "../../examples/kubespray-host-resolvconf", root)
		writeFile(t, filepath.Join(root, "etc/nodedns/config.yaml"), "upstreams: [169.254.25.10]\n", 0o644)
		for _, cmd := range []string{"plan", "apply", "check"} {
			r := nodedns(t, "--root", root, cmd)
			if r.code == 0 || !strings.Contains(r.stderr, `config key upstreams: value "169.254.25.10": the node-local cache's address`) {
				t.Errorf("%s: code %d, stderr:\n%s", cmd, r.code, r.stderr)
			}
		}
	})
	t.Run("a dangling resolv.conf symlink is named with its target", func(t *testing.T) {
		root := t.TempDir()
		if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("../run/systemd/resolve/stub-resolv.conf", filepath.Join(root, "etc/resolv.conf")); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(root, "etc/nodedns/config.yaml"), "upstreams: [10.0.0.2]\n", 0o644)
		rep, _ := checkReport(t, root)
		for _, c := range rep.Checks {
			if c.ID != "resolvconf.nameservers" {
				continue
			}
			if c.Status != "problem" || !strings.Contains(c.Message, "dangling symlink to ../run/systemd/resolve/stub-resolv.conf") ||
				!strings.Contains(c.Hint, "start what writes /run/systemd/resolve/stub-resolv.conf") || strings.Contains(c.Hint, "set `upstreams`") {
				t.Errorf("resolvconf.nameservers: %s: %s (hint: %s)", c.Status, c.Message, c.Hint)
			}
			return
		}
		t.Fatal("no resolvconf.nameservers in the report")
	})
	t.Run("restore warns when it puts a loop back", func(t *testing.T) {
		root := t.TempDir()
		copyDir(t, "../../examples/kubespray-host-resolvconf", root)
		if r := nodedns(t, "--root", root, "apply"); r.code != 0 {
			t.Fatalf("apply: %d %s", r.code, r.stderr)
		}
		r := nodedns(t, "--root", root, "restore")
		if r.code != 0 {
			t.Fatalf("restore: %d %s", r.code, r.stderr)
		}
		want := "nodedns: warning: restored /etc/resolv.conf lists 169.254.25.10 (the node-local cache): the loop nodedns kept out is back"
		if !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, `msg="restored file lists a loop address"`) {
			t.Errorf("restore's stderr lacks the warning %q:\n%s", want, r.stderr)
		}
		// A restore that puts back a loop-free file says nothing of the kind.
		root = copyTree(t, "testdata/seeds/003")
		nodedns(t, "--root", root, "apply")
		if r := nodedns(t, "--root", root, "restore"); strings.Contains(r.stderr, "warning: restored") {
			t.Errorf("restore of a loop-free node warns:\n%s", r.stderr)
		}
	})
}

func writeFile(t *testing.T, p, data string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
}
