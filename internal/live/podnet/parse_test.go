package podnet

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const (
	uid    = "0b8f5a6c-2d1e-4f3a-9c7b-1a2b3c4d5e6f"
	uidSD  = "0b8f5a6c_2d1e_4f3a_9c7b_1a2b3c4d5e6f"
	cid    = "3f1c9e0d7a2b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5"
	static = "6d1bd1a8e1b1d9c3f0b4e6f2a7c8d9e0" // a static pod's UID: a hash, no dashes
)

func TestParseCgroup(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Cgroup
	}{
		{"v2 systemd driver, burstable",
			"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidSD + ".slice/cri-containerd-" + cid + ".scope\n",
			Cgroup{Kubepods: true, PodUID: uid, QoS: "burstable", Path: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidSD + ".slice/cri-containerd-" + cid + ".scope"}},
		{"v2 systemd driver, guaranteed, CRI-O scope",
			"0::/kubepods.slice/kubepods-pod" + uidSD + ".slice/crio-" + cid + ".scope\n",
			Cgroup{Kubepods: true, PodUID: uid, QoS: "guaranteed", Path: "/kubepods.slice/kubepods-pod" + uidSD + ".slice/crio-" + cid + ".scope"}},
		{"v2 cgroupfs driver, besteffort",
			"0::/kubepods/besteffort/pod" + uid + "/" + cid + "\n",
			Cgroup{Kubepods: true, PodUID: uid, QoS: "besteffort", Path: "/kubepods/besteffort/pod" + uid + "/" + cid}},
		{"v2 cgroupfs driver, guaranteed static pod",
			"0::/kubepods/pod" + static + "/" + cid + "\n",
			Cgroup{Kubepods: true, PodUID: static, QoS: "guaranteed", Path: "/kubepods/pod" + static + "/" + cid}},
		{"v1 cgroupfs driver, every hierarchy",
			"12:pids:/kubepods/burstable/pod" + uid + "/" + cid + "\n" +
				"11:memory:/kubepods/burstable/pod" + uid + "/" + cid + "\n" +
				"3:cpu,cpuacct:/kubepods/burstable/pod" + uid + "/" + cid + "\n" +
				"1:name=systemd:/kubepods/burstable/pod" + uid + "/" + cid + "\n",
			Cgroup{Kubepods: true, PodUID: uid, QoS: "burstable", Path: "/kubepods/burstable/pod" + uid + "/" + cid}},
		{"hybrid: only the named systemd hierarchy and the unified one say kubepods",
			"9:name=systemd:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + uidSD + ".slice/docker-" + cid + ".scope\n" +
				"4:memory:/\n0::/\n",
			Cgroup{Kubepods: true, PodUID: uid, QoS: "besteffort", Path: "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + uidSD + ".slice/docker-" + cid + ".scope"}},
		{"kind: kubelet's cgroup root above kubepods",
			"0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod" + uidSD + ".slice/cri-containerd-" + cid + ".scope\n",
			Cgroup{Kubepods: true, PodUID: uid, QoS: "besteffort", Path: "/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod" + uidSD + ".slice/cri-containerd-" + cid + ".scope"}},
		{"a test's cgroup above kubepods, cgroupfs",
			"0::/nstest-1/kubepods/burstable/pod" + uid + "/" + cid + "\n",
			Cgroup{Kubepods: true, PodUID: uid, QoS: "burstable", Path: "/nstest-1/kubepods/burstable/pod" + uid + "/" + cid}},
		{"the first pod-level match wins over a QoS-level one",
			"2:cpu:/kubepods/burstable\n1:name=systemd:/kubepods/burstable/pod" + uid + "/" + cid + "\n",
			Cgroup{Kubepods: true, PodUID: uid, QoS: "burstable", Path: "/kubepods/burstable/pod" + uid + "/" + cid}},
		{"kubepods itself, no pod level",
			"0::/kubepods.slice\n",
			Cgroup{Kubepods: true, Path: "/kubepods.slice"}},
		{"a path with colons", "0::/kubepods/pod" + uid + "/a:b\n",
			Cgroup{Kubepods: true, PodUID: uid, QoS: "guaranteed", Path: "/kubepods/pod" + uid + "/a:b"}},
		{"a malformed pod element is still kubepods", "0::/kubepods/burstable/podXYZ/" + cid + "\n",
			Cgroup{Kubepods: true, Path: "/kubepods/burstable/podXYZ/" + cid}},
		{"host service", "0::/system.slice/containerd.service\n", Cgroup{}},
		{"kubelet itself", "0::/system.slice/kubelet.service\n", Cgroup{}},
		{"docker without kubernetes", "0::/system.slice/docker-" + cid + ".scope\n", Cgroup{}},
		{"kubepods as a substring of an element is not kubepods", "0::/system.slice/kubepods-fake.service\n0::/notkubepods/x\n", Cgroup{}},
		{"a user session", "0::/user.slice/user-1000.slice/session-3.scope\n", Cgroup{}},
		{"root", "0::/\n", Cgroup{}},
		{"empty file", "", Cgroup{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseCgroup([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("ParseCgroup (-want +got):\n%s", d)
			}
		})
	}
}

func TestParseCgroupErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"0:/kubepods\n", "line 1: \"0:/kubepods\" is not hierarchy-ID:controllers:path"},
		{"0::/\nx::/kubepods\n", "line 2: hierarchy ID \"x\" is not a number"},
		{"0::kubepods\n", "line 1: cgroup path \"kubepods\" is not absolute"},
		{"::/\n", "line 1: hierarchy ID \"\" is not a number"},
	}
	for _, tt := range tests {
		_, err := ParseCgroup([]byte(tt.in))
		if err == nil || err.Error() != tt.want {
			t.Errorf("ParseCgroup(%q) = %v, want %q", tt.in, err, tt.want)
		}
	}
}

