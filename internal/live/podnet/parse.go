package podnet

import (
	"bytes"
	"fmt"
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
