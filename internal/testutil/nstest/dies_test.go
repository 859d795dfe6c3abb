package nstest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/testutil/tied"
)

// childEnv makes TestSandboxDiesWithItsTest the child that builds the sandboxes.
const childEnv = "NSTEST_DIES_CHILD"

// childReady is the line the child prints once everything runs.
const childReady = "nstest-child: everything runs"

// TestSandboxDiesWithItsTest: a test process running two sandboxes with servers in them (a LAN
// dnsmasq, a node-local CoreDNS, a private system bus, a pod with its named network namespace, a
// daemon that left its parent, a program started through Cmd, a veth between the two, the overlay
// mounts of Isolate), systemd as PID 1 of namespaces of its own, and a plain process of its own
// started with tied, is killed with SIGKILL: it runs none of its cleanups. Within a bounded wait,
// nothing of it is left on this machine: no process (by the marker in their environment, or in one
// of its PID, network or mount namespaces), none of its network namespaces held by a descriptor
// or a bind mount (a name in /run/netns), no mount of its own in this machine's mount namespace,
// not the directory of the tools it built (ProcessTempDir).
func TestSandboxDiesWithItsTest(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		buildEverything(t)
		fmt.Println(childReady)
		time.Sleep(time.Hour) // until killed
	}
	Require(t)
	CoreDNS(t)
	child := StartChildTest(t, t.Name(), childEnv+"=1")
	child.WaitFor(t, 3*time.Minute, "the child's sandboxes", func() bool { return strings.Contains(child.Output(), childReady) })
	fp, err := TakeFootprint(child.Marker)
	if err != nil {
		t.Fatal(err)
	}
	var comms []string
	for pid := range fp.Procs {
		comms = append(comms, procComm(pid))
	}
	for _, want := range []string{"coredns", "dnsmasq", "dbus-daemon", "systemd", "sleep"} {
		if !slices.Contains(comms, want) {
			t.Errorf("the child runs no %s (it runs %q): the test would prove nothing about it", want, comms)
		}
	}
	if len(fp.PIDNS) < 3 || len(fp.NetNS) < 4 || len(fp.MntNS) < 3 {
		t.Errorf("the child's namespaces: %d PID, %d network, %d mount; want at least 3 (two sandboxes and systemd's), 4 (and the pod's), 3", len(fp.PIDNS), len(fp.NetNS), len(fp.MntNS))
	}
	if dirs, _ := filepath.Glob(filepath.Join(child.Tmp, fmt.Sprintf("nodedns-bin-%d-*", child.Cmd.Process.Pid))); len(dirs) != 1 {
		t.Errorf("the child's directory of built tools: %q, want one: the test would prove nothing about it", dirs)
	}
	child.KillLeavesNothing(t, fp, 30*time.Second)
}

// buildEverything is the child's test: everything TestSandboxDiesWithItsTest expects to die.
func buildEverything(t *testing.T) {
	node := NewWith(t, Options{UTSNamespace: true})
	lan := New(t)
	Veth(t, node, lan, "10.88.0.1/24", "10.88.0.2/24")
	lan.Start(t, "dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv", "--no-hosts",
		"--listen-address=10.88.0.2", "--bind-interfaces", "--address=/example.test/192.0.2.1")
	node.SystemBus(t)
	node.Isolate(t)
	node.StartCache(t, CacheOptions{})
	node.AddPod(t, PodOptions{Name: "pod-a"})
	// A daemon that left its parent: orphaned to the sandbox's init.
	node.StartDaemon(t, "sleeper", "sleep", "3600")
	if err := node.Cmd(context.Background(), "sleep", "3601").Start(); err != nil {
		t.Fatal(err)
	}
	if err := tied.Start(exec.Command("sleep", "3602")); err != nil {
		t.Fatal(err)
	}
	bootSleeper(t)
}

// bootSleeper boots systemd as PID 1 with a service that sleeps.
func bootSleeper(t *testing.T) {
	work := t.TempDir()
	units := filepath.Join(work, "units")
	if err := os.MkdirAll(units, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, unit := range map[string]string{
		"system.slice":    "[Unit]\nDefaultDependencies=no\n",
		"sleeper.service": "[Unit]\nDefaultDependencies=no\n[Service]\nExecStart=/bin/sleep 3603\n",
		"nds-test.target": "[Unit]\nDefaultDependencies=no\nWants=sleeper.service\n",
	} {
		if err := os.WriteFile(filepath.Join(units, name), []byte(unit), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sd := BootSystemd(t, SystemdOptions{Work: work, Target: "nds-test.target"})
	sd.WaitFor("sleeper.service active", "sleeper.service", 30*time.Second, func() bool { return sd.Show("sleeper.service", "ActiveState") == "active" })
}
