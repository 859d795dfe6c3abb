package live

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/nodedns/nodedns/internal/hostnet"
	"github.com/nodedns/nodedns/internal/hostnet/netstate"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/probes"
	"github.com/nodedns/nodedns/probes/podprobe"
	"github.com/nodedns/nodedns/resolvconf"
	"golang.org/x/sys/unix"
)

// socketInodes returns the inodes of sockets bound to any of addrs (nil: any address) on port 53
// (UDP, or TCP listening), with their owners' uids, from the proc net tables under proc: /proc/net
// is the reader's network namespace, /proc/PID/net that process's.
func socketInodes(proc string, addrs []netip.Addr) map[string]uint32 {
	inodes := map[string]uint32{}
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
				inodes[e.Inode] = e.UID
			}
		}
	}
	return inodes
}

// cacheComms are the process names of a NodeLocal DNSCache.
var cacheComms = []string{"node-cache", "coredns"}

// FindCacheProcess finds the cache's process (docs/contract.md "Check ids"; "Standby"): the
// node-cache or coredns process that holds a socket the kernel lists as bound to a cache address on
// port 53 in this network namespace (sock_diag: the socket's inode and owner), node-cache first, then
// the lowest PID, and reads its Corefile's forward lines and the resolv.conf files they name,
// through /proc/PID/root (its own mount namespace: a pod's /etc/resolv.conf, not the host's). It
// returns nil when no such process runs, or none can be read (nodedns without ptrace access to it).
func FindCacheProcess(proc string, addrs []netip.Addr) *probes.CacheProcess {
	cp, _ := FindCacheHolders(proc, addrs)
	return cp
}

// FindCacheHolders is FindCacheProcess with the PID of every cache process that holds one of the
// sockets (a cache being replaced and its successor share the address: the standby watches both).
// Where the kernel hides which socket a process holds (its /proc/PID/fd targets take ptrace access:
// the packaged unit), cp is nil and the PIDs are the likely holders instead: named node-cache or
// coredns, of the socket's owner, in the network namespace the socket is in (its /proc/PID/net
// tables, readable by anyone, list the socket). No other user's process, and none in another
// namespace (a tenant's pod, namespaces of its own), is one.
func FindCacheHolders(proc string, addrs []netip.Addr) (*probes.CacheProcess, []int) {
	ls, err := hostnet.Listeners(addrs, 53)
	if err != nil || len(ls) == 0 {
		return nil, nil
	}
	return findHolders(proc, ls)
}

// findHolders finds, under proc, the cache processes holding one of the sockets ls lists. A process
// holds a socket when one of its file descriptors links to socket:[INODE]; it counts only when it
// is also in the reader's network namespace (the one the sockets were listed in) and one of its uids
// is the socket's owner: a socket inode number is a 32-bit counter shared by every namespace
// (get_next_ino), which comes round, so a number alone could be another socket's in another
// namespace. A process merely named node-cache or coredns decides nothing. Without the exact
// holders (the kernel hid them all), the likely ones (FindCacheHolders) come back with a nil cp.
func findHolders(proc string, ls []netstate.Listener) (*probes.CacheProcess, []int) {
	owner := map[string]uint32{}
	for _, l := range ls {
		owner[strconv.FormatUint(uint64(l.Inode), 10)] = l.UID
	}
	self, err := statNS(filepath.Join(proc, "self", "ns", "net"))
	if err != nil {
		return nil, nil
	}
	var holders, likely []int
	best, bestComm := 0, ""
	for _, pid := range pids(proc) {
		dir := filepath.Join(proc, strconv.Itoa(pid))
		comm, err := nodefs.ReadKernel(filepath.Join(dir, "comm"), procKind)
		name := strings.TrimSpace(string(comm))
		if err != nil || !slices.Contains(cacheComms, name) {
			continue
		}
		uid, ok, hidden := heldSocketOwner(dir, owner)
		if hidden {
			if likelyHolder(dir, owner) {
				likely = append(likely, pid)
			}
			continue
		}
		if !ok {
			continue
		}
		if ns, err := statNS(filepath.Join(dir, "ns", "net")); err != nil || ns != self {
			continue
		}
		if !hasUID(dir, uid) {
			continue
		}
		holders = append(holders, pid)
		// node-cache (the node-local cache itself) before coredns, then the lowest PID.
		if best == 0 || slices.Index(cacheComms, name) < slices.Index(cacheComms, bestComm) {
			best, bestComm = pid, name
		}
	}
	if best == 0 {
		return nil, likely
	}
	return readCacheProcess(proc, best, bestComm), holders
}

// heldSocketOwner returns the owner of the first socket of owner (inode -> uid) the process at dir
// has open; hidden when the kernel would not say (ptrace access denied) for a descriptor of its.
func heldSocketOwner(dir string, owner map[string]uint32) (uid uint32, ok, hidden bool) {
	fds, err := os.ReadDir(filepath.Join(dir, "fd"))
	if errors.Is(err, fs.ErrPermission) {
		return 0, false, true
	}
	for _, fd := range fds {
		t, err := os.Readlink(filepath.Join(dir, "fd", fd.Name()))
		if errors.Is(err, fs.ErrPermission) {
			return 0, false, true
		}
		if err != nil || !strings.HasPrefix(t, "socket:[") {
			continue
		}
		if uid, ok := owner[strings.TrimSuffix(strings.TrimPrefix(t, "socket:["), "]")]; ok {
			return uid, true, false
		}
	}
	return 0, false, false
}

