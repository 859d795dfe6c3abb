package nstest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// NMDirEnv names the environment variable holding the directory where NetworkManager 1.42, libnm0
// and libndp0 are unpacked (`apt-get download network-manager libnm0 libndp0` + `dpkg -x`; .ci/run
// does it). Installing the package instead could start NetworkManager on this machine, where it
// would take over eth0 and /etc/resolv.conf.
const NMDirEnv = "NODEDNS_NM_DIR"

// NMDir returns the unpacked NetworkManager, skipping the test when it is not there.
func NMDir(t testing.TB) string {
	t.Helper()
	return unpackedDir(t, NMDirEnv, "NetworkManager", "network-manager, libnm0 and libndp0", "usr/sbin/NetworkManager", "usr/bin/nmcli")
}

// NMBaseConf is a NetworkManager.conf that works in a sandbox: the
// keyfile plugin only, NM's internal DHCP client, NM writing /etc/resolv.conf itself as a plain
// file, no hostname changes, no polkit, no automatic connections, and only iface managed.
func NMBaseConf(iface string) string {
	return fmt.Sprintf(`[main]
plugins=keyfile
dhcp=internal
dns=default
rc-manager=file
systemd-resolved=false
hostname-mode=none
auth-polkit=false
no-auto-default=*

[keyfile]
unmanaged-devices=except:interface-name:%s

[connectivity]
enabled=false
`, iface)
}

// NMResolvedConf is NMBaseConf for NetworkManager over systemd-resolved, Ubuntu's server and
// desktop setup: `dns=systemd-resolved` (NM pushes each link's DNS servers and domains to resolved
// over D-Bus) and `rc-manager=unmanaged` (/etc/resolv.conf is resolved's stub, a symlink NM leaves).
func NMResolvedConf(iface string) string {
	c := NMBaseConf(iface)
	c = strings.Replace(c, "dns=default\nrc-manager=file\nsystemd-resolved=false\n", "dns=systemd-resolved\nrc-manager=unmanaged\n", 1)
	return c
}

// NMKeyfile is a keyfile connection for iface: DHCPv4, IPv6 ignored.
func NMKeyfile(iface, uuid string) string {
	return fmt.Sprintf(`[connection]
id=%[1]s
uuid=%[2]s
type=ethernet
interface-name=%[1]s

[ipv4]
method=auto

[ipv6]
method=ignore
`, iface, uuid)
}

// NMOptions configure StartNetworkManager. The zero value is the node of issue 12: dnsmasq offering
// servers 10.66.0.53 and search example.org, no global DNS.
type NMOptions struct {
	// DHCP is what dnsmasq offers; the zero value means NMDefaultDHCP.
	DHCP DHCPOptions
	// Conf is NetworkManager.conf; "" means NMBaseConf.
	Conf string
	// ConfD are files written into /etc/NetworkManager/conf.d (name: content, mode 0644) before
	// NetworkManager starts.
	ConfD map[string]string
	// Hostname is the node's hostname (its own UTS namespace); "" keeps the one it inherits.
	Hostname string
	// NoStart leaves NetworkManager stopped: the test calls Start.
	NoStart bool
	// Resolved runs a real systemd-resolved in the node (NODEDNS_RESOLVED_DIR) before NetworkManager,
	// makes /etc/resolv.conf a symlink to its stub, and makes NMResolvedConf the default Conf.
	Resolved bool
	// Suite is the node's components: the zero Suite runs the cached NetworkManager 1.42
	// (NODEDNS_NM_DIR) on this machine's Debian 12; a suite's tree runs its own (forky: 1.58, its
	// internal DHCP client only) and its own resolved, dbus and tools.
	Suite Suite
}

// NMDefaultDHCP is the offer of issue 12's node.
func NMDefaultDHCP() DHCPOptions {
	return DHCPOptions{Range: "10.66.0.50,10.66.0.99,255.255.255.0,1h", Router: "10.66.0.1",
		DNS: []string{"10.66.0.53"}, Domain: "example.org"}
}

// NMConnUUID is the UUID of the keyfile connection StartNetworkManager writes.
const NMConnUUID = "5b4c9a46-6b8e-4f0c-9a55-1a2b3c4d5e6f"

