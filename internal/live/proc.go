package live

import (
	"fmt"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/probes"
	"github.com/nodedns/nodedns/probes/podprobe"
	"github.com/nodedns/nodedns/resolvconf"
	"golang.org/x/sys/unix"
)

// socketInodes returns the inodes of sockets bound to any of addrs (nil: any address) on port 53
// (UDP, or TCP listening), from the proc net tables under proc: /proc/net is the reader's network
// namespace, /proc/PID/net that process's.
func socketInodes(proc string, addrs []netip.Addr) map[string]bool {
	inodes := map[string]bool{}
	for _, t := range []string{"udp", "udp6", "tcp", "tcp6"} {
		data, err := nodefs.ReadKernel(filepath.Join(proc, "net", t), procKind)
		if err != nil {
			continue
		}
		for _, e := range probes.ParseProcNet(data) {
			if e.Port != 53 || (strings.HasPrefix(t, "tcp") && e.State != 0x0A) {
				continue
			}
			if addrs == nil || slices.Contains(addrs, e.Addr) {
				inodes[e.Inode] = true
			}
		}
	}
	return inodes
}

// cacheComms are the process names of a NodeLocal DNSCache.
var cacheComms = []string{"node-cache", "coredns"}

// FindCacheProcess finds the node-cache or coredns process holding a socket bound to a cache address
// on port 53 and reads its Corefile's forward lines and the resolv.conf files they name, through
// /proc/PID/root (its own mount namespace: a pod's /etc/resolv.conf, not the host's). It returns nil
// when no such process runs.
func FindCacheProcess(proc string, addrs []netip.Addr) *probes.CacheProcess {
	inodes := socketInodes(proc, addrs)
	if len(inodes) == 0 {
		return nil
	}
	dirs, _ := os.ReadDir(proc)
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		comm, err := nodefs.ReadKernel(filepath.Join(proc, d.Name(), "comm"), procKind)
		if err != nil || !slices.Contains(cacheComms, strings.TrimSpace(string(comm))) {
			continue
		}
		fds, _ := os.ReadDir(filepath.Join(proc, d.Name(), "fd"))
		for _, fd := range fds {
			t, err := os.Readlink(filepath.Join(proc, d.Name(), "fd", fd.Name()))
			if err != nil || !strings.HasPrefix(t, "socket:[") {
				continue
			}
			if inodes[strings.TrimSuffix(strings.TrimPrefix(t, "socket:["), "]")] {
				return readCacheProcess(proc, pid, strings.TrimSpace(string(comm)))
			}
		}
	}
	return nil
}

// FindPodCache finds a cache that runs in a network namespace of its own (docs/contract.md "Cache
// mode": lrp, node-local-dns in the pod network behind a LocalRedirectPolicy; none, CoreDNS pods on
// this node): a node-cache (preferred) or coredns process holding a socket on port 53 in its own
// namespace's tables (/proc/PID/net), lowest PID first. It returns nil when none runs here.
func FindPodCache(proc string) *probes.CacheProcess {
	dirs, _ := os.ReadDir(proc)
	var found *probes.CacheProcess
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		comm, err := nodefs.ReadKernel(filepath.Join(proc, d.Name(), "comm"), procKind)
		name := strings.TrimSpace(string(comm))
		if err != nil || !slices.Contains(cacheComms, name) {
			continue
		}
		// node-cache (the node-local cache itself) before coredns, then the lowest PID.
		rank := func(comm string) int { return slices.Index(cacheComms, comm) }
		if found != nil && (rank(found.Comm) < rank(name) || rank(found.Comm) == rank(name) && found.PID < pid) {
			continue
		}
		if !holdsSocket(filepath.Join(proc, d.Name()), socketInodes(filepath.Join(proc, d.Name()), nil)) {
			continue
		}
		found = &probes.CacheProcess{PID: pid, Comm: name}
	}
	if found == nil {
		return nil
	}
	return readCacheProcess(proc, found.PID, found.Comm)
}

