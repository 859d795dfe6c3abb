package nstest

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// PodOptions describe a pod sandbox made by AddPod, shaped as a CNI and a container runtime shape a
// real one.
type PodOptions struct {
	// Name is the pod name: the hostname of the pod's own UTS namespace (kubelet sets it so).
	Name string
	// HostIf is the host side of the pod's veth, named as its CNI names it: lxc… (Cilium), vlan… or
	// eni… (AWS VPC CNI), cali… (Calico); at most 15 characters. Default: lxc and 12 hex digits.
	HostIf string
	// Netns is the name under the node's /run/netns; default containerd's cni-<uuid>. NoNetns leaves
	// the namespace unnamed: only the pod's process holds it (a runtime that does not pin it).
	Netns   string
	NoNetns bool
	// Cgroup is a kubelet pod cgroup path the pod's process is moved into, such as
	// /kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod<uid>.slice/cri-containerd-<id>.scope
	// (systemd driver) or /kubepods/besteffort/pod<uid>/<id> (cgroupfs driver). It is made below a
	// cgroup of this test's own (/nstest-PID-N/...), so Pod.Cgroup is the path /proc/PID/cgroup shows.
	// CgroupV1 puts it in the cgroup v1 name=systemd hierarchy instead of the cgroup v2 one; where
	// there is none (a pure cgroup v2 machine) it falls back to v2 and logs so.
	Cgroup   string
	CgroupV1 bool
	// NoProcess makes only the named namespace (a sandbox before its pause process runs).
	NoProcess bool
	// HostUTS keeps the pod's process in the node's UTS namespace (no pod hostname).
	HostUTS bool
	// Namespace, when set, makes the pod a containerd one as the runtime records it: its sandbox's
	// OCI bundle under the node's /run/containerd/io.containerd.runtime.v2.task/k8s.io/ID/config.json
	// with the CRI annotations of the pod's namespace and name (Name), and the netns path (containerd
	// pkg/cri/annotations DefaultCRIAnnotations, core/runtime/v2/bundle.go NewBundle). It needs the
	// runtime's name under /run/netns (not NoNetns).
	Namespace string
}

// Pod is a pod sandbox on a sandbox node: a network namespace, a veth to the node and a long-lived
// process in it (its "pause" process).
type Pod struct {
	Name   string
	Netns  string // name under the node's /run/netns; "" with NoNetns
	HostIf string // the veth's node side
	PodIf  string // the veth's pod side: eth0
	// IPv4 and IPv6 are the pod's addresses; HostIPv4 and HostIPv6 the node side's, the pod's
	// default gateways.
	IPv4, IPv6, HostIPv4, HostIPv6 netip.Addr
	// PID is the pod's process as this machine numbers it, NodePID as the node's PID namespace does
	// (what the node's /proc shows); 0 with NoProcess.
	PID, NodePID int
	// Cgroup is the pod process's cgroup path as /proc/PID/cgroup shows it; "" without one.
	Cgroup string

	sb *Sandbox
}

var podSeq atomic.Int64