// NetworkManager is a real NetworkManager 1.42 running in a node sandbox (own PID, UTS, mount and
// network namespaces, a read-only sysfs, overlays on /etc, /var/lib and /usr/lib, private
// /etc/NetworkManager and /var/lib/NetworkManager, a private system bus), managing one veth whose
// peer sandbox runs dnsmasq as the DHCP server.
type NetworkManager struct {
	// Node is the sandbox NetworkManager runs in; Peer is the DHCP server's.
	Node, Peer *Sandbox
	// Iface is the managed interface in Node; PeerIface its peer in Peer (10.66.0.1/24).
	Iface, PeerIface string
	// DHCP is the dnsmasq serving Iface.
	DHCP *DHCPServer
	// Resolved is the node's systemd-resolved (NMOptions.Resolved), or nil.
	Resolved *Resolved
	// Dir is where NetworkManager is unpacked.
	Dir string
	// Log is NetworkManager's log (--debug: stderr), over every start.
	Log string

	script string // start/stop script, same path inside and outside
	pid    string // file holding NM's PID as the node's PID namespace numbers it
	offer  DHCPOptions
}

// StartNetworkManager builds the node and its DHCP server and starts NetworkManager (unless
// o.NoStart), waiting until it is on the bus, holds a DHCP lease and has written a resolv.conf
// with a nameserver.
func StartNetworkManager(t testing.TB, o NMOptions) *NetworkManager {
	t.Helper()
	dir := "/" // a suite's tree has NetworkManager in its place
	if o.Suite.Chrooted() {
		o.Suite.Need(t, ".ci/suite-tree installs network-manager", "/usr/sbin/NetworkManager", "nmcli")
	} else {
		dir = NMDir(t)
	}
	o.Suite.Need(t, "apt-get install dnsmasq-base dbus-daemon dbus-bin", "dnsmasq", "dbus-daemon", "dbus-send")
	node := NewWith(t, Options{UTSNamespace: true, Suite: o.Suite})
	peer := New(t)
	nm := &NetworkManager{Node: node, Peer: peer, Dir: dir,
		Log: filepath.Join(node.Dir(), "NetworkManager.log"), pid: filepath.Join(node.Dir(), "NetworkManager.pid"),
		script: filepath.Join(node.Dir(), "nm.sh")}
	nm.Iface, nm.PeerIface = vethNoAddr(t, node, peer, "10.66.0.1/24")

	node.SystemBus(t)
	node.Isolate(t)
	// NetworkManager needs a read-only sysfs to work without udev (measured with 1.42.4). /usr/lib gets an
	// overlay too, so tests can put files in /usr/lib/NetworkManager/conf.d and
	// system-connections, which this machine does not have.
	node.Run(t, `set -e
umount /sys 2>/dev/null || true
mount -t sysfs -o ro sysfs /sys
mkdir -p /run/nstest-overlay/usr-lib-up /run/nstest-overlay/usr-lib-work
mount -t overlay overlay -o lowerdir=/usr/lib,upperdir=/run/nstest-overlay/usr-lib-up,workdir=/run/nstest-overlay/usr-lib-work /usr/lib
mkdir -p /etc/NetworkManager
mount -t tmpfs -o mode=0755 tmpfs /etc/NetworkManager
mkdir -p /etc/NetworkManager/conf.d /etc/NetworkManager/system-connections
`)
	if o.Hostname != "" {
		node.Run(t, "hostname "+Quote(o.Hostname))
	}
	conf := o.Conf
	if conf == "" {
		conf = NMBaseConf(nm.Iface)
		if o.Resolved {
			conf = NMResolvedConf(nm.Iface)
		}
	}
	if o.Resolved {
		nm.Resolved = node.StartResolved(t)
		node.Run(t, "rm -f /etc/resolv.conf && ln -s ../run/systemd/resolve/stub-resolv.conf /etc/resolv.conf")
	}
	nm.WriteFile(t, "/etc/NetworkManager/NetworkManager.conf", conf, 0o644)
	nm.WriteFile(t, "/etc/NetworkManager/system-connections/"+nm.Iface+".nmconnection", NMKeyfile(nm.Iface, NMConnUUID), 0o600)
	for name, content := range o.ConfD {
		nm.WriteFile(t, "/etc/NetworkManager/conf.d/"+name, content, 0o644)
	}
	nm.writeScript(t)

	nm.offer = o.DHCP
	if nm.offer.Range == "" {
		nm.offer = NMDefaultDHCP()
	}
	// dnsmasq first: NM's first DISCOVER would otherwise be lost (3 s retry).
	nm.DHCP = peer.StartDHCPServer(t, nm.PeerIface, nm.offer)

	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("NetworkManager log (last lines):\n%s", nm.LogTail(120))
		}
	})
	if !o.NoStart {
		nm.Start(t)
		if !o.Resolved {
			nm.WaitResolvConf(t, "NetworkManager's first resolv.conf", func(s string) bool { return strings.Contains(s, "nameserver ") })
		}
		// With a global DNS in force resolv.conf comes before the lease: wait for that too.
		nm.WaitDHCP(t, "NetworkManager's first DHCP lease", func(st string) bool { return strings.Contains(st, "dhcp4.ip_address=") })
	}
	return nm
}

