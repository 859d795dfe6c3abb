package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// privileged skips unless the test may create namespaces and mounts: root, and NODEDNS_PRIVILEGED=1
// (.ci/run sets it). Everything such a test mounts lives in a private mount namespace.
func privileged(t *testing.T) {
	t.Helper()
	if os.Getenv("NODEDNS_PRIVILEGED") != "1" {
		t.Skip("needs NODEDNS_PRIVILEGED=1 (root, mount namespaces)")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare (util-linux)")
	}
}

// buildBinary builds nodedns once per test binary run.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "nodedns")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestApplyOnBrokenFilesystems runs the real binary against a node whose /etc is a read-only bind
// mount, and one whose /etc is a full tmpfs. apply must name the file and the reason, exit 1, leave
// /etc/resolv.conf exactly as it was with no temp file beside it, and still write the kubelet file,
// which lives on a healthy filesystem.
func TestApplyOnBrokenFilesystems(t *testing.T) {
	privileged(t)
	bin := buildBinary(t)
	tests := []struct {
		name  string
		mount string // shell run inside the namespace before apply; $R is the root
		say   string
	}{
		{"read-only /etc", `mount --bind "$R/etc" "$R/etc" && mount -o remount,bind,ro "$R/etc"`, "read-only file system"},
		{"full disk under /etc", `cp -a "$R/etc" "$R/etc.orig" && mount -t tmpfs -o size=64k tmpfs "$R/etc" && cp -a "$R/etc.orig/." "$R/etc/" && (dd if=/dev/zero of="$R/etc/fill" bs=4k 2>/dev/null || true) && sync`, "no space left on device"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := copyTree(t, "testdata/seeds/002")
			orig := readFile(t, root, "etc/resolv.conf")
			script := tc.mount + ` && "$BIN" --root "$R" apply; rc=$?; ls -a "$R/etc" > "$R/etc-listing"; cat "$R/etc/resolv.conf" > "$R/resolv-after"; exit $rc`
			cmd := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c", script)
			cmd.Env = append(os.Environ(), "R="+root, "BIN="+bin)
			out, err := cmd.CombinedOutput()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != 1 {
				t.Fatalf("apply: %v, want exit 1\n%s", err, out)
			}
			for _, s := range []string{"/etc/resolv.conf", tc.say} {
				contains(t, "apply output", string(out), s)
			}
			if got := readFile(t, root, "resolv-after"); got != orig {
				t.Errorf("/etc/resolv.conf changed on a broken filesystem:\n%s", got)
			}
			if l := readFile(t, root, "etc-listing"); strings.Contains(l, ".tmp") {
				t.Errorf("temp file left in /etc:\n%s", l)
			}
			contains(t, "kubelet file", readFile(t, root, "var/lib/nodedns/resolv.conf"), "nameserver 192.168.2.1\n")
		})
	}
}