func TestNetnsRuntime(t *testing.T) {
	tests := []struct{ name, want string }{
		{"cni-" + uid, RuntimeContainerd},
		{"cni-" + strings.ToUpper(uid), RuntimeContainerd},
		{uid, RuntimeCRIO},
		{"netns-" + uid, ""},     // podman
		{"cni-" + uid + "x", ""}, // too long
		{"cni-" + uid[:35], ""},  // too short
		{"cni-" + strings.ReplaceAll(uid, "-", "_"), ""},
		{"cni-0b8f5a6c-2d1e-4f3a-9c7b-1a2b3c4d5e6g", ""},
		{"cni-", ""},
		{"wg-corp", ""},
		{"vpn0", ""},
		{"default", ""},
		{"", ""},
		{"0b8f5a6c2d1e4f3a9c7b1a2b3c4d5e6f0000", ""}, // 36 characters, no dashes
	}
	for _, tt := range tests {
		if got := NetnsRuntime(tt.name); got != tt.want {
			t.Errorf("NetnsRuntime(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// FuzzParseCgroup: any input gives a result or an error, never a panic; a pod UID or QoS only comes
// with Kubepods, and a found path is one of the input's lines.
func FuzzParseCgroup(f *testing.F) {
	for _, s := range []string{
		"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidSD + ".slice/cri-containerd-" + cid + ".scope\n",
		"12:pids:/kubepods/burstable/pod" + uid + "/" + cid + "\n1:name=systemd:/\n",
		"0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-pod" + uidSD + ".slice\n",
		"0::/\n", "", "::", "0::/kubepods/pod/", "0::/kubepods.slice/-pod.slice",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCgroup(data)
		if err != nil {
			if c != (Cgroup{}) {
				t.Fatalf("error %v with a result %+v", err, c)
			}
			return
		}
		if !c.Kubepods && c != (Cgroup{}) {
			t.Fatalf("not kubepods but %+v", c)
		}
		if (c.PodUID == "") != (c.QoS == "") {
			t.Fatalf("pod UID %q without QoS %q or the reverse", c.PodUID, c.QoS)
		}
		if c.Kubepods && !strings.Contains(string(data), c.Path) {
			t.Fatalf("path %q is not in the input", c.Path)
		}
		if c.PodUID != "" && !isUID(c.PodUID) {
			t.Fatalf("pod UID %q", c.PodUID)
		}
	})
}

// FuzzNetnsRuntime: a name is taken for a pod only in the two runtime forms.
func FuzzNetnsRuntime(f *testing.F) {
	for _, s := range []string{"cni-" + uid, uid, "netns-" + uid, "wg0", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		switch NetnsRuntime(name) {
		case RuntimeContainerd:
			if !strings.HasPrefix(name, "cni-") || len(name) != 40 {
				t.Fatalf("containerd for %q", name)
			}
		case RuntimeCRIO:
			if len(name) != 36 || strings.Count(name, "-") != 4 {
				t.Fatalf("cri-o for %q", name)
			}
		case "":
		default:
			t.Fatalf("unknown runtime for %q", name)
		}
	})
}

// TestParseSandboxSpec reads pod sandboxes' OCI specs as containerd and CRI-O write them: the pod's
// namespace, name and UID, and the runtime's netns name; a container's spec, a hostNetwork
// sandbox's, and names Kubernetes would not allow are no pod's.
func TestParseSandboxSpec(t *testing.T) {
	containerd := func(typ, ns, name, netns string) string {
		return `{"ociVersion":"1.2.0","annotations":{"io.kubernetes.cri.container-type":"` + typ + `","io.kubernetes.cri.sandbox-id":"f00","io.kubernetes.cri.sandbox-namespace":"` + ns +
			`","io.kubernetes.cri.sandbox-name":"` + name + `","io.kubernetes.cri.sandbox-uid":"` + uid + `"},"linux":{"namespaces":[{"type":"pid"},{"type":"network","path":"` + netns + `"}]}}`
	}
	for _, tc := range []struct {
		name, spec string
		want       RuntimePod
		ok         bool
		err        string
	}{
		{"containerd's sandbox", containerd("sandbox", "kube-system", "coredns-5d78c9869d-h2k4x", "/var/run/netns/cni-"+uid), RuntimePod{Namespace: "kube-system", Name: "coredns-5d78c9869d-h2k4x", UID: uid, Netns: "cni-" + uid}, true, ""},
		{"pinned under /run/netns", containerd("sandbox", "default", "web-0", "/run/netns/cni-"+uid), RuntimePod{Namespace: "default", Name: "web-0", UID: uid, Netns: "cni-" + uid}, true, ""},
		{"CRI-O's sandbox", `{"annotations":{"io.kubernetes.cri-o.ContainerType":"sandbox","io.kubernetes.cri-o.Namespace":"kube-system","io.kubernetes.cri-o.KubeName":"node-local-dns-x7k2p"},"linux":{"namespaces":[{"type":"network","path":"/var/run/netns/` + uid + `"}]}}`,
			RuntimePod{Namespace: "kube-system", Name: "node-local-dns-x7k2p", Netns: uid}, true, ""},
		{"a container's spec", containerd("container", "kube-system", "coredns", "/proc/42/ns/net"), RuntimePod{}, false, ""},
		{"a hostNetwork sandbox", `{"annotations":{"io.kubernetes.cri.container-type":"sandbox","io.kubernetes.cri.sandbox-namespace":"kube-system","io.kubernetes.cri.sandbox-name":"node-local-dns-x"},"linux":{"namespaces":[{"type":"pid"}]}}`, RuntimePod{}, false, ""},
		{"no annotations", `{"ociVersion":"1.2.0"}`, RuntimePod{}, false, ""},
		{"a namespace Kubernetes refuses", containerd("sandbox", "Kube System", "x", "/var/run/netns/cni-"+uid), RuntimePod{}, false, "not a Kubernetes namespace name"},
		{"a name with a newline", containerd("sandbox", "kube-system", `x\ny`, "/var/run/netns/cni-"+uid), RuntimePod{}, false, "not a Kubernetes pod name"},
		{"a netns that is no runtime's", containerd("sandbox", "kube-system", "x", "/var/run/netns/wg-corp"), RuntimePod{}, false, "no runtime's name"},
		{"not JSON", "annotations: {}", RuntimePod{}, false, "not an OCI runtime spec"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := ParseSandboxSpec([]byte(tc.spec))
			if got != tc.want || ok != tc.ok || (tc.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseSandboxSpec = %+v, %v, %v; want %+v, %v, an error saying %q", got, ok, err, tc.want, tc.ok, tc.err)
			}
		})
	}
}

func FuzzParseSandboxSpec(f *testing.F) {
	f.Add([]byte(`{"annotations":{"io.kubernetes.cri.container-type":"sandbox","io.kubernetes.cri.sandbox-namespace":"kube-system","io.kubernetes.cri.sandbox-name":"coredns-0"},"linux":{"namespaces":[{"type":"network","path":"/var/run/netns/cni-` + uid + `"}]}}`))
	f.Add([]byte(`{"annotations":{"io.kubernetes.cri-o.ContainerType":"sandbox"},"linux":{"namespaces":[{"type":"network","path":"/run/netns/x"}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, ok, err := ParseSandboxSpec(data)
		if !ok {
			return
		}
		if err != nil || !dns1123Label(p.Namespace) || !dns1123Subdomain(p.Name) || NetnsRuntime(p.Netns) == "" {
			t.Fatalf("a pod read with a name Kubernetes would not give it: %+v (%v)", p, err)
		}
	})
}
