package nstest

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestSandbox proves the isolation the other tests rely on: a private /run and /etc/resolv.conf, its
// own loopback, a veth to a second sandbox, a private system bus; and that the host's files are not
// what the sandbox sees.
func TestSandbox(t *testing.T) {
	a := New(t)
	b := New(t)

	hostResolv, _ := os.ReadFile("/etc/resolv.conf")
	if got := a.Run(t, "cat /etc/resolv.conf"); got != "" {
		t.Errorf("sandbox /etc/resolv.conf is not empty: %q", got)
	}
	a.Run(t, "echo 'nameserver 10.77.0.2' > /etc/resolv.conf")
	if after, _ := os.ReadFile("/etc/resolv.conf"); string(after) != string(hostResolv) {
		t.Fatal("writing the sandbox's /etc/resolv.conf changed the host's")
	}
	a.Run(t, "mkdir -p /run/systemd/resolve && echo x > /run/systemd/resolve/marker")
	if _, err := os.Stat("/run/systemd/resolve/marker"); err == nil {
		t.Fatal("the sandbox's /run leaked to the host")
	}
	if data, err := os.ReadFile(a.Path("/run/systemd/resolve/marker")); err != nil || strings.TrimSpace(string(data)) != "x" {
		t.Errorf("Path does not reach the sandbox's /run: %q %v", data, err)
	}

	aIf, _ := Veth(t, a, b, "10.77.0.1/24", "10.77.0.2/24")
	// No ping on these machines: a UDP datagram makes the kernel resolve the peer over the veth
	// (its neighbour entry gets the peer's address once the peer answers: wait for it).
	WaitFor(t, 20*time.Second, "the peer's link-layer address over the veth", func() bool {
		out, err := a.Try("bash -c 'echo hi > /dev/udp/10.77.0.2/9'; ip neigh show 10.77.0.2")
		return err == nil && strings.Contains(out, "lladdr")
	})
	if out := a.Run(t, "ip -o link show"); !strings.Contains(out, aIf) || strings.Contains(out, "eth0") {
		t.Errorf("sandbox links:\n%s", out)
	}
	if out, err := b.Cmd(context.Background(), "ls", "/sys/class/net").Output(); err != nil || strings.Contains(string(out), "eth0") {
		t.Errorf("sandbox /sys/class/net shows the host's links (%v): %s", err, out)
	}

	a.SystemBus(t)
	if out := a.Run(t, "dbus-send --system --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus.ListNames"); !strings.Contains(out, "org.freedesktop.DBus") {
		t.Errorf("private bus did not answer: %s", out)
	}
}

// TestSandboxPIDNamespace proves a sandbox sees only its own processes (so a scan of /proc cannot
// take this machine's processes for the node's), one with its own UTS namespace keeps its hostname
// to itself, and it reaps orphans.
func TestSandboxPIDNamespace(t *testing.T) {
	sb := NewWith(t, Options{UTSNamespace: true})
	if got := strings.TrimSpace(sb.Run(t, "cat /proc/1/comm")); got != "sh" {
		t.Errorf("the sandbox's PID 1 is %q, want its init shell", got)
	}
	if plain := New(t); strings.TrimSpace(plain.Run(t, "cat /proc/1/comm")) != "sh" {
		t.Error("a sandbox made with New has no PID namespace of its own")
	}
	if out := sb.Run(t, "ls /proc | grep -c '^[0-9]'"); strings.TrimSpace(out) == "" || len(strings.TrimSpace(out)) > 1 {
		t.Errorf("the sandbox sees %s processes, want a handful", strings.TrimSpace(out))
	}
	host, _ := os.Hostname()
	sb.Run(t, "hostname nstest-node")
	if got, _ := os.Hostname(); got != host {
		t.Fatalf("setting the sandbox's hostname changed this machine's: %q", got)
	}
	if got := strings.TrimSpace(sb.Run(t, "hostname")); got != "nstest-node" {
		t.Errorf("sandbox hostname %q", got)
	}
	// An orphan (a double fork) that exits must not stay a zombie: its entry in /proc goes once it
	// is reaped.
	orphan := strings.TrimSpace(sb.Run(t, "sh -c 'sleep 0.1 & echo $!'"))
	WaitFor(t, 20*time.Second, "the sandbox's init to reap orphan "+orphan, func() bool {
		out, err := sb.Try("[ -e /proc/" + orphan + " ] || echo reaped")
		return err == nil && strings.TrimSpace(out) == "reaped"
	})
}
