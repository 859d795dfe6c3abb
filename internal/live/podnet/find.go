// Package podnet finds a node's pod network namespaces and sends DNS probes from inside them, so
// the self-check sees what pods see (docs/incidents.md, incident 000: a CNI datapath that drops pod traffic to the
// node-local cache while the host's own queries are answered; incident 004: an ip rule that sends one
// pod interface's traffic around the local table).
//
// Everything here is read-only towards the pods: nothing is created, changed or removed inside a
// pod's namespace. The process's threads never stay in a foreign namespace: a thread enters one only
// to create a socket or a netlink handle (or to read a UTS hostname), goes back at once, and is
// retired by the runtime if it cannot; the queries themselves are sent from the host's threads over
// sockets that keep the pod's namespace.
//
// Parsers of outside input (cgroup files, /run/netns names) are pure and live in parse.go; the /proc
// and /run scans take their roots from Options so tests point them at a fixture tree.
//
// It speaks the pure vocabulary of probes/podprobe (Pod, Query, Report...), which the check
// nodelocaldns.pods judges without importing this package. The check, through the live host, uses
// it in one round:
//
//	pods, err := podnet.Find(ctx, podnet.Options{}) // sorted by name; none on a fresh node: skipped
//	pods = pods[:min(len(pods), maxPods)]
//	rep := podnet.Probe(ctx, pods, podprobe.Query{Name: "kubernetes.default.svc.cluster.local.",
//		Targets: cacheAddrs, Timeout: probesTimeout})
//	for _, f := range rep.Failures() { /* f.Pod.Name, f.Pod.HostIf, f.Results */ }
//
// It needs root with CAP_SYS_ADMIN (setns) and CAP_SYS_PTRACE (another user's /proc/PID/ns), in
// the host's PID namespace, with every process visible in /proc.
package podnet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/nodedns/nodedns/internal/hostnet"
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/probes/podprobe"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Options say where Find looks.
type Options struct {
	// ProcRoot is the proc filesystem to scan; default /proc.
	ProcRoot string
	// RunRoot holds netns/, where runtimes pin their namespaces; default /run.
	RunRoot string
	// Host is the /proc/PID directory of a process in the host's network and UTS namespaces,
	// whose links are the host side of the pods' veths. "" means this process: nodedns runs in the
	// host's namespaces. Tests point it at their sandbox node's init.
	Host string
	// Workers bounds how many namespaces are looked into at once; default 8.
	Workers int
	// Logger gets one debug line per namespace that could not be named or paired; default discards.
	Logger *slog.Logger

	sys *system // tests replace the namespace-entering parts
}

