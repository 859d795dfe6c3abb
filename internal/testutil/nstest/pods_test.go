package nstest

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestAddPod proves the pod harness: a pod's process has its own network and UTS namespaces with the
// pod name as hostname, sits in the kubepods cgroup asked for, and reaches the node over its veth on
// both families; the node's /run/netns names it; the cgroup is gone after the test.
func TestAddPod(t *testing.T) {
	sb := NewWith(t, Options{UTSNamespace: true})
	var cgroupDir string
	t.Run("pod", func(t *testing.T) {
		p := sb.AddPod(t, PodOptions{Name: "web-0", HostIf: "vlan0123456789a", Cgroup: "/kubepods/besteffort/pod" + UUID(t) + "/c1"})
		if !strings.HasPrefix(p.Netns, "cni-") || len(p.Netns) != 40 {
			t.Errorf("netns name %q, want containerd's cni-<uuid>", p.Netns)
		}
		if out := sb.Run(t, "ls /run/netns"); !strings.Contains(out, p.Netns) {
			t.Errorf("/run/netns: %s", out)
		}
		for _, ns := range []string{"net", "uts"} {
			pod, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", p.PID, ns))
			node, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", sb.PID, ns))
			if pod == "" || pod == node {
				t.Errorf("pod %s namespace %q, node's %q", ns, pod, node)
			}
		}
		if got := strings.TrimSpace(sb.Run(t, fmt.Sprintf("nsenter -t %d -u hostname", p.NodePID))); got != "web-0" {
			t.Errorf("pod hostname %q", got)
		}
		if got := strings.TrimSpace(sb.Run(t, "hostname")); got == "web-0" {
			t.Error("the pod's hostname leaked to the node")
		}
		data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", p.PID))
		if !strings.Contains(string(data), p.Cgroup) || !strings.Contains(p.Cgroup, "/kubepods/besteffort/pod") {
			t.Errorf("cgroup %q; /proc/PID/cgroup:\n%s", p.Cgroup, data)
		}
		mount, _ := cgroupMount(false)
		cgroupDir = mount + p.Cgroup
		// No ping here: a datagram makes each side resolve the other's address over the veth
		// (the pod's neighbour entries get the node side's address once it answers: wait for them).
		send := fmt.Sprintf("bash -c 'echo > /dev/udp/%s/9; echo > /dev/udp/%s/9'; ip neigh show | grep -c lladdr", p.HostIPv4, p.HostIPv6)
		WaitFor(t, 20*time.Second, "the node side's link-layer address in the pod, over IPv4 and IPv6", func() bool {
			out, _ := sb.Try(p.in() + " sh -c " + Quote(send))
			return strings.TrimSpace(out) == "2"
		})
		if out := sb.Run(t, "ip -o link show "+p.HostIf); !strings.Contains(out, "veth") && !strings.Contains(out, "@") {
			t.Errorf("host side: %s", out)
		}
	})
	if _, err := os.Stat(cgroupDir); err == nil {
		t.Errorf("the test cgroup %s is still there", cgroupDir)
	}
}