// FindDNSServers finds every node-cache or coredns process on this node that holds a socket on port
// 53 in its own network namespace's tables (/proc/PID/net: the host's for a hostNetwork pod, the pod's
// otherwise), by PID, and reads each one's Corefile and the resolv.conf files it forwards to as
// FindCacheProcess does: the node-local cache and the cluster's CoreDNS pods alike (docs/contract.md
// "Check ids", dns.loop). Each comes with the identity of its network namespace, to be named after
// its pod.
func FindDNSServers(proc string) []*probes.CacheProcess {
	dirs, _ := os.ReadDir(proc)
	var out []*probes.CacheProcess
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		dir := filepath.Join(proc, d.Name())
		comm, err := nodefs.ReadKernel(filepath.Join(dir, "comm"), procKind)
		name := strings.TrimSpace(string(comm))
		if err != nil || !slices.Contains(cacheComms, name) || !holdsSocket(dir, socketInodes(dir, nil)) {
			continue
		}
		cp := readCacheProcess(proc, pid, name)
		var st unix.Stat_t
		if unix.Stat(filepath.Join(dir, "ns/net"), &st) == nil {
			cp.NetNS = podprobe.NSID{Dev: st.Dev, Ino: st.Ino}
		}
		out = append(out, cp)
	}
	slices.SortFunc(out, func(a, b *probes.CacheProcess) int { return a.PID - b.PID })
	return out
}

// holdsSocket reports whether the process at dir (/proc/PID) has one of the socket inodes open.
func holdsSocket(dir string, inodes map[string]bool) bool {
	if len(inodes) == 0 {
		return false
	}
	fds, _ := os.ReadDir(filepath.Join(dir, "fd"))
	for _, fd := range fds {
		t, err := os.Readlink(filepath.Join(dir, "fd", fd.Name()))
		if err == nil && inodes[strings.TrimSuffix(strings.TrimPrefix(t, "socket:["), "]")] {
			return true
		}
	}
	return false
}

func readCacheProcess(proc string, pid int, comm string) *probes.CacheProcess {
	cp := &probes.CacheProcess{PID: pid, Comm: comm, Corefile: "Corefile", Resolv: map[string]*resolvconf.File{}}
	base := filepath.Join(proc, strconv.Itoa(pid))
	cmdline, _ := nodefs.ReadKernel(filepath.Join(base, "cmdline"), procKind)
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	for i, a := range args {
		switch {
		case (a == "-conf" || a == "--conf") && i+1 < len(args):
			cp.Corefile = args[i+1]
		case strings.HasPrefix(a, "-conf="), strings.HasPrefix(a, "--conf="):
			cp.Corefile = a[strings.IndexByte(a, '=')+1:]
		}
	}
	// The process's files are read inside its own root (/proc/PID/root), symlinks followed there, so
	// neither an absolute link in the container nor ".." in a path reaches this machine's files. A
	// relative path is read below its working directory (/proc/PID/cwd) the same way.
	root := nodefs.NewReader(filepath.Join(base, "root"))
	in := func(p string) (*nodefs.Tree, string) {
		if path.IsAbs(p) {
			return root, p
		}
		return nodefs.NewReader(filepath.Join(base, "cwd")), "/" + p
	}
	fsys, p := in(cp.Corefile)
	data, err := fsys.ReadFile(p, nodefs.Config)
	if err != nil {
		cp.Err = fmt.Errorf("read the Corefile of %s (pid %d): %w", comm, pid, err)
		return cp
	}
	cp.Blocks, err = probes.ParseServerBlocks(data)
	for _, b := range cp.Blocks {
		cp.Forwards = append(cp.Forwards, b.Forwards...)
	}
	if err != nil {
		cp.Err = fmt.Errorf("%s (pid %d): %w", cp.Corefile, pid, err)
	}
	for _, f := range cp.Forwards {
		for _, to := range f.To {
			if _, file, ok := probes.ForwardTarget(to); ok && file != "" {
				if _, done := cp.Resolv[file]; done {
					continue
				}
				data, err := root.ReadFile(file, node.ResolvKind)
				if err != nil {
					cp.Err = fmt.Errorf("read %s of %s (pid %d): %w", file, comm, pid, err)
					continue
				}
				rf, err := resolvconf.Parse(data)
				if err != nil {
					cp.Err = fmt.Errorf("%s of %s (pid %d): %w", file, comm, pid, err)
					continue
				}
				cp.Resolv[file] = rf
			}
		}
	}
	return cp
}

// procKind bounds a /proc file nodedns reads (a socket table on a busy node is the largest).
var procKind = nodefs.Proc
