package nstest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ForkyTarEnv names the environment variable holding the tar of a Debian testing (forky) tree with
// the newer components: systemd, systemd-resolved and systemd-networkd 262, NetworkManager 1.58,
// netplan 1.2, dnsmasq, dbus (.ci/suite-tree builds it; .ci/run caches it).
const ForkyTarEnv = "NODEDNS_FORKY_TAR"

// SuiteTree returns the tree of the tar env names, unpacked once next to the tar (TAR.d) and shared
// by every test; scenarios run on an overlay of it (Chroot), so it stays clean. It skips the test
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

// Chroot is a newer distribution's tree mounted in a sandbox: an overlay of the cached tree (its
// upper layer in the sandbox's own directory) with its own /proc, a read-only sysfs of the
// sandbox's network namespace, a tmpfs /run and the host's /dev. Every program of a scenario runs
// chrooted in it (the tree's glibc, daemons and tools), so the host's own files are never read.
type Chroot struct {
	sb *Sandbox
	// Root is the tree's root, at the same path inside and outside the sandbox's mount namespace
	// (outside it is an empty directory: use Path).
	Root string
}

// NewChroot mounts tree in sb (make the sandbox with PIDNamespace and UTSNamespace: the tree's
// daemons then see only the sandbox's processes and cannot rename this machine) and starts the
// tree's system bus. The runtime directories systemd-resolved and networkd want before they start
// are made and given to their users (PID 1 is not systemd here; see /work docs "Newer components").
func (sb *Sandbox) NewChroot(t testing.TB, tree string) *Chroot {
	t.Helper()
	c := &Chroot{sb: sb, Root: filepath.Join(sb.dir, "root")}
	up, work := filepath.Join(sb.dir, "tree-up"), filepath.Join(sb.dir, "tree-work")
	for _, d := range []string{c.Root, up, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r := Quote(c.Root)
	sb.Run(t, strings.Join([]string{
		"set -e",
		fmt.Sprintf("mount -t overlay overlay -o lowerdir=%s,upperdir=%s,workdir=%s %s", Quote(tree), Quote(up), Quote(work), r),
		"mount -t proc proc " + r + "/proc",
		"mount -t sysfs -o ro sysfs " + r + "/sys",
		"mount -t tmpfs -o mode=0755 tmpfs " + r + "/run",
		"mount --bind /dev " + r + "/dev",
		"mkdir -p " + r + "/run/dbus " + r + "/run/systemd/resolve " + r + "/run/systemd/netif",
		"chroot " + r + " chown systemd-resolve:systemd-resolve /run/systemd/resolve",
		"chroot " + r + " chown systemd-network:systemd-network /run/systemd/netif",
		"chroot " + r + " dbus-daemon --system --fork --nopidfile",
	}, "\n"))
	WaitFor(t, 10*time.Second, "the tree's system bus", func() bool {
		_, err := os.Stat(c.Path("/run/dbus/system_bus_socket"))
		return err == nil
	})
	return c
}

// Path is the host path of a path inside the tree.
func (c *Chroot) Path(p string) string { return c.sb.Path(filepath.Join(c.Root, p)) }

// Run runs a shell script chrooted in the tree (SYSTEMD_IGNORE_CHROOT=1, so systemd's tools act
// although PID 1 is not systemd) and returns its output; an error fails the test.
func (c *Chroot) Run(t testing.TB, script string) string {
	t.Helper()
	return c.sb.Run(t, c.wrap(script))
}

// Try is Run for scripts allowed to fail.
func (c *Chroot) Try(script string) (string, error) { return c.sb.Try(c.wrap(script)) }

func (c *Chroot) wrap(script string) string {
	return "SYSTEMD_IGNORE_CHROOT=1 chroot " + Quote(c.Root) + " /bin/sh -c " + Quote(script)
}

// Write writes a file inside the tree (its directories made as needed).
func (c *Chroot) Write(t testing.TB, p, data string, mode os.FileMode) {
	t.Helper()
	host := c.Path(p)
	if err := os.MkdirAll(filepath.Dir(host), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(host, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
}

// Install copies a host file (the nodedns binary) into the tree at p, mode 0755.
func (c *Chroot) Install(t testing.TB, host, p string) {
	t.Helper()
	data, err := os.ReadFile(host)
	if err != nil {
		t.Fatal(err)
	}
	c.Write(t, p, string(data), 0o755)
}

// StartDaemon starts a daemon of the tree in the background (through a script that records its
// PID in /run/nstest-NAME.pid, so it can be restarted the same way), logging to /run/NAME.log.
// restart is the script's path inside the tree: run it to stop the daemon and start a new one.
func (c *Chroot) StartDaemon(t testing.TB, name string, argv ...string) (restart string) {
	t.Helper()
	restart = "/usr/local/sbin/restart-" + name
	pid, log := "/run/nstest-"+name+".pid", "/run/"+name+".log"
	var q []string
	for _, a := range argv {
		q = append(q, Quote(a))
	}
	c.Write(t, restart, fmt.Sprintf(`#!/bin/sh
# Restart %[1]s in the nstest chroot (PID 1 is not systemd here).
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
`, name, pid, strings.Join(q, " "), log), 0o755)
	t.Cleanup(func() {
		if t.Failed() {
			data, _ := os.ReadFile(c.Path(log))
			lines := strings.Split(string(data), "\n")
			if len(lines) > 60 {
				lines = lines[len(lines)-60:]
			}
			t.Logf("%s log (last lines):\n%s", name, strings.Join(lines, "\n"))
		}
	})
	c.Run(t, restart)
	return restart
}