func (o Options) withDefaults() Options {
	if o.ProcRoot == "" {
		o.ProcRoot = "/proc"
	}
	if o.RunRoot == "" {
		o.RunRoot = "/run"
	}
	if o.Workers <= 0 {
		o.Workers = 8
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.sys == nil {
		o.sys = realSystem(o.Host)
	}
	return o
}

// hostProc is the /proc/PID directory whose namespaces are the host's.
func (o Options) hostProc() string {
	if o.Host == "" {
		return "/proc/self"
	}
	return o.Host
}

// Find returns the node's pod network namespaces, as docs/contract.md defines them: the namespace of any
// process in kubelet's pod cgroups, and the namespaces the runtime names under RunRoot/netns
// (containerd cni-<uuid>, CRI-O <uuid>); never the host's own namespace (the Host process's and PID
// 1's: a hostNetwork pod is in kubepods but shares it), never one that is neither (a VPN's, another
// program's). Each namespace appears once, sorted by name. An unreadable proc root is an error; a
// process that exits during the scan, a name or a peer that cannot be read, are not.
func Find(ctx context.Context, o Options) ([]podprobe.Pod, error) {
	o = o.withDefaults()
	hostNet := idSet(o.Logger, filepath.Join(o.hostProc(), "ns/net"), filepath.Join(o.ProcRoot, "1/ns/net"))
	hostUTS := idSet(o.Logger, filepath.Join(o.hostProc(), "ns/uts"), filepath.Join(o.ProcRoot, "1/ns/uts"))
	if len(hostNet) == 0 {
		return nil, fmt.Errorf("find pod namespaces: the host's network namespace (%s) cannot be read", filepath.Join(o.hostProc(), "ns/net"))
	}
	procs, err := scanProc(o.ProcRoot)
	if err != nil {
		return nil, err
	}
	named, err := scanNetns(filepath.Join(o.RunRoot, "netns"))
	if err != nil {
		return nil, err
	}
	cands := merge(procs, named, hostNet)
	byCgroup := 0
	for _, c := range cands {
		if c.pod.Kubepods {
			byCgroup++
		}
	}
	// One line per scan, as data: what was found where, and what could not be read (a process
	// of another user without CAP_SYS_PTRACE).
	o.Logger.Debug("pod namespaces", "found", len(cands), "kubepods", byCgroup, "netns_named", len(named),
		"processes", len(procs.procs), "denied", procs.ndenied, "proc", o.ProcRoot, "run", o.RunRoot)
	if len(cands) == 0 {
		if procs.denied != nil {
			return nil, fmt.Errorf("find pod namespaces: %w (reading other processes' namespaces needs root)", procs.denied)
		}
		return nil, nil
	}
	if err := enrich(ctx, o, cands, hostUTS); err != nil {
		return nil, err
	}
	runtime := scanRuntime(o)
	for _, c := range cands {
		rp, ok := runtime[c.pod.Netns]
		if !ok || c.pod.Netns == "" {
			continue
		}
		if rp.UID != "" && c.pod.PodUID != "" && !strings.EqualFold(rp.UID, c.pod.PodUID) {
			// The runtime's record and the pod's cgroup disagree: neither names it.
			o.Logger.Debug("runtime's pod UID is not the cgroup's", "netns", c.pod.Netns, "runtime", rp.UID, "cgroup", c.pod.PodUID)
			continue
		}
		c.pod.Namespace, c.pod.PodName = rp.Namespace, rp.Name
	}
	pods := make([]podprobe.Pod, len(cands))
	for i, c := range cands {
		pods[i] = c.pod
	}
	slices.SortFunc(pods, func(a, b podprobe.Pod) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID.Dev, b.ID.Dev), cmp.Compare(a.ID.Ino, b.ID.Ino))
	})
	return pods, nil
}

func idSet(log *slog.Logger, paths ...string) map[podprobe.NSID]bool {
	set := map[podprobe.NSID]bool{}
	for _, p := range paths {
		id, err := statNS(p)
		if err != nil {
			log.Debug("host namespace not readable", "path", p, "err", err)
			continue
		}
		set[id] = true
	}
	return set
}

// procInfo is one process of the proc root.
type procInfo struct {
	PID    int
	Cgroup Cgroup
	Net    podprobe.NSID
}

type procScan struct {
	procs   []procInfo
	denied  error // the first permission error, reported when nothing could be found
	ndenied int   // processes whose namespace could not be read for lack of permission
}

// maxCgroupFile bounds the read of a /proc/PID/cgroup file (a v1 node with a dozen hierarchies and
// long systemd paths stays under 4 KiB).
const maxCgroupFile = 64 << 10

// scanProc reads every process's cgroup and network namespace. Processes that exit meanwhile are
// skipped; so is a malformed cgroup file (the process still counts for the namespace it holds).
func scanProc(root string) (procScan, error) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return procScan{}, fmt.Errorf("find pod namespaces: read %s: %w", root, err)
	}
	var s procScan
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		dir := filepath.Join(root, e.Name())
		id, err := statNS(filepath.Join(dir, "ns/net"))
		if err != nil {
			if errors.Is(err, fs.ErrPermission) {
				s.ndenied++
				if s.denied == nil {
					s.denied = err
				}
			}
			continue
		}
		p := procInfo{PID: pid, Net: id}
		if data, err := readBounded(filepath.Join(dir, "cgroup"), maxCgroupFile); err == nil {
			p.Cgroup, _ = ParseCgroup(data)
		}
		s.procs = append(s.procs, p)
	}
	slices.SortFunc(s.procs, func(a, b procInfo) int { return cmp.Compare(a.PID, b.PID) })
	return s, nil
}

