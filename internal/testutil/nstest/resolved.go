package nstest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ResolvedDirEnv names the environment variable holding the directory where systemd-resolved 252
// and libsystemd-shared are unpacked (`apt-get download systemd-resolved libsystemd-shared` +
// `dpkg -x`; .ci/run does it). Installing the package instead would rewire the host's DNS.
const ResolvedDirEnv = "NODEDNS_RESOLVED_DIR"

// ResolvedDir returns the unpacked systemd-resolved, skipping the test when it is not there.
func ResolvedDir(t testing.TB) string {
	t.Helper()
	return unpackedDir(t, ResolvedDirEnv, "systemd-resolved", "systemd-resolved and libsystemd-shared", "lib/systemd/systemd-resolved")
}

// unpackedDir returns the directory the variable env names, where the packages of a real what are
// unpacked, skipping the test when it is not set or lacks one of files.
func unpackedDir(t testing.TB, env, what, packages string, files ...string) string {
	t.Helper()
	dir := os.Getenv(env)
	if dir == "" {
		t.Skipf("needs a real %s: set %s to a directory where %s are unpacked (.ci/run does)", what, env, packages)
	}
	for _, p := range files {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Skipf("needs a real %s: %s=%s has no %s (%v)", what, env, dir, p, err)
		}
	}
	return dir
}

// Isolate puts a writable overlay over the sandbox's /etc and /var/lib (upper layers on a tmpfs in
// the sandbox's /run) and empty directories over the places a node's DNS settings come from, so the
// nodedns binary, resolved and the test can write anywhere under them while the host's files stay
// untouched and unread: /etc/systemd/resolved.conf.d, /etc/netplan, /etc/dhcp, /etc/nodedns,
// /var/lib/nodedns, /var/lib/kubelet and the lease directories. /etc/resolv.conf becomes an empty
// regular file again.
func (sb *Sandbox) Isolate(t testing.TB) {
	t.Helper()
	var b strings.Builder
	b.WriteString("set -e\nmkdir -p /run/nstest-overlay\nmount -t tmpfs -o mode=0755 tmpfs /run/nstest-overlay\n")
	for _, d := range []string{"/etc", "/var/lib"} {
		n := strings.ReplaceAll(strings.Trim(d, "/"), "/", "-")
		fmt.Fprintf(&b, "mkdir -p /run/nstest-overlay/%[1]s-up /run/nstest-overlay/%[1]s-work\n", n)
		fmt.Fprintf(&b, "mount -t overlay overlay -o lowerdir=%[2]s,upperdir=/run/nstest-overlay/%[1]s-up,workdir=/run/nstest-overlay/%[1]s-work %[2]s\n", n, d)
	}
	for _, d := range []string{"/etc/systemd/resolved.conf.d", "/etc/netplan", "/etc/dhcp", "/etc/nodedns",
		"/var/lib/nodedns", "/var/lib/kubelet", "/var/lib/dhcp", "/var/lib/dhclient", "/var/lib/NetworkManager"} {
		fmt.Fprintf(&b, "mkdir -p %[1]s\nmount -t tmpfs -o mode=0755 tmpfs %[1]s\n", d)
	}
	b.WriteString("rm -f /etc/resolv.conf\n: > /etc/resolv.conf\n")
	sb.Run(t, b.String())
}

// Resolved is a real systemd-resolved running in a sandbox, started and restarted by a script that
// keeps its PID in a file, so the nodedns binary can restart it the same way
// (resolved.restartCommand) where PID 1 is not systemd.
type Resolved struct {
	sb *Sandbox
	// RestartScript is the path of a script (same path inside and outside the sandbox) that stops
	// the running resolved, if any, and starts a new one in the background.
	RestartScript string
	// Log is resolved's log file.
	Log string

	exe, env string // the binary and the environment it runs with (in the sandbox)
}

