package podnet

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nodedns/nodedns/probes/podprobe"
)

// fixture builds a proc root and a run root in which each namespace is a regular file: hard links
// give two paths the same device and inode, as /proc/PID/ns/net and its /run/netns bind mount have.
type fixture struct {
	t          *testing.T
	proc, run  string
	hostLinks  []link
	podLinks   map[podprobe.NSID][]link
	linkErrors map[podprobe.NSID]error
}

func newFixture(t *testing.T) *fixture {
	dir := t.TempDir()
	f := &fixture{t: t, proc: filepath.Join(dir, "proc"), run: filepath.Join(dir, "run"), podLinks: map[podprobe.NSID][]link{}, linkErrors: map[podprobe.NSID]error{}}
	f.mkdir(f.proc)
	f.mkdir(filepath.Join(f.run, "netns"))
	f.mkdir(filepath.Join(dir, "ns"))
	return f
}

func (f *fixture) mkdir(p string) {
	if err := os.MkdirAll(p, 0o755); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) write(p, s string) {
	f.mkdir(filepath.Dir(p))
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// ns makes a namespace file; a UTS one holds the hostname the fake system reads from it.
func (f *fixture) ns(name, content string) string {
	p := filepath.Join(filepath.Dir(f.proc), "ns", name)
	f.write(p, content)
	return p
}

func (f *fixture) link(target, p string) {
	f.mkdir(filepath.Dir(p))
	if err := os.Link(target, p); err != nil {
		f.t.Fatal(err)
	}
}

// process adds /proc/PID with a cgroup file and links to its namespaces ("" leaves one out).
func (f *fixture) process(pid, cgroup, net, uts string) {
	dir := filepath.Join(f.proc, pid)
	f.write(filepath.Join(dir, "cgroup"), cgroup)
	if net != "" {
		f.link(net, filepath.Join(dir, "ns/net"))
	}
	if uts != "" {
		f.link(uts, filepath.Join(dir, "ns/uts"))
	}
}

func (f *fixture) netns(name, net string) { f.link(net, filepath.Join(f.run, "netns", name)) }

func (f *fixture) id(p string) podprobe.NSID {
	id, err := statNS(p)
	if err != nil {
		f.t.Fatal(err)
	}
	return id
}

func (f *fixture) options() Options {
	return Options{ProcRoot: f.proc, RunRoot: f.run, Host: filepath.Join(f.proc, "1"), sys: &system{
		hostname: func(p string) (string, error) {
			data, err := os.ReadFile(p)
			return strings.TrimSpace(string(data)), err
		},
		podLinks: func(p string, id podprobe.NSID) ([]link, error) {
			if got := f.id(p); got != id {
				return nil, errStaleNS
			}
			if err := f.linkErrors[id]; err != nil {
				return nil, err
			}
			return f.podLinks[id], nil
		},
		hostLinks: func() ([]link, error) { return f.hostLinks, nil },
	}}
}

const (
	uid2 = "11111111-2222-4333-8444-555555555555"
	uid3 = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"
	uid4 = "99999999-8888-4777-8666-555555555555"
	uid5 = "12345678-1234-4234-8234-123456789abc"
)

// TestFindFixture runs Find on a node in files: pods found by cgroup (both drivers) and by runtime
// name, deduplicated, named in the design's order, paired with their host-side veth; the host's own
// namespace (a hostNetwork pod, the host pinned under a runtime's name) and namespaces that are
// neither (a VPN's, podman's) are left out.
func TestFindFixture(t *testing.T) {
	f := newFixture(t)
	hostNet, hostUTS := f.ns("host-net", ""), f.ns("host-uts", "node-1")
	f.process("1", "0::/init.scope\n", hostNet, hostUTS)

	// web-0: containerd, systemd driver; the pause process and an app container share the namespace.
	web := f.ns("web-net", "")
	webUTS := f.ns("web-uts", "web-0")
	f.process("100", "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"+uidSD+".slice/cri-containerd-aaaa.scope\n", web, webUTS)
	f.process("101", "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"+uidSD+".slice/cri-containerd-bbbb.scope\n", web, webUTS)
	f.netns("cni-"+uid, web)

	// A cgroupfs-driver pod on cgroup v1 whose namespace has no name, whose process kept the host's
	// UTS namespace: named by PID.
	anon := f.ns("anon-net", "")
	f.process("200", "4:memory:/kubepods/besteffort/pod"+uid2+"/cccc\n1:name=systemd:/kubepods/besteffort/pod"+uid2+"/cccc\n", anon, hostUTS)

	// A hostNetwork pod: in kubepods, in the host's namespace. Not a pod here.
	f.process("300", "0::/kubepods.slice/kubepods-pod"+strings.ReplaceAll(uid3, "-", "_")+".slice/cri-containerd-dddd.scope\n", hostNet, hostUTS)

	// A VPN's namespace with its daemon; podman's; neither is a pod.
	vpn := f.ns("vpn-net", "")
	f.process("400", "0::/system.slice/wg-quick@corp.service\n", vpn, f.ns("vpn-uts", "vpn-box"))
	f.netns("wg-corp", vpn)
	podman := f.ns("podman-net", "")
	f.process("600", "0::/user.slice/user-1000.slice/libpod-eeee.scope\n", podman, f.ns("podman-uts", "podman-ctr"))
	f.netns("netns-"+uid4, podman)

	// A CRI-O sandbox whose only process is outside kubepods: found by name, named by its hostname.
	crio := f.ns("crio-net", "")
	f.netns(uid4, crio)
	f.process("500", "0::/system.slice/crio-conmon-ffff.scope\n", crio, f.ns("crio-uts", "crio-pod"))

	// A containerd sandbox before its pause process runs: named by its netns name.
	early := f.ns("early-net", "")
	f.netns("cni-"+uid5, early)

	// The host's namespace pinned under a runtime-like name is still the host's.
	f.netns("cni-"+uid3, hostNet)

	// Processes that are no pods: a malformed cgroup file, one that exited mid-scan (no ns/net).
	f.process("700", "garbage\n", f.ns("seven-net", ""), "")
	f.process("800", "0::/kubepods/pod"+uid2+"/x\n", "", "")
	f.write(filepath.Join(f.proc, "self", "cgroup"), "0::/\n")
	f.write(filepath.Join(f.proc, "sys", "x"), "")

	// The runtimes' records: containerd's of web-0 (namespace shop) and of the early sandbox, but
	// the latter writable by others (a spec anyone can write is no runtime's word: not believed),
	// and CRI-O's of its sandbox (kube-system).
	bundle := func(dir, id, ns, name, podUID, netns string) string {
		p := filepath.Join(f.run, dir, id, "config.json")
		f.write(p, `{"ociVersion":"1.2.0","annotations":{"io.kubernetes.cri.container-type":"sandbox","io.kubernetes.cri.sandbox-namespace":"`+ns+
			`","io.kubernetes.cri.sandbox-name":"`+name+`","io.kubernetes.cri.sandbox-uid":"`+podUID+`"},"linux":{"namespaces":[{"type":"pid"},{"type":"network","path":"/var/run/netns/`+netns+`"}]}}`)
		return p
	}
	bundle("containerd/io.containerd.runtime.v2.task/k8s.io", "a1", "shop", "web-0", uid, "cni-"+uid)
	open := bundle("containerd/io.containerd.runtime.v2.task/k8s.io", "e5", "kube-system", "coredns-x", uid5, "cni-"+uid5)
	if err := os.Chmod(open, 0o666); err != nil {
		t.Fatal(err)
	}
	f.write(filepath.Join(f.run, "containers/storage/overlay-containers/c4/userdata/config.json"),
		`{"annotations":{"io.kubernetes.cri-o.ContainerType":"sandbox","io.kubernetes.cri-o.Namespace":"kube-system","io.kubernetes.cri-o.KubeName":"coredns-7d8f"},"linux":{"namespaces":[{"type":"network","path":"/var/run/netns/`+uid4+`"}]}}`)

	// Links: web-0's eth0 pairs with lxc…, the anonymous pod's with vlan…; the early sandbox's eth0
	// points at index 19, which in the host is a VLAN over eth0 whose parent index happens to be 2:
	// not a veth, no pair. The CRI-O sandbox's links cannot be read.
	f.hostLinks = []link{{1, "lo", "device", 0}, {2, "eth0", "device", 0}, {17, "lxc0123456789ab", "veth", 2}, {18, "vlan0123456789a", "veth", 3}, {19, "eth0.10", "vlan", 2}}
	f.podLinks[f.id(web)] = []link{{1, "lo", "device", 0}, {2, "eth0", "veth", 17}}
	f.podLinks[f.id(anon)] = []link{{1, "lo", "device", 0}, {2, "net1", "ipvlan", 2}, {3, "eth0", "veth", 18}}
	f.podLinks[f.id(early)] = []link{{2, "eth0", "veth", 19}}
	f.linkErrors[f.id(crio)] = errors.New("permission denied")

	got, err := Find(context.Background(), f.options())
	if err != nil {
		t.Fatal(err)
	}
	want := []podprobe.Pod{
		{Name: "cni-" + uid5, NamedBy: podprobe.NamedByNetns, ID: f.id(early), NetNS: filepath.Join(f.run, "netns", "cni-"+uid5), Netns: "cni-" + uid5, Runtime: RuntimeContainerd},
		{Name: "crio-pod", NamedBy: podprobe.NamedByHostname, Namespace: "kube-system", PodName: "coredns-7d8f", ID: f.id(crio), NetNS: filepath.Join(f.run, "netns", uid4), Netns: uid4, Runtime: RuntimeCRIO, PID: 500},
		{Name: "pid 200", NamedBy: podprobe.NamedByPID, ID: f.id(anon), NetNS: filepath.Join(f.proc, "200", "ns/net"), PID: 200, Kubepods: true, PodUID: uid2, QoS: "besteffort",
			PodIf: "eth0", HostIf: "vlan0123456789a", HostIfIndex: 18},
		{Name: "web-0", NamedBy: podprobe.NamedByHostname, Namespace: "shop", PodName: "web-0", ID: f.id(web), NetNS: filepath.Join(f.run, "netns", "cni-"+uid), Netns: "cni-" + uid, Runtime: RuntimeContainerd, PID: 100, Kubepods: true, PodUID: uid, QoS: "burstable",
			PodIf: "eth0", HostIf: "lxc0123456789ab", HostIfIndex: 17},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Find (-want +got):\n%s", d)
	}
}

// TestFindEmpty: a fresh node (no runtime directory yet, no pod) has no pod namespaces and no error.
func TestFindEmpty(t *testing.T) {
	f := newFixture(t)
	host := f.ns("host-net", "")
	f.process("1", "0::/init.scope\n", host, f.ns("host-uts", "node"))
	f.process("2", "0::/system.slice/kubelet.service\n", host, "")
	if err := os.RemoveAll(filepath.Join(f.run, "netns")); err != nil {
		t.Fatal(err)
	}
	got, err := Find(context.Background(), f.options())
	if err != nil || len(got) != 0 {
		t.Fatalf("Find = %v, %v; want none", got, err)
	}
}

// TestFindErrors: an unreadable proc root or host namespace is an error naming the path.
func TestFindErrors(t *testing.T) {
	f := newFixture(t)
	o := f.options()
	if _, err := Find(context.Background(), o); err == nil || !strings.Contains(err.Error(), "ns/net") {
		t.Errorf("no host namespace: %v", err)
	}
	f.process("1", "0::/\n", f.ns("host-net", ""), "")
	o.ProcRoot = filepath.Join(f.proc, "missing")
	if _, err := Find(context.Background(), o); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing proc root: %v", err)
	}
}