// readBounded reads a /proc file: never a blocking open, at most limit bytes, the path resolved by
// the kernel (it may run through a sandbox's /proc/PID/root).
func readBounded(p string, limit int64) ([]byte, error) {
	return nodefs.ReadKernel(p, nodefs.Proc.WithMax(limit))
}

// netnsEntry is one pod-like name under /run/netns.
type netnsEntry struct {
	Name, Runtime, Path string
	ID                  podprobe.NSID
}

// scanNetns lists the pod sandboxes' names under dir; a missing dir (no runtime yet) is no error.
// An entry that is not a namespace (a plain file a runtime left behind after its sandbox went) is
// skipped: its inode is no namespace's.
func scanNetns(dir string) ([]netnsEntry, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("find pod namespaces: read %s: %w", dir, err)
	}
	var out []netnsEntry
	for _, e := range ents {
		rt := NetnsRuntime(e.Name())
		if rt == "" {
			continue
		}
		p := filepath.Join(dir, e.Name())
		id, err := statNS(p)
		if err != nil {
			continue
		}
		out = append(out, netnsEntry{Name: e.Name(), Runtime: rt, Path: p, ID: id})
	}
	return out, nil
}

// cand is a pod namespace before it is named and paired.
type cand struct {
	pod  podprobe.Pod
	pids []int // processes in it: kubepods ones first, each group by PID
}

// merge joins what the two scans found by namespace identity and drops the host's namespaces and
// namespaces that are neither in kubepods nor named by a runtime. A namespace file under /run/netns
// whose inode is a regular file's (not nsfs) still has an identity; it is only a pod if a process
// holds the same one or it carries a runtime's name, and entering it fails later, harmlessly.
func merge(s procScan, named []netnsEntry, host map[podprobe.NSID]bool) []*cand {
	byID := map[podprobe.NSID]*cand{}
	var order []*cand
	get := func(id podprobe.NSID) *cand {
		c, ok := byID[id]
		if !ok {
			c = &cand{pod: podprobe.Pod{ID: id}}
			byID[id] = c
			order = append(order, c)
		}
		return c
	}
	for _, p := range s.procs {
		if !p.Cgroup.Kubepods || host[p.Net] {
			continue
		}
		c := get(p.Net)
		if !c.pod.Kubepods || c.pod.PodUID == "" && p.Cgroup.PodUID != "" {
			c.pod.PodUID, c.pod.QoS = p.Cgroup.PodUID, p.Cgroup.QoS
		}
		c.pod.Kubepods = true
		c.pids = append(c.pids, p.PID)
	}
	for _, n := range named {
		if host[n.ID] {
			continue
		}
		c := get(n.ID)
		if c.pod.Netns == "" || n.Name < c.pod.Netns {
			c.pod.Netns, c.pod.Runtime, c.pod.NetNS = n.Name, n.Runtime, n.Path
		}
	}
	// Other processes in the same namespaces: a sandbox found by name whose processes are outside
	// kubepods (or not readable as such) still has a UTS namespace to name it by.
	for _, p := range s.procs {
		if c, ok := byID[p.Net]; ok && !p.Cgroup.Kubepods {
			c.pids = append(c.pids, p.PID)
		}
	}
	for _, c := range order {
		if len(c.pids) > 0 {
			c.pod.PID = c.pids[0]
		}
	}
	return order
}

// system is what Find does inside namespaces, replaced in tests that run on a fixture tree.
type system struct {
	// hostname reads the hostname of the UTS namespace file at p.
	hostname func(p string) (string, error)
	// podLinks lists the links of the network namespace file at p (checked to still be id).
	podLinks func(p string, id podprobe.NSID) ([]link, error)
	// hostLinks lists the host's links.
	hostLinks func() ([]link, error)
}

// link is what pairing a veth needs of a link.
type link struct {
	Index  int
	Name   string
	Type   string
	Parent int // IFLA_LINK: a veth's peer's index in the peer's namespace
}