// AddPod makes a pod on the sandbox node and removes its process and cgroup when the test ends (the
// namespace and veth go with the sandbox). The sandbox's own PID namespace keeps a pod scan of its
// /proc to the sandbox's processes: it cannot take this machine's network namespace for a pod.
func (sb *Sandbox) AddPod(t testing.TB, o PodOptions) *Pod {
	t.Helper()
	if o.Name == "" {
		t.Fatal("AddPod: a pod needs a name")
	}
	if o.NoNetns && o.NoProcess {
		t.Fatal("AddPod: a namespace with neither a name nor a process does not exist")
	}
	n := podSeq.Add(1)
	p := &Pod{Name: o.Name, HostIf: o.HostIf, PodIf: "eth0", sb: sb}
	if p.HostIf == "" {
		p.HostIf = "lxc" + randHex(t, 6)
	}
	if len(p.HostIf) > 15 {
		t.Fatalf("AddPod: interface name %q is longer than 15 characters", p.HostIf)
	}
	if !o.NoNetns {
		p.Netns = o.Netns
		if p.Netns == "" {
			p.Netns = "cni-" + uuid(t)
		}
	}
	// Each pod gets its own /24 and /64: 10.(200+n/250).(n%250).0/24, fd00:200:0:n::/64.
	p.IPv4 = netip.AddrFrom4([4]byte{10, byte(200 + n/250), byte(n % 250), 2})
	p.HostIPv4 = netip.AddrFrom4([4]byte{10, byte(200 + n/250), byte(n % 250), 1})
	p.IPv6 = netip.MustParseAddr(fmt.Sprintf("fd00:200:0:%x::2", n))
	p.HostIPv6 = netip.MustParseAddr(fmt.Sprintf("fd00:200:0:%x::1", n))

	if p.Netns != "" {
		sb.Run(t, "ip netns add "+Quote(p.Netns))
	}
	if !o.NoProcess {
		p.start(t, o)
	}
	// The pod side is configured from inside its namespace; addresses skip DAD (nodad) so the pod
	// can send at once: they are the test's wiring, not what is under test.
	target := p.Netns
	if target == "" {
		target = strconv.Itoa(p.NodePID)
	}
	in := p.in()
	sb.Run(t, fmt.Sprintf(`set -e
ip link add %[1]s type veth peer name %[2]s netns %[3]s
ip addr add %[4]s/24 dev %[1]s
ip addr add %[5]s/64 dev %[1]s nodad
ip link set %[1]s up
%[6]s ip link set lo up
%[6]s ip addr add %[7]s/24 dev %[2]s
%[6]s ip addr add %[8]s/64 dev %[2]s nodad
%[6]s ip link set %[2]s up
%[6]s ip route add default via %[4]s
%[6]s ip -6 route add default via %[5]s
`, p.HostIf, p.PodIf, Quote(target), p.HostIPv4, p.HostIPv6, in, p.IPv4, p.IPv6))
	if o.Cgroup != "" && !o.NoProcess {
		p.joinCgroup(t, o)
	}
	if o.Namespace != "" {
		p.writeBundle(t, o)
	}
	return p
}

// podUIDInCgroup finds the pod UID in a kubelet pod cgroup path, as either cgroup driver writes it.
var podUIDInCgroup = regexp.MustCompile(`pod([0-9a-fA-F]{8}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{12})`)

