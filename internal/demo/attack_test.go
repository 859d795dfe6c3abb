package demo

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/nodedns/nodedns/internal/testutil/nstest"
)

// TestAttackDemoFiles: what `sudo make demo` creates as root, and whether another local user (uid
// 65534, nobody) can reach or race it. The demo's files live in directories os.MkdirTemp makes
// (nodedns-demo-RANDOM, and the binary's nodedns-bin-RANDOM: mkdir(2) of a fresh random name, so no
// name can be planted ahead), root's and 0700; its nodes' /run (D-Bus sockets, netns names, ready
// files) is a tmpfs of their own mount namespace, reached only through /proc/PID/root, which takes
// ptrace access to the node's process. nobody can neither list nor write nor plant a symlink in any of
// them, nor reach a node's /run.
//
// Measured before (this is a pass over the demo as it was, not a fix): every attempt failed with
// "Permission denied", as asserted here; nothing to fix.
func TestAttackDemoFiles(t *testing.T) {
	nstest.Require(t)
	s := &Session{}
	failed, skipped, msg := s.Do(func(tb testing.TB) {
		dir := tb.TempDir()
		sb := nstest.New(tb)
		bin := nstest.Build(tb)
		for _, d := range []string{dir, sb.Dir(), filepath.Dir(bin)} {
			fi, err := os.Stat(d)
			if err != nil {
				tb.Fatal(err)
			}
			st := fi.Sys().(*syscall.Stat_t)
			if st.Uid != 0 || fi.Mode().Perm() != 0o700 {
				tb.Errorf("%s: owner %d mode %v, want root's and 0700", d, st.Uid, fi.Mode())
			}
			for _, attack := range []string{"ls " + d, "touch " + d + "/x", "ln -s /etc/shadow " + d + "/y", "mv " + d + " " + d + ".gone"} {
				if out, err := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", attack).CombinedOutput(); err == nil {
					tb.Errorf("nobody could %q: %s", attack, out)
				}
			}
		}
		run := fmt.Sprintf("/proc/%d/root/run", sb.PID)
		if out, err := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "ls", run).CombinedOutput(); err == nil {
			tb.Errorf("nobody could list the node's /run through %s: %s", run, out)
		}
	})
	if failed || skipped {
		t.Fatalf("failed %v skipped %v: %s", failed, skipped, msg)
	}
}