// StartResolved starts systemd-resolved inside the sandbox on the sandbox's system bus (start one
// with SystemBus first) and waits until it answers. It needs a `systemd-resolve` user. It is the
// sandbox's suite's resolved: the cached 252 for Bookworm, the tree's own otherwise.
func (sb *Sandbox) StartResolved(t testing.TB) *Resolved {
	t.Helper()
	// Bookworm's resolved is the cached 252 with its own libsystemd-shared; a suite's is its tree's.
	exe, env := "/usr/lib/systemd/systemd-resolved", ""
	if !sb.Opts.Suite.Chrooted() {
		dir := ResolvedDir(t)
		exe, env = filepath.Join(dir, "lib/systemd/systemd-resolved"), "LD_LIBRARY_PATH="+Quote(filepath.Join(dir, "usr/lib/x86_64-linux-gnu/systemd"))+" "
	}
	if out, err := sb.Try("id systemd-resolve"); err != nil {
		t.Skipf("needs a systemd-resolve user (useradd -r -M -s /usr/sbin/nologin systemd-resolve; .ci/run does): %s", out)
	}
	r := &Resolved{sb: sb, RestartScript: filepath.Join(sb.dir, "restart-resolved.sh"), Log: filepath.Join(sb.dir, "resolved.log"), exe: exe, env: env}
	pid := filepath.Join(sb.dir, "resolved.pid")
	script := fmt.Sprintf(`#!/bin/sh
# Restart systemd-resolved in the nstest sandbox (never SIGHUP: it kills resolved 252).
if [ -s %[1]s ]; then
	old=$(cat %[1]s)
	kill "$old" 2>/dev/null || true
	i=0
	# A zombie is gone as far as resolved goes (its bus name and sockets closed with it): orphans
	# here are reaped by a PID 1 that may take seconds, and kill -0 succeeds on a zombie.
	while kill -0 "$old" 2>/dev/null && ! grep -q '^State:[[:space:]]*Z' /proc/"$old"/status 2>/dev/null; do
		i=$((i+1)); [ $i -gt 200 ] && { kill -9 "$old"; break; }
		sleep 0.02
	done
fi
%[2]sSYSTEMD_LOG_LEVEL=debug setsid %[4]s >>%[3]s 2>&1 </dev/null &
echo $! > %[1]s
`, Quote(pid), env, Quote(r.Log), Quote(exe))
	if err := os.WriteFile(r.RestartScript, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			data, _ := os.ReadFile(r.Log)
			lines := strings.Split(string(data), "\n")
			if len(lines) > 80 {
				lines = lines[len(lines)-80:]
			}
			t.Logf("systemd-resolved log (last lines):\n%s", strings.Join(lines, "\n"))
		}
		_, _ = sb.Try("[ -s " + Quote(pid) + " ] && kill $(cat " + Quote(pid) + ")")
	})
	r.Restart(t)
	return r
}

// Restart stops resolved and starts a new one, and waits until it answers on the bus.
func (r *Resolved) Restart(t testing.TB) {
	t.Helper()
	r.sb.Run(t, r.RestartScript)
	r.WaitReady(t)
}

// Stop stops resolved (SIGTERM) and waits until it is gone.
func (r *Resolved) Stop(t testing.TB) {
	t.Helper()
	pid := filepath.Join(r.sb.dir, "resolved.pid")
	r.sb.Run(t, fmt.Sprintf(`p=$(cat %[1]s); kill "$p"; while kill -0 "$p" 2>/dev/null; do sleep 0.02; done; : > %[1]s`, Quote(pid)))
}

// PID returns resolved's process id as this machine numbers it (the restart script records it as
// the sandbox's PID namespace numbers it).
func (r *Resolved) PID(t testing.TB) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(r.sb.dir, "resolved.pid"))
	if err != nil {
		t.Fatal(err)
	}
	inside, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatalf("resolved's PID file: %v", err)
	}
	pid, err := r.sb.HostPID(inside)
	if err != nil {
		t.Fatalf("resolved: %v", err)
	}
	return pid
}

// WaitReady waits until resolved answers a ping on the sandbox's bus and has written its
// resolv.conf.
func (r *Resolved) WaitReady(t testing.TB) {
	t.Helper()
	WaitFor(t, 15*time.Second, "systemd-resolved on the sandbox bus", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		err := r.sb.Cmd(ctx, "dbus-send", "--system", "--print-reply", "--dest=org.freedesktop.resolve1",
			"/org/freedesktop/resolve1", "org.freedesktop.DBus.Peer.Ping").Run()
		if err != nil {
			return false
		}
		_, err = os.Stat(r.sb.Path("/run/systemd/resolve/resolv.conf"))
		return err == nil
	})
}

// Version is the first line of resolved's --version ("systemd 252 (252.39-1~deb12u1)").
func (r *Resolved) Version(t testing.TB) string {
	t.Helper()
	out := r.sb.Run(t, r.env+Quote(r.exe)+" --version")
	return strings.SplitN(out, "\n", 2)[0]
}