func realSystem(host string) *system {
	return &system{
		hostname: hostnameOf,
		podLinks: func(p string, id podprobe.NSID) ([]link, error) {
			ns, err := openNS(p, id)
			if err != nil {
				return nil, err
			}
			defer ns.Close()
			return linksIn(ns)
		},
		hostLinks: func() ([]link, error) {
			if host == "" {
				return linksIn(netns.None())
			}
			ns, err := openNS(filepath.Join(host, "ns/net"), podprobe.NSID{})
			if err != nil {
				return nil, err
			}
			defer ns.Close()
			return linksIn(ns)
		},
	}
}

// linksIn lists the links of a namespace (netns.None(): this thread's own). The netlink socket is made inside
// the namespace by inNS, so no thread stays there while the dump is read.
func linksIn(ns netns.NsHandle) ([]link, error) {
	var h *netlink.Handle
	var err error
	if !ns.IsOpen() {
		h, err = netlink.NewHandle(unix.NETLINK_ROUTE)
	} else {
		err = inNS(ns, unix.CLONE_NEWNET, func() error {
			var e error
			h, e = netlink.NewHandle(unix.NETLINK_ROUTE)
			return e
		})
	}
	if err != nil {
		return nil, fmt.Errorf("open a netlink socket: %w", err)
	}
	defer h.Close()
	ls, err := hostnet.RetryDump("list links", h.LinkList)
	if err != nil {
		return nil, err
	}
	out := make([]link, 0, len(ls))
	for _, l := range ls {
		a := l.Attrs()
		out = append(out, link{Index: a.Index, Name: a.Name, Type: l.Type(), Parent: a.ParentIndex})
	}
	return out, nil
}

// enrich names each candidate and finds its host-side interface, several namespaces at a time.
func enrich(ctx context.Context, o Options, cands []*cand, hostUTS map[podprobe.NSID]bool) error {
	host, err := o.sys.hostLinks()
	if err != nil {
		// Without the host's links no peer can be named; the pods are still pods.
		o.Logger.Debug("host links not readable: no host-side interfaces", "err", err)
	}
	byIndex := map[int]link{}
	for _, l := range host {
		byIndex[l.Index] = l
	}
	sem := make(chan struct{}, o.Workers)
	var wg sync.WaitGroup
	for _, c := range cands {
		if err := ctx.Err(); err != nil {
			wg.Wait()
			return fmt.Errorf("find pod namespaces: %w", err)
		}
		if c.pod.NetNS == "" {
			c.pod.NetNS = filepath.Join(o.ProcRoot, strconv.Itoa(c.pod.PID), "ns/net")
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			name(o, c, hostUTS)
			if len(byIndex) > 0 {
				pair(o, c, byIndex)
			}
		}()
	}
	wg.Wait()
	return nil
}

// namingTries bounds how many of a namespace's processes are asked for a hostname.
const namingTries = 3

// name names a pod by the hostname of a process's UTS namespace unless that is the host's (a
// process that did not get its own: its hostname is the node's), else by its netns name, else by PID.
func name(o Options, c *cand, hostUTS map[podprobe.NSID]bool) {
	tries := 0
	for _, pid := range c.pids {
		if tries == namingTries {
			break
		}
		p := filepath.Join(o.ProcRoot, strconv.Itoa(pid), "ns/uts")
		id, err := statNS(p)
		if err != nil || hostUTS[id] {
			continue
		}
		tries++
		h, err := o.sys.hostname(p)
		if err != nil || h == "" {
			o.Logger.Debug("pod hostname not readable", "netns", c.pod.NetNS, "pid", pid, "err", err)
			continue
		}
		c.pod.Name, c.pod.NamedBy = h, podprobe.NamedByHostname
		return
	}
	if c.pod.Netns != "" {
		c.pod.Name, c.pod.NamedBy = c.pod.Netns, podprobe.NamedByNetns
		return
	}
	c.pod.Name, c.pod.NamedBy = "pid "+strconv.Itoa(c.pod.PID), podprobe.NamedByPID
}

