package podnet

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"github.com/nodedns/nodedns/internal/ascii"
)

// Cgroup is what one /proc/PID/cgroup file says about kubelet's pod cgroups.
type Cgroup struct {
	// Kubepods is true when some hierarchy places the process under kubelet's kubepods cgroup.
	Kubepods bool
	// PodUID is the pod's UID from the pod cgroup's name (dashes restored for the systemd driver,
	// which writes them as underscores); "" when the process sits above the pod level.
	PodUID string
	// QoS is the pod's QoS class from the path: "guaranteed" (no QoS level), "burstable" or
	// "besteffort"; "" when the process sits above the pod level.
	QoS string
	// Path is the cgroup path of the hierarchy that matched.
	Path string
}

// ParseCgroup reads a /proc/PID/cgroup file: one `hierarchy-ID:controller-list:cgroup-path` line per
// hierarchy (cgroup v1: one per mounted hierarchy, named ones as `name=systemd`; cgroup v2: the single
// `0::PATH` line; hybrid nodes have both). A process is in kubelet's pod cgroups when a path has a
// kubepods element, as either cgroup driver names it:
//   - cgroupfs: /kubepods/burstable/pod<uid>/<container-id> (guaranteed pods directly below kubepods)
//   - systemd:  /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_with_underscores>.slice/cri-containerd-<id>.scope
//
// The kubepods element may sit below a kubelet cgroup root (kind nodes run kubelet with
// --cgroup-root=/kubelet: /kubelet.slice/kubelet-kubepods.slice/...), so any element counts, never a
// substring of one. Paths are relative to the reader's cgroup namespace root: nodedns reads from the
// host's, so a container's own cgroup namespace does not hide its kubepods path.
func ParseCgroup(data []byte) (Cgroup, error) {
	var found Cgroup
	for n, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		// The path is the third field and may itself contain colons.
		f := strings.SplitN(string(line), ":", 3)
		if len(f) != 3 {
			return Cgroup{}, fmt.Errorf("line %d: %q is not hierarchy-ID:controllers:path", n+1, line)
		}
		if f[0] == "" || strings.Trim(f[0], "0123456789") != "" {
			return Cgroup{}, fmt.Errorf("line %d: hierarchy ID %q is not a number", n+1, f[0])
		}
		if !strings.HasPrefix(f[2], "/") {
			return Cgroup{}, fmt.Errorf("line %d: cgroup path %q is not absolute", n+1, f[2])
		}
		if found.Kubepods && found.PodUID != "" {
			continue // keep validating the rest, but the first pod-level match wins
		}
		if c, ok := kubepodsPath(f[2]); ok && (!found.Kubepods || c.PodUID != "") {
			found = c
		}
	}
	return found, nil
}

// kubepodsPath judges one cgroup path.
func kubepodsPath(p string) (Cgroup, bool) {
	elems := strings.Split(strings.Trim(p, "/"), "/")
	for i, e := range elems {
		var systemd bool
		switch {
		case e == "kubepods":
		case isKubepodsSlice(e):
			systemd = true
		default:
			continue
		}
		c := Cgroup{Kubepods: true, Path: p}
		rest := elems[i+1:]
		if systemd {
			c.QoS, c.PodUID = podSlice(rest)
		} else {
			c.QoS, c.PodUID = podDir(rest)
		}
		return c, true
	}
	return Cgroup{}, false
}

// isKubepodsSlice reports a systemd slice of kubelet's pod hierarchy: kubepods.slice, or a unit name
// whose dash-separated parts (systemd's nesting) contain kubepods, as kubelet-kubepods.slice does.
func isKubepodsSlice(e string) bool {
	name, ok := strings.CutSuffix(e, ".slice")
	if !ok {
		return false
	}
	for part := range strings.SplitSeq(name, "-") {
		if part == "kubepods" {
			return true
		}
	}
	return false
}

// podDir reads the cgroupfs driver's levels below kubepods: [qos/]pod<uid>/...
func podDir(rest []string) (qos, uid string) {
	if len(rest) > 0 && (rest[0] == "burstable" || rest[0] == "besteffort") {
		qos, rest = rest[0], rest[1:]
	}
	if len(rest) == 0 {
		return "", ""
	}
	id, ok := strings.CutPrefix(rest[0], "pod")
	if !ok || !isUID(id) {
		return "", ""
	}
	if qos == "" {
		qos = "guaranteed"
	}
	return qos, id
}

// podSlice reads the systemd driver's levels below kubepods.slice:
// [kubepods-QOS.slice/]kubepods[-QOS]-pod<uid_with_underscores>.slice/...
func podSlice(rest []string) (qos, uid string) {
	for _, e := range rest {
		name, ok := strings.CutSuffix(e, ".slice")
		if !ok {
			break
		}
		i := strings.LastIndex(name, "-pod")
		if i < 0 {
			continue // a QoS slice such as kubepods-burstable.slice
		}
		id := strings.ReplaceAll(name[i+len("-pod"):], "_", "-")
		if !isUID(id) {
			return "", ""
		}
		prefix := strings.Split(name[:i], "-")
		switch q := prefix[len(prefix)-1]; q {
		case "burstable", "besteffort":
			return q, id
		case "kubepods":
			return "guaranteed", id
		}
		return "", ""
	}
	return "", ""
}