// likelyHolder reports whether the process at dir, whose descriptors the kernel hides, may hold one
// of the sockets of owner: its own network namespace's tables list one of them (so it is in the
// namespace the socket is in) and one of its uids is that socket's owner.
func likelyHolder(dir string, owner map[string]uint32) bool {
	for ino, uid := range socketInodes(dir, nil) {
		if o, ok := owner[ino]; ok && o == uid && hasUID(dir, uid) {
			return true
		}
	}
	return false
}

// hasUID reports whether one of the real, effective, saved and file system uids of the process at
// dir is uid (/proc/PID/status).
func hasUID(dir string, uid uint32) bool {
	ids := statusUIDs(dir)
	return slices.Contains(ids, int(uid))
}

// statusUIDs are the four uids of the process at dir, nil when unknown.
func statusUIDs(dir string) []int {
	status, err := nodefs.ReadKernel(filepath.Join(dir, "status"), procKind)
	if err != nil {
		return nil
	}
	for _, l := range strings.Split(string(status), "\n") {
		rest, ok := strings.CutPrefix(l, "Uid:")
		if !ok {
			continue
		}
		var ids []int
		for _, f := range strings.Fields(rest) {
			n, err := strconv.ParseUint(f, 10, 32)
			if err != nil {
				return nil
			}
			ids = append(ids, int(n))
		}
		if len(ids) != 4 {
			return nil
		}
		return ids
	}
	return nil
}

// pids are the processes under proc, in number order.
func pids(proc string) []int {
	dirs, _ := os.ReadDir(proc)
	var out []int
	for _, d := range dirs {
		if pid, err := strconv.Atoi(d.Name()); err == nil && pid > 0 {
			out = append(out, pid)
		}
	}
	slices.Sort(out)
	return out
}

// statNS is the identity of the namespace file at p.
func statNS(p string) (podprobe.NSID, error) {
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return podprobe.NSID{}, err
	}
	return podprobe.NSID{Dev: st.Dev, Ino: st.Ino}, nil
}

// FindDNSServers finds every node-cache or coredns process on this node that holds a socket on port
// 53 in its own network namespace's tables (/proc/PID/net: the host's for a hostNetwork pod, the pod's
// otherwise), by PID, and reads each one's Corefile and the resolv.conf files it forwards to as
// FindCacheProcess does: the node-local cache and the cluster's CoreDNS pods alike (docs/contract.md
// "Check ids", dns.loop), and whatever else calls itself so. Each comes with what says whose it is:
// the identity of its network namespace (to be matched with its pod), whether that is the host's,
// whether its uids are all root's and whether port 53 is privileged in the host's namespace. The
// checks decide which to believe (probes: a kube-system pod's, or a privileged one's on the host).
func FindDNSServers(proc string) []*probes.CacheProcess {
	self, _ := statNS(filepath.Join(proc, "self", "ns", "net"))
	privileged := portPrivileged(proc, 53)
	var out []*probes.CacheProcess
	for _, pid := range pids(proc) {
		dir := filepath.Join(proc, strconv.Itoa(pid))
		comm, err := nodefs.ReadKernel(filepath.Join(dir, "comm"), procKind)
		name := strings.TrimSpace(string(comm))
		if err != nil || !slices.Contains(cacheComms, name) || !holdsSocket(dir, socketInodes(dir, nil)) {
			continue
		}
		cp := readCacheProcess(proc, pid, name)
		if id, err := statNS(filepath.Join(dir, "ns/net")); err == nil {
			cp.NetNS = id
			cp.HostNet = !self.IsZero() && id == self
		}
		cp.PrivilegedPort = cp.HostNet && privileged
		ids := statusUIDs(dir)
		cp.Root = len(ids) == 4 && ids[0] == 0 && ids[1] == 0 && ids[2] == 0 && ids[3] == 0
		out = append(out, cp)
	}
	return out
}

// portPrivileged reports whether binding port in the reader's network namespace takes
// CAP_NET_BIND_SERVICE: below net.ipv4.ip_unprivileged_port_start (1024 by default; the sysctl
// covers IPv6 too), read from proc/sys. Unknown is not privileged.
func portPrivileged(proc string, port int) bool {
	data, err := nodefs.ReadKernel(filepath.Join(proc, "sys/net/ipv4/ip_unprivileged_port_start"), procKind)
	if err != nil {
		return false
	}
	start, err := strconv.Atoi(strings.TrimSpace(string(data)))
	return err == nil && port < start
}

// holdsSocket reports whether the process at dir (/proc/PID) has one of the sockets inodes lists
// open (inode -> owner uid), its owner among the process's uids: a socket inode number is a 32-bit
// counter that comes round, so the number alone could be another socket's.
func holdsSocket(dir string, inodes map[string]uint32) bool {
	if len(inodes) == 0 {
		return false
	}
	uid, ok, _ := heldSocketOwner(dir, inodes)
	return ok && hasUID(dir, uid)
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
	cp.Forwards = probes.AllForwards(cp.Blocks)
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