// pair finds the host-side peer of the pod's interface: a pod link whose IFLA_LINK is a host link of
// the same type whose IFLA_LINK is that pod link (both ends agree, so an index that happens to exist
// in the host for a peer that lives elsewhere is not taken). The pod's eth0 wins over other pairs.
func pair(o Options, c *cand, host map[int]link) {
	links, err := o.sys.podLinks(c.pod.NetNS, c.pod.ID)
	if err != nil {
		o.Logger.Debug("pod links not readable", "pod", c.pod.Name, "netns", c.pod.NetNS, "err", err)
		return
	}
	var best *link
	var peer link
	for i := range links {
		l := &links[i]
		h, ok := host[l.Parent]
		if l.Parent == 0 || !ok || h.Parent != l.Index || h.Type != l.Type {
			continue
		}
		if best == nil || l.Name == "eth0" && best.Name != "eth0" || (l.Name == "eth0") == (best.Name == "eth0") && l.Index < best.Index {
			best, peer = l, h
		}
	}
	if best != nil {
		c.pod.PodIf, c.pod.HostIf, c.pod.HostIfIndex = best.Name, peer.Name, peer.Index
	}
}

// runtimeSpecs are where the runtimes keep their running containers' OCI specs, below the run
// root (/run), as globs: containerd's shim bundles (core/runtime/v2/bundle.go NewBundle: the
// state directory io.containerd.runtime.v2.task, then the namespace, k8s.io for the CRI plugin,
// then the container's ID), k3s's and RKE2's containerd under /run/k3s/containerd, and CRI-O's
// run directory of each container (containers/storage's runroot; CRI-O saves the sandbox's spec
// there too, server/sandbox_run_linux.go).
var runtimeSpecs = []string{
	"containerd/io.containerd.runtime.v2.task/k8s.io/*/config.json",
	"k3s/containerd/io.containerd.runtime.v2.task/k8s.io/*/config.json",
	"containers/storage/overlay-containers/*/userdata/config.json",
}

// maxRuntimeSpec bounds the read of one spec (a pod sandbox's is a few KiB; seccomp profiles
// inlined in a container's can reach a few hundred).
const maxRuntimeSpec = 1 << 20

// maxRuntimeSpecs bounds how many specs one scan reads (two per pod on a node at kubelet's
// 110-pod default, with room).
const maxRuntimeSpecs = 4096

// scanRuntime reads the pod sandboxes the runtimes record under the run root, by their netns name:
// which pod, in which Kubernetes namespace, a runtime-named namespace is. Only a spec that is root's
// (or the running user's) and writable by nobody else, in such directories, is believed
// (nodefs.CheckTrusted under the run root): that is the runtime's word. A record that is not, or
// cannot be read or parsed, is left out with a debug line; two records that name one netns
// differently name no pod.
func scanRuntime(o Options) map[string]RuntimePod {
	r := nodefs.NewReader(o.RunRoot)
	out := map[string]RuntimePod{}
	conflict := map[string]bool{}
	n := 0
	for _, g := range runtimeSpecs {
		matches, _ := filepath.Glob(filepath.Join(o.RunRoot, g))
		for _, m := range matches {
			if n++; n > maxRuntimeSpecs {
				o.Logger.Debug("runtime specs: too many, the rest not read", "max", maxRuntimeSpecs)
				return out
			}
			p := "/" + strings.TrimPrefix(m[len(o.RunRoot):], "/")
			if err := nodefs.CheckTrusted(r, p); err != nil {
				o.Logger.Debug("runtime spec not believed", "path", m, "err", err)
				continue
			}
			data, err := r.ReadFile(p, nodefs.State.WithMax(maxRuntimeSpec))
			if err != nil {
				o.Logger.Debug("runtime spec not readable", "path", m, "err", err)
				continue
			}
			rp, ok, err := ParseSandboxSpec(data)
			if err != nil {
				o.Logger.Debug("runtime spec not a pod's", "path", m, "err", err)
			}
			if !ok {
				continue
			}
			if old, seen := out[rp.Netns]; seen && old != rp {
				conflict[rp.Netns] = true
			}
			out[rp.Netns] = rp
		}
	}
	for ns := range conflict {
		o.Logger.Debug("runtime specs disagree on a pod sandbox", "netns", ns)
		delete(out, ns)
	}
	return out
}