// isUID accepts a pod UID: an API server's UUID, or a static pod's hash (hex without dashes).
func isUID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F' || r == '-') {
			return false
		}
	}
	return true
}

// Runtime names of the namespaces container runtimes pin under /run/netns.
const (
	RuntimeContainerd = "containerd" // cni-<uuid> (containerd's CRI plugin, 1.3 and later)
	RuntimeCRIO       = "cri-o"      // <uuid> (CRI-O's pinns)
)

// NetnsRuntime names the container runtime that pins a network namespace under /run/netns with this
// name, or "" when the name is not a pod sandbox's: a VPN's (wg-*, a tunnel's), podman's
// (netns-<uuid>), or anything an operator made with `ip netns add`.
func NetnsRuntime(name string) string {
	if id, ok := strings.CutPrefix(name, "cni-"); ok {
		if ascii.IsUUID(id) {
			return RuntimeContainerd
		}
		return ""
	}
	if ascii.IsUUID(name) {
		return RuntimeCRIO
	}
	return ""
}

// RuntimePod is what a container runtime records of a pod sandbox in its OCI runtime spec: the pod's
// Kubernetes namespace and name, its UID, and the runtime's name of the sandbox's network namespace
// under /run/netns.
type RuntimePod struct {
	Namespace, Name, UID string
	Netns                string
}

// The annotations each runtime writes into a pod sandbox's spec (config.json).
//   - containerd's CRI plugin, on every sandbox and container: pkg/cri/annotations (containerd 1.x
//     and 2.x) DefaultCRIAnnotations: io.kubernetes.cri.container-type "sandbox",
//     io.kubernetes.cri.sandbox-namespace, -name and -uid.
//   - CRI-O, on the sandbox (server/sandbox_run_linux.go runPodSandbox; internal/annotations):
//     io.kubernetes.cri-o.ContainerType "sandbox", io.kubernetes.cri-o.Namespace and
//     io.kubernetes.cri-o.KubeName (the pod's name); its UID is in the kubelet's labels only.
var sandboxAnnotations = []struct{ typ, ns, name, uid string }{
	{"io.kubernetes.cri.container-type", "io.kubernetes.cri.sandbox-namespace", "io.kubernetes.cri.sandbox-name", "io.kubernetes.cri.sandbox-uid"},
	{"io.kubernetes.cri-o.ContainerType", "io.kubernetes.cri-o.Namespace", "io.kubernetes.cri-o.KubeName", ""},
}

// ParseSandboxSpec reads a pod sandbox's OCI runtime spec as containerd and CRI-O write it. ok is
// false (and err nil) for a spec that is not a pod sandbox's, or whose sandbox has no network
// namespace of its own pinned under /run/netns (a hostNetwork pod). A sandbox whose namespace or name
// is not what Kubernetes allows (a DNS-1123 label, a DNS-1123 subdomain), or whose netns name is
// not a runtime's, is an error: such a record names no pod.
func ParseSandboxSpec(data []byte) (p RuntimePod, ok bool, err error) {
	var spec struct {
		Annotations map[string]string `json:"annotations"`
		Linux       *struct {
			Namespaces []struct {
				Type string `json:"type"`
				Path string `json:"path"`
			} `json:"namespaces"`
		} `json:"linux"`
	}
	if err := json.Unmarshal(data, &spec); err != nil {
		return RuntimePod{}, false, fmt.Errorf("not an OCI runtime spec: %w", err)
	}
	found := false
	for _, a := range sandboxAnnotations {
		if spec.Annotations[a.typ] != "sandbox" {
			continue
		}
		p.Namespace, p.Name, found = spec.Annotations[a.ns], spec.Annotations[a.name], true
		if a.uid != "" {
			p.UID = spec.Annotations[a.uid]
		}
		break
	}
	if !found || spec.Linux == nil {
		return RuntimePod{}, false, nil
	}
	for _, ns := range spec.Linux.Namespaces {
		if ns.Type != "network" {
			continue
		}
		dir, base := path.Split(ns.Path)
		if dir != "/var/run/netns/" && dir != "/run/netns/" {
			return RuntimePod{}, false, nil // a process's namespace, or none of the runtime's
		}
		if NetnsRuntime(base) == "" {
			return RuntimePod{}, false, fmt.Errorf("network namespace %q is no runtime's name", ns.Path)
		}
		p.Netns = base
	}
	if p.Netns == "" {
		return RuntimePod{}, false, nil
	}
	if !dns1123Label(p.Namespace) {
		return RuntimePod{}, false, fmt.Errorf("namespace %q is not a Kubernetes namespace name", p.Namespace)
	}
	if !dns1123Subdomain(p.Name) {
		return RuntimePod{}, false, fmt.Errorf("pod name %q is not a Kubernetes pod name", p.Name)
	}
	if p.UID != "" && !isUID(p.UID) {
		return RuntimePod{}, false, fmt.Errorf("pod UID %q is not a UID", p.UID)
	}
	return p, true, nil
}

// dns1123Label is Kubernetes's rule for a namespace's name (apimachinery validation
// IsDNS1123Label): at most 63 lowercase letters, digits and '-', starting and ending alphanumeric.
func dns1123Label(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// dns1123Subdomain is Kubernetes's rule for a pod's name (IsDNS1123Subdomain): at most 253
// characters, labels of dns1123Label's letters joined by dots.
func dns1123Subdomain(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if !dns1123Label(l) {
			return false
		}
	}
	return true
}
