package nstest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// ForkyTarEnv names the environment variable holding the tar of a Debian testing (forky) tree with
// the newer components: systemd, systemd-resolved and systemd-networkd 262, NetworkManager 1.58,
// netplan 1.2, dnsmasq, dbus, iptables 1.8.13 (nf_tables and legacy), nftables 1.1, dig, python3
// 3.14 with python3-apt (.ci/suite-tree builds it; .ci/run caches it as forky-vN.tar).
const ForkyTarEnv = "NODEDNS_FORKY_TAR"

// SuiteTree returns the tree of the tar env names, unpacked once next to the tar (TAR.d) and shared
// by every test; sandboxes run on an overlay of it (Options.Suite), so it stays clean. It skips the test
// when the variable is unset or the tar is missing.
func SuiteTree(t testing.TB, env string) string {
	t.Helper()
	tarPath := os.Getenv(env)
	if tarPath == "" {
		t.Skipf("needs a newer Debian tree: set %s to its tar (.ci/run builds it with .ci/suite-tree)", env)
	}
	fi, err := os.Stat(tarPath)
	if err != nil {
		t.Skipf("needs a newer Debian tree: %s=%s: %v", env, tarPath, err)
	}
	dir := tarPath + ".d"
	stamp := filepath.Join(dir, ".nodedns-unpacked")
	want := fmt.Sprintf("%d %d", fi.Size(), fi.ModTime().UnixNano())
	lock, err := os.OpenFile(tarPath+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(stamp); err == nil && string(got) == want {
		return dir
	}
	tmp := dir + ".tmp"
	_ = os.RemoveAll(tmp)
	_ = os.RemoveAll(dir)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("tar", "-C", tmp, "-xf", tarPath).CombinedOutput(); err != nil {
		t.Fatalf("unpack %s: %v: %s", tarPath, err, out)
	}
	if err := os.WriteFile(filepath.Join(tmp, ".nodedns-unpacked"), []byte(want), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// StartDaemon starts a daemon in the background inside the sandbox (a suite's: its tree's
// program) through a script that records its PID in /run/nstest-NAME.pid, so it can be restarted
// the same way, logging to /run/NAME.log. restart is the script's path (in the sandbox's Dir, the
// same inside and outside): run it to stop the daemon and start a new one (PID 1 is not systemd
// here, so that is how nodedns's resolved.restartCommand restarts resolved).
func (sb *Sandbox) StartDaemon(t testing.TB, name string, argv ...string) (restart string) {
	t.Helper()
	restart = filepath.Join(sb.dir, "restart-"+name)
	pid, log := "/run/nstest-"+name+".pid", "/run/"+name+".log"
	var q []string
	for _, a := range argv {
		q = append(q, Quote(a))
	}
	script := fmt.Sprintf(`#!/bin/sh
# Restart %[1]s in the nstest sandbox (PID 1 is not systemd here).
if [ -s %[2]s ]; then
	old=$(cat %[2]s)
	kill "$old" 2>/dev/null || true
	i=0
	while kill -0 "$old" 2>/dev/null && ! grep -q '^State:[[:space:]]*Z' /proc/"$old"/status 2>/dev/null; do
		i=$((i+1)); [ $i -gt 250 ] && { kill -9 "$old"; break; }
		sleep 0.02
	done
fi
SYSTEMD_IGNORE_CHROOT=1 SYSTEMD_LOG_LEVEL=debug setsid %[3]s >>%[4]s 2>&1 </dev/null &
echo $! > %[2]s
`, name, pid, strings.Join(q, " "), log)
	if err := os.WriteFile(restart, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			data, _ := os.ReadFile(sb.Path(log))
			lines := strings.Split(string(data), "\n")
			if len(lines) > 60 {
				lines = lines[len(lines)-60:]
			}
			t.Logf("%s log (last lines):\n%s", name, strings.Join(lines, "\n"))
		}
	})
	sb.Run(t, restart)
	return restart
}