// writeBundle writes the pod sandbox's OCI bundle as containerd 2.x does: a directory of root's (0700
// in a 0711 parent), config.json with the CRI annotations and the pinned network namespace.
func (p *Pod) writeBundle(t testing.TB, o PodOptions) {
	t.Helper()
	if p.Netns == "" {
		t.Fatal("AddPod: a pod the runtime records needs its netns name (not NoNetns)")
	}
	id := randHex(t, 32)
	// The pod's UID: the one its cgroup path carries (kubelet names the pod cgroup after it), else
	// a fresh one.
	podUID := uuid(t)
	if m := podUIDInCgroup.FindStringSubmatch(o.Cgroup); m != nil {
		podUID = strings.ReplaceAll(m[1], "_", "-")
	}
	spec := map[string]any{
		"ociVersion": "1.2.0",
		"annotations": map[string]string{
			"io.kubernetes.cri.container-type":    "sandbox",
			"io.kubernetes.cri.sandbox-id":        id,
			"io.kubernetes.cri.sandbox-name":      o.Name,
			"io.kubernetes.cri.sandbox-namespace": o.Namespace,
			"io.kubernetes.cri.sandbox-uid":       podUID,
		},
		"linux": map[string]any{"namespaces": []map[string]string{
			{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"},
			{"type": "network", "path": "/var/run/netns/" + p.Netns},
		}},
	}
	data, err := json.MarshalIndent(spec, "", "\t")
	if err != nil {
		t.Fatal(err)
	}
	dir := "/run/containerd/io.containerd.runtime.v2.task/k8s.io"
	p.sb.Run(t, fmt.Sprintf("set -e\nmkdir -p -m 0711 /run/containerd /run/containerd/io.containerd.runtime.v2.task %[1]s\nmkdir -m 0700 %[1]s/%[2]s", dir, id))
	if err := os.WriteFile(p.sb.Path(dir+"/"+id+"/config.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// start runs the pod's long-lived process in its namespace and, unless HostUTS, in a UTS namespace
// of its own with the pod name as hostname. Every step execs, so the process keeps one PID.
func (p *Pod) start(t testing.TB, o PodOptions) {
	t.Helper()
	ready := fmt.Sprintf("/run/nstest-pod-%d-%s.ready", podSeq.Load(), randHex(t, 4))
	script := ": > " + Quote(ready) + " && exec sleep infinity"
	if !o.HostUTS {
		script = "hostname " + Quote(o.Name) + " && " + script
	}
	var argv []string
	if p.Netns != "" {
		argv = []string{"ip", "netns", "exec", p.Netns}
		if !o.HostUTS {
			argv = append(argv, "unshare", "--uts")
		}
	} else {
		argv = []string{"unshare", "--net"}
		if !o.HostUTS {
			argv = append(argv, "--uts")
		}
	}
	argv = append(argv, "sh", "-c", script)
	_, pid := p.sb.StartPID(t, argv[0], argv[1:]...)
	WaitFor(t, 10*time.Second, "pod "+p.Name+"'s process", func() bool {
		_, err := os.Stat(p.sb.Path(ready))
		return err == nil
	})
	p.PID = pid
	var err error
	if p.NodePID, err = nsPID(pid); err != nil {
		t.Fatalf("pod %s: %v", p.Name, err)
	}
}

// nsPID returns pid's number in its innermost PID namespace (the NSpid line of /proc/PID/status).
func nsPID(pid int) (int, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "NSpid:"); ok {
			fs := strings.Fields(rest)
			if len(fs) == 0 {
				break
			}
			return strconv.Atoi(fs[len(fs)-1])
		}
	}
	return 0, fmt.Errorf("process %d: no NSpid line", pid)
}

// in is the command prefix that runs a program in the pod's network namespace, inside the node.
func (p *Pod) in() string {
	if p.Netns != "" {
		return "ip netns exec " + Quote(p.Netns)
	}
	return fmt.Sprintf("nsenter -t %d -n", p.NodePID)
}

// Run runs a shell script in the pod's network namespace (inside the node's other namespaces) and
// returns its output; an error fails the test.
func (p *Pod) Run(t testing.TB, script string) string {
	t.Helper()
	return p.sb.Run(t, p.in()+" sh -c "+Quote(script))
}

// NetState is the pod namespace's links, addresses, routes, rules and peer namespace ids as ip
// prints them, for proving that something left the pod unchanged.
func (p *Pod) NetState(t testing.TB) string {
	t.Helper()
	// An address still in IPv6 duplicate address detection (the kernel's fe80:: on the pod's eth0,
	// about a second after it came up) changes by itself: the state is taken once none is left, so
	// a before/after comparison sees only what the code under test did.
	p.sb.Run(t, fmt.Sprintf("for i in $(seq 100); do [ -z \"$(%s ip -6 addr show tentative)\" ] && exit 0; sleep 0.05; done; exit 0", p.in()))
	var b strings.Builder
	for _, c := range []string{"-d link show", "addr show", "route show table all", "-6 route show table all", "rule show", "-6 rule show", "netns list-id"} {
		fmt.Fprintf(&b, "echo '== ip %[1]s'; %[2]s ip %[1]s\n", c, p.in())
	}
	return p.sb.Run(t, b.String())
}

var cgroupSeq atomic.Int64

// joinCgroup moves the pod's process into o.Cgroup below a cgroup of this test's own.
func (p *Pod) joinCgroup(t testing.TB, o PodOptions) {
	t.Helper()
	p.Cgroup = FakeCgroup(t, p.PID, o.Cgroup, o.CgroupV1)
}

// FakeCgroup makes the cgroup path (a kubelet pod cgroup such as /kubepods/besteffort/pod<uid>/<id>)
// below a cgroup of this test's own, /nstest-PID-N, in the cgroup v2 hierarchy (v1: the cgroup v1
// name=systemd one, falling back to v2 where there is none), moves process pid (as this machine
// numbers it) into it, and returns the process's cgroup path as /proc/PID/cgroup shows it. When the
// test ends the process is killed and the cgroups removed. It skips the test where cgroups cannot be
// made (a read-only cgroupfs).
func FakeCgroup(t testing.TB, pid int, path string, v1 bool) string {
	t.Helper()
	mount, err := cgroupMount(v1)
	if v1 && err != nil {
		t.Logf("no cgroup v1 name=systemd hierarchy here (%v): using cgroup v2", err)
		mount, err = cgroupMount(false)
	}
	if err != nil {
		t.Skipf("cannot fake a kubepods cgroup here: %v", err)
	}
	top := fmt.Sprintf("nstest-%d-%d", os.Getpid(), cgroupSeq.Add(1))
	rel := filepath.Join("/", top, filepath.Clean("/"+path))
	dir := filepath.Join(mount, rel)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Skipf("cannot fake a kubepods cgroup here: %v", err)
	}
	t.Cleanup(func() {
		killWait(pid)
		// Leaf first; a cgroup is busy until its last process is reaped.
		for d := dir; d != mount && strings.HasPrefix(d, filepath.Join(mount, top)); d = filepath.Dir(d) {
			deadline := time.Now().Add(5 * time.Second)
			for {
				err := os.Remove(d)
				if err == nil || errors.Is(err, fs.ErrNotExist) || time.Now().After(deadline) {
					if err != nil && !errors.Is(err, fs.ErrNotExist) {
						t.Errorf("remove the test cgroup %s: %v", d, err)
					}
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	})
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		t.Fatalf("move process %d into %s: %v", pid, dir, err)
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.SplitSeq(string(data), "\n") {
		if f := strings.SplitN(l, ":", 3); len(f) == 3 && strings.Contains(f[2], top) {
			return f[2]
		}
	}
	t.Fatalf("/proc/%d/cgroup does not show %s:\n%s", pid, rel, data)
	return ""
}

// StartPID runs a program in the background inside the sandbox, as Start does, and returns it with
// the program's PID as this machine numbers it (the command's own: Start forks the program into the
// sandbox's PID namespace itself). StartPID waits for the command itself, so a program that exits
// is reaped at once, as a process of a node is by its init, and its /proc entry goes: do not Wait
// for the command.
func (sb *Sandbox) StartPID(t testing.TB, name string, args ...string) (*exec.Cmd, int) {
	t.Helper()
	cmd := sb.Start(t, name, args...)
	reaped := make(chan struct{})
	sb.mu.Lock()
	if sb.reaped == nil {
		sb.reaped = map[*exec.Cmd]chan struct{}{}
	}
	sb.reaped[cmd] = reaped
	sb.mu.Unlock()
	go func() { _ = cmd.Wait(); close(reaped) }()
	return cmd, cmd.Process.Pid
}

// Reaped is closed once StartPID's own wait has reaped cmd (nil for a command StartPID did not
// start): what a test waits on instead of a second cmd.Wait.
func (sb *Sandbox) Reaped(cmd *exec.Cmd) <-chan struct{} {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sb.reaped[cmd]
}

// killWait kills a process and waits (a while) until it is gone.
func killWait(pid int) {
	if pid <= 0 {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); errors.Is(err, fs.ErrNotExist) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cgroupMount finds where this machine mounts the cgroup v2 hierarchy, or (v1) the cgroup v1
// name=systemd one, from /proc/self/mountinfo.
func cgroupMount(v1 bool) (string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	for l := range strings.SplitSeq(string(data), "\n") {
		pre, post, ok := strings.Cut(l, " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		switch {
		case !v1 && g[0] == "cgroup2":
			return f[4], nil
		case v1 && g[0] == "cgroup" && strings.Contains(","+g[2]+",", ",name=systemd,"):
			return f[4], nil
		}
	}
	if v1 {
		return "", errors.New("no cgroup v1 name=systemd mount")
	}
	return "", errors.New("no cgroup2 mount")
}

func randHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// uuid is a random version 4 UUID, as containerd names its sandboxes' namespaces.
func uuid(t testing.TB) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// UUID is a random version 4 UUID, for tests that name a namespace as CRI-O does.
func UUID(t testing.TB) string { return uuid(t) }

// PodCgroup is a systemd-driver kubepods cgroup path for the i-th pod of a test node (a unique pod
// UID per i), as kubelet names best-effort pods' sandboxes under containerd.
func PodCgroup(i int) string {
	return fmt.Sprintf("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod%08x_0000_4000_8000_000000000000.slice/cri-containerd-%d.scope", i, i)
}