// vethNoAddr links node and peer with a veth: the node's end is up without an address (NM
// addresses it by DHCP), the peer's end gets peerAddr.
func vethNoAddr(t testing.TB, node, peer *Sandbox, peerAddr string) (nodeIf, peerIf string) {
	t.Helper()
	n := vethSeq.Add(1)
	nodeIf, peerIf = fmt.Sprintf("nm%d%da", os.Getpid()%10000, n), fmt.Sprintf("nm%d%db", os.Getpid()%10000, n)
	VethPair(t, node, peer, nodeIf, peerIf)
	node.Run(t, "ip link set "+nodeIf+" up")
	peer.Run(t, fmt.Sprintf("ip addr add %s dev %s && ip link set %s up", peerAddr, peerIf, peerIf))
	return nodeIf, peerIf
}

// writeScript writes the script that starts and stops NetworkManager inside the node. Every PID in
// it is the node's PID namespace's: it runs only inside the node.
func (nm *NetworkManager) writeScript(t testing.TB) {
	t.Helper()
	lib := filepath.Join(nm.Dir, "usr/lib/x86_64-linux-gnu")
	script := fmt.Sprintf(`#!/bin/sh
# Start or stop NetworkManager in an nstest node sandbox (run inside it only).
pidf=%[1]s
owner() {
	dbus-send --system --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
		org.freedesktop.DBus.GetNameOwner string:org.freedesktop.NetworkManager >/dev/null 2>&1
}
case "$1" in
start)
	LD_LIBRARY_PATH=%[2]s setsid %[3]s --debug --log-level=DEBUG >>%[4]s 2>&1 </dev/null &
	echo $! > "$pidf"
	;;
stop)
	[ -s "$pidf" ] || exit 0
	p=$(cat "$pidf")
	kill "$p" 2>/dev/null
	i=0
	# A zombie has closed its bus connection; the namespace's init reaps it later.
	while kill -0 "$p" 2>/dev/null && ! grep -q '^State:[[:space:]]*Z' /proc/"$p"/status 2>/dev/null; do
		i=$((i+1)); [ $i -gt 500 ] && { kill -9 "$p"; break; }
		sleep 0.01
	done
	# After SIGTERM the bus keeps NetworkManager's name for a few ms (measured: up to 25 ms on
	# 1.42.4): a new NetworkManager started before it is free exits with "Service already taken".
	i=0
	while owner; do i=$((i+1)); [ $i -gt 500 ] && { echo "org.freedesktop.NetworkManager still owned" >&2; exit 1; }; sleep 0.01; done
	: > "$pidf"
	;;
esac
`, Quote(nm.pid), Quote(lib), Quote(filepath.Join(nm.Dir, "usr/sbin/NetworkManager")), Quote(nm.Log))
	if err := os.WriteFile(nm.script, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

// Start starts NetworkManager and waits until it answers on the bus (`nmcli general` says running).
func (nm *NetworkManager) Start(t testing.TB) {
	t.Helper()
	if err := nm.TryStart(t, 20*time.Second); err != nil {
		t.Fatal(err)
	}
}

// TryStart starts NetworkManager and waits until it answers on the bus, or returns an error when it
// exits first (NM 1.42 exits 1 at once when a config file does not parse) or timeout passes.
func (nm *NetworkManager) TryStart(t testing.TB, timeout time.Duration) error {
	t.Helper()
	nm.Node.Run(t, nm.script+" start")
	deadline := time.Now().Add(timeout)
	for {
		out, err := nm.TryNmcli("-t", "-f", "RUNNING", "general")
		if err == nil && strings.TrimSpace(out) == "running" {
			return nil
		}
		if !nm.Running() {
			return fmt.Errorf("NetworkManager exited before it was on the bus:\n%s", nm.LogTail(5))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("NetworkManager not on the sandbox bus after %v", timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop stops NetworkManager (SIGTERM) and waits until it is gone and its bus name is free.
func (nm *NetworkManager) Stop(t testing.TB) {
	t.Helper()
	nm.Node.Run(t, nm.script+" stop")
}

// Restart stops and starts NetworkManager, as kubespray's handler does (a restart, not a reload).
func (nm *NetworkManager) Restart(t testing.TB) {
	t.Helper()
	nm.Stop(t)
	nm.Start(t)
}

// Running reports whether the NetworkManager process started last is alive (not a zombie).
func (nm *NetworkManager) Running() bool {
	_, err := nm.Node.Try(fmt.Sprintf(`p=$(cat %s) && [ -n "$p" ] && kill -0 "$p" && ! grep -q '^State:[[:space:]]*Z' /proc/"$p"/status`, Quote(nm.pid)))
	return err == nil
}

// Nmcli runs nmcli inside the node and returns its output; an error fails the test.
func (nm *NetworkManager) Nmcli(t testing.TB, args ...string) string {
	t.Helper()
	out, err := nm.TryNmcli(args...)
	if err != nil {
		t.Fatalf("nmcli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// TryNmcli runs nmcli inside the node, for calls allowed to fail.
func (nm *NetworkManager) TryNmcli(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	full := append([]string{"LD_LIBRARY_PATH=" + filepath.Join(nm.Dir, "usr/lib/x86_64-linux-gnu"),
		filepath.Join(nm.Dir, "usr/bin/nmcli")}, args...)
	out, err := nm.Node.Cmd(ctx, "env", full...).CombinedOutput()
	return string(out), err
}

// Reload is `nmcli general reload` (D-Bus Manager.Reload with no flags: configuration, DNS and
// resolv.conf). NM 1.42 answers success even when a conf.d file fails to parse.
func (nm *NetworkManager) Reload(t testing.TB) {
	t.Helper()
	nm.Nmcli(t, "general", "reload")
}

// Reapply is `nmcli device reapply IFACE`: the connection's settings applied again without
// reactivating it.
func (nm *NetworkManager) Reapply(t testing.TB) {
	t.Helper()
	nm.Nmcli(t, "device", "reapply", nm.Iface)
}

// Reactivate is `nmcli connection up UUID`: the connection torn down and activated again, with a
// fresh DHCP exchange.
func (nm *NetworkManager) Reactivate(t testing.TB) {
	t.Helper()
	nm.Nmcli(t, "connection", "up", NMConnUUID)
}

// ChangeOffer restarts dnsmasq with a new offer. The client sees it at its next renewal: give
// the offer a short T1 (Options "option:T1,2") and wait with WaitDHCP, or Reactivate.
func (nm *NetworkManager) ChangeOffer(t testing.TB, o DHCPOptions) {
	t.Helper()
	nm.offer = o
	nm.DHCP.Restart(t, o)
}

// IfIndex returns the managed interface's ifindex (NM's /run/NetworkManager/devices/IFINDEX).
func (nm *NetworkManager) IfIndex(t testing.TB) int {
	t.Helper()
	i, err := strconv.Atoi(nm.Node.IfIndex(t, nm.Iface))
	if err != nil {
		t.Fatal(err)
	}
	return i
}

// DeviceState returns NM's device state file for the managed interface
// (/run/NetworkManager/devices/IFINDEX), "" when there is none.
func (nm *NetworkManager) DeviceState(t testing.TB) string {
	t.Helper()
	data, _ := os.ReadFile(nm.Node.Path(fmt.Sprintf("/run/NetworkManager/devices/%d", nm.IfIndex(t))))
	return string(data)
}

// WaitDHCP waits until NM's device state file for the interface satisfies cond (e.g. lists the
// server a changed offer hands out).
func (nm *NetworkManager) WaitDHCP(t testing.TB, what string, cond func(state string) bool) {
	t.Helper()
	WaitFor(t, 30*time.Second, what, func() bool { return cond(nm.DeviceState(t)) })
}

// ResolvConf returns the node's /etc/resolv.conf, as NetworkManager last wrote it.
func (nm *NetworkManager) ResolvConf(t testing.TB) []byte {
	t.Helper()
	data, err := os.ReadFile(nm.Node.Path("/etc/resolv.conf"))
	if err != nil {
		t.Fatalf("read the node's /etc/resolv.conf: %v", err)
	}
	return data
}

// WaitResolvConf waits until the node's /etc/resolv.conf satisfies cond.
func (nm *NetworkManager) WaitResolvConf(t testing.TB, what string, cond func(string) bool) {
	t.Helper()
	var last string
	deadline := time.Now().Add(20 * time.Second)
	for {
		data, _ := os.ReadFile(nm.Node.Path("/etc/resolv.conf"))
		last = string(data)
		if cond(last) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; /etc/resolv.conf is:\n%s", what, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Path is the host path of a path inside the node (through /proc/PID/root).
func (nm *NetworkManager) Path(p string) string { return nm.Node.Path(p) }

// WriteFile writes a file inside the node (its parent directories created) with mode.
func (nm *NetworkManager) WriteFile(t testing.TB, p, content string, mode os.FileMode) {
	t.Helper()
	hp := nm.Node.Path(p)
	if err := os.MkdirAll(filepath.Dir(hp), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hp, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(hp, mode); err != nil {
		t.Fatal(err)
	}
}

// RemoveFile removes a file inside the node; a missing file is fine.
func (nm *NetworkManager) RemoveFile(t testing.TB, p string) {
	t.Helper()
	if err := os.Remove(nm.Node.Path(p)); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
}

// Version is `NetworkManager --version` ("1.42.4", "1.58.1"), for tests of facts that changed
// between versions.
func (nm *NetworkManager) Version(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := nm.Node.Cmd(ctx, "env", "LD_LIBRARY_PATH="+filepath.Join(nm.Dir, "usr/lib/x86_64-linux-gnu"),
		filepath.Join(nm.Dir, "usr/sbin/NetworkManager"), "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("NetworkManager --version: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// VersionAtLeast reports whether NetworkManager is major.minor or newer.
func (nm *NetworkManager) VersionAtLeast(t testing.TB, major, minor int) bool {
	t.Helper()
	v := nm.Version(t)
	var ma, mi int
	if _, err := fmt.Sscanf(v, "%d.%d", &ma, &mi); err != nil {
		t.Fatalf("NetworkManager --version %q: %v", v, err)
	}
	return ma > major || ma == major && mi >= minor
}

// PrintConfig runs `NetworkManager --print-config` with extra arguments inside the node (the same
// files the daemon reads, unless args name others) and returns its output and exit code. NM 1.42
// exits 7 when a file fails to parse, naming it on stderr.
func (nm *NetworkManager) PrintConfig(t testing.TB, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	full := append([]string{"LD_LIBRARY_PATH=" + filepath.Join(nm.Dir, "usr/lib/x86_64-linux-gnu"),
		filepath.Join(nm.Dir, "usr/sbin/NetworkManager"), "--print-config"}, args...)
	out, err := nm.Node.Cmd(ctx, "env", full...).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	}
	t.Fatalf("NetworkManager --print-config: %v\n%s", err, out)
	return "", 0
}

// ClientBusAddress returns a D-Bus address for a client in the test process that NetworkManager
// accepts as a caller: the node's BusAddress, a relay inside the node's PID namespace (NM 1.42
// refuses privileged calls, Reload and GetSettings, from a connection whose PID it cannot see).
func (nm *NetworkManager) ClientBusAddress(t testing.TB) string {
	t.Helper()
	return nm.Node.BusAddress()
}

// LogTail returns the last n lines of NetworkManager's log.
func (nm *NetworkManager) LogTail(n int) string {
	data, _ := os.ReadFile(nm.Log)
	lines := strings.Split(string(data), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