// TestFindNamingTries: a pod whose processes' hostnames cannot be read falls back to its netns name,
// after a bounded number of tries.
func TestFindNamingTries(t *testing.T) {
	f := newFixture(t)
	f.process("1", "0::/\n", f.ns("host-net", ""), f.ns("host-uts", "node"))
	pod := f.ns("pod-net", "")
	for i := range 10 {
		f.process(string(rune('a'+i))+"x", "", "", "") // not numeric: skipped
		f.process(strings.Repeat("1", 1)+string(rune('0'+i))+"0", "0::/kubepods/pod"+uid+"/c\n", pod, f.ns("uts"+string(rune('0'+i)), ""))
	}
	f.netns("cni-"+uid, pod)
	o := f.options()
	calls := 0
	o.sys.hostname = func(string) (string, error) { calls++; return "", errors.New("no") }
	got, err := Find(context.Background(), o)
	if err != nil || len(got) != 1 {
		t.Fatalf("Find = %v, %v", got, err)
	}
	if got[0].Name != "cni-"+uid || got[0].NamedBy != podprobe.NamedByNetns || calls != namingTries {
		t.Errorf("named %q by %s after %d hostname reads, want the netns name after %d", got[0].Name, got[0].NamedBy, calls, namingTries)
	}
}

// TestFindRuntimeRecords: a runtime's record names a pod only when it is the runtime's word and
// agrees with the pod's cgroup: a record whose pod UID is not the one the pod's cgroup path carries,
// two records of one namespace that disagree, and a record in a directory others can write name
// nothing; the pod keeps its hostname.
func TestFindRuntimeRecords(t *testing.T) {
	for _, tc := range []struct {
		name      string
		records   [][2]string // bundle directory, pod UID of the record
		openDir   bool
		namespace string
	}{
		{"the runtime's record", [][2]string{{"a1", uid}}, false, "kube-system"},
		{"a record with another pod's UID", [][2]string{{"a1", uid2}}, false, ""},
		{"two records that disagree", [][2]string{{"a1", uid}, {"a2", ""}}, false, ""},
		{"a record in a directory others can write", [][2]string{{"a1", uid}}, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.process("1", "0::/init.scope\n", f.ns("host-net", ""), f.ns("host-uts", "node-1"))
			web := f.ns("web-net", "")
			f.process("100", "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"+uidSD+".slice/cri-containerd-aaaa.scope\n", web, f.ns("web-uts", "coredns-0"))
			f.netns("cni-"+uid, web)
			k8s := filepath.Join(f.run, "containerd/io.containerd.runtime.v2.task/k8s.io")
			for i, r := range tc.records {
				name := "coredns-0"
				if i > 0 {
					name = "coredns-1"
				}
				f.write(filepath.Join(k8s, r[0], "config.json"), `{"annotations":{"io.kubernetes.cri.container-type":"sandbox","io.kubernetes.cri.sandbox-namespace":"kube-system","io.kubernetes.cri.sandbox-name":"`+name+
					`","io.kubernetes.cri.sandbox-uid":"`+r[1]+`"},"linux":{"namespaces":[{"type":"network","path":"/var/run/netns/cni-`+uid+`"}]}}`)
			}
			if tc.openDir {
				if err := os.Chmod(k8s, 0o777); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Find(context.Background(), f.options())
			if err != nil || len(got) != 1 {
				t.Fatalf("Find: %+v, %v", got, err)
			}
			if got[0].Namespace != tc.namespace || got[0].Name != "coredns-0" {
				t.Errorf("pod named %q in namespace %q (pod name %q), want namespace %q", got[0].Name, got[0].Namespace, got[0].PodName, tc.namespace)
			}
		})
	}
}
