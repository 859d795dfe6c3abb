package live

import (
	"fmt"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nodedns/nodedns/internal/hostnet/netstate"
	"github.com/nodedns/nodedns/internal/testutil/fixture"
	"github.com/nodedns/nodedns/probes"
)

var cache = netip.MustParseAddr("169.254.25.10")

// procNetUDP is a /proc/net/udp with 169.254.25.10:53 (inode 4242) and 127.0.0.1:53 (inode 4243).
const procNetUDP = `   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
  1: 0A19FEA9:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 4242 2 0000000000000000 0
  2: 0100007F:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 4243 2 0000000000000000 0
`

// fakeProcess is one process of a fake /proc: its comm, command line, the socket inodes its file
// descriptors point at, its uid (all four), its network namespace ("" the reader's, else a name of
// another), and files in its mount namespace (absolute paths under root/, relative ones under cwd/).
type fakeProcess struct {
	pid     int
	comm    string
	args    []string
	sockets []string
	uid     int
	netns   string
	files   map[string]string
}

// fakeProc builds a /proc tree: net/udp, net/udp6 and net/tcp as given, the processes, and the
// network namespaces as files (hard links give /proc/self/ns/net and a process's the same identity).
func fakeProc(t *testing.T, tables map[string]string, procs ...fakeProcess) string {
	t.Helper()
	files := map[string]string{"self/comm": "nodedns\n", "ns/host": "", "ns/pod": ""} // not pids: skipped
	for _, t6 := range []string{"udp", "udp6", "tcp", "tcp6"} {
		if data, ok := tables[t6]; ok {
			files["net/"+t6] = data
		}
	}
	for _, p := range procs {
		dir := strconv.Itoa(p.pid)
		files[dir+"/comm"] = p.comm + "\n"
		files[dir+"/cmdline"] = strings.Join(p.args, "\x00") + "\x00"
		files[dir+"/status"] = fmt.Sprintf("Name:\t%s\nUid:\t%[2]d\t%[2]d\t%[2]d\t%[2]d\nGid:\t0\t0\t0\t0\n", p.comm, p.uid)
		for name, data := range p.files {
			if path.IsAbs(name) {
				files[dir+"/root"+name] = data
			} else {
				files[dir+"/cwd/"+name] = data
			}
		}
		if p.netns != "" {
			files["ns/"+p.netns] = ""
		}
	}
	proc := fixture.Tree(t, files)
	link := func(ns, dir string) {
		if err := os.MkdirAll(filepath.Join(proc, dir, "ns"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(filepath.Join(proc, "ns", ns), filepath.Join(proc, dir, "ns", "net")); err != nil {
			t.Fatal(err)
		}
	}
	link("host", "self")
	for _, p := range procs {
		dir := strconv.Itoa(p.pid)
		ns := p.netns
		if ns == "" {
			ns = "host"
		}
		link(ns, dir)
		if err := os.MkdirAll(filepath.Join(proc, dir, "fd"), 0o755); err != nil {
			t.Fatal(err)
		}
		for i, ino := range append([]string{"pipe"}, p.sockets...) {
			target := "socket:[" + ino + "]"
			if ino == "pipe" {
				target = "pipe:[1]"
			}
			if err := os.Symlink(target, filepath.Join(proc, dir, "fd", strconv.Itoa(i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	return proc
}

// TestFindCacheProcess finds the cache in fake /proc trees: the process that holds a socket the
// kernel lists on a cache address's port 53 (the listeners, as hostnet.Listeners gives them: inode
// 4242 root's), in the reader's network namespace, with the socket's owner among its uids, and named
// node-cache or coredns; then its Corefile and the resolv.conf files it forwards to, read inside the
// process's own root. A process that only has the name, or the inode number in another namespace,
// or under another user, is not the cache.
func TestFindCacheProcess(t *testing.T) {
	udp := []netstate.Listener{{Addr: cache, Proto: "udp", Inode: 4242}}
	corefile := ".:53 {\n    bind 169.254.25.10\n    forward . /etc/resolv.conf\n}\n"
	coredns := func(mod func(p *fakeProcess)) fakeProcess {
		p := fakeProcess{pid: 100, comm: "coredns", args: []string{"/coredns", "-conf", "/etc/coredns/Corefile"}, sockets: []string{"4242"},
			files: map[string]string{"/etc/coredns/Corefile": corefile, "/etc/resolv.conf": "nameserver 10.0.0.2\n"}}
		if mod != nil {
			mod(&p)
		}
		return p
	}
	fromResolv := []probes.Forward{{Zones: []string{"."}, From: ".", To: []string{"/etc/resolv.conf"}, Line: 3}}
	tests := []struct {
		name     string
		tables   []netstate.Listener
		procs    []fakeProcess
		nilWant  bool
		pid      int
		comm     string
		corefile string
		forwards []probes.Forward
		resolv   map[string][]string // file -> nameservers
		err      string
	}{
		{
			name: "coredns with -conf, forwarding to its pod's resolv.conf", tables: udp,
			procs: []fakeProcess{{pid: 99, comm: "dnsmasq", sockets: []string{"4242"}}, coredns(nil)},
			pid:   100, comm: "coredns", corefile: "/etc/coredns/Corefile", forwards: fromResolv,
			resolv: map[string][]string{"/etc/resolv.conf": {"10.0.0.2"}},
		},
		{
			name: "node-cache with -conf=", tables: udp,
			procs: []fakeProcess{coredns(func(p *fakeProcess) {
				p.comm = "node-cache"
				p.args = []string{"/node-cache", "-localip", "169.254.25.10", "-conf=/etc/Corefile", "-upstreamsvc", "kube-dns"}
				p.files = map[string]string{"/etc/Corefile": ".:53 {\n forward . 10.0.0.3\n}\n"}
			})},
			pid: 100, comm: "node-cache", corefile: "/etc/Corefile",
			forwards: []probes.Forward{{Zones: []string{"."}, From: ".", To: []string{"10.0.0.3"}, Line: 2}}, resolv: map[string][]string{},
		},
		{
			name: "a relative --conf is read in the process's working directory", tables: udp,
			procs: []fakeProcess{coredns(func(p *fakeProcess) {
				p.args = []string{"coredns", "--conf", "Corefile.local"}
				p.files["Corefile.local"] = corefile
			})},
			pid: 100, comm: "coredns", corefile: "Corefile.local", forwards: fromResolv, resolv: map[string][]string{"/etc/resolv.conf": {"10.0.0.2"}},
		},
		{
			name: "without -conf, ./Corefile", tables: udp,
			procs: []fakeProcess{coredns(func(p *fakeProcess) {
				p.args = []string{"coredns"}
				p.files["Corefile"] = corefile
			})},
			pid: 100, comm: "coredns", corefile: "Corefile", forwards: fromResolv, resolv: map[string][]string{"/etc/resolv.conf": {"10.0.0.2"}},
		},
		{
			name: "the socket is held by another program", tables: udp,
			procs:   []fakeProcess{{pid: 99, comm: "dnsmasq", sockets: []string{"4242"}}},
			nilWant: true,
		},
		{
			name: "coredns holds no socket on a cache address", tables: udp,
			procs:   []fakeProcess{{pid: 99, comm: "dnsmasq", sockets: []string{"4242"}}, coredns(func(p *fakeProcess) { p.sockets = []string{"4243"} })},
			nilWant: true,
		},
		{
			name: "node-cache before a coredns with a lower PID, both holding it", tables: udp,
			procs: []fakeProcess{coredns(func(p *fakeProcess) { p.pid = 50 }), coredns(func(p *fakeProcess) { p.comm = "node-cache" })},
			pid:   100, comm: "node-cache", corefile: "/etc/coredns/Corefile", forwards: fromResolv, resolv: map[string][]string{"/etc/resolv.conf": {"10.0.0.2"}},
		},
		{
			name: "the inode number in another network namespace", tables: udp,
			procs:   []fakeProcess{coredns(func(p *fakeProcess) { p.netns = "pod" })},
			nilWant: true,
		},
		{
			name: "the inode number held under another user than the socket's", tables: udp,
			procs:   []fakeProcess{coredns(func(p *fakeProcess) { p.uid = 65534 })},
			nilWant: true,
		},
		{
			name: "a socket of nobody's, held by nobody's cache", tables: []netstate.Listener{{Addr: cache, Proto: "udp", Inode: 4242, UID: 65534}},
			procs: []fakeProcess{coredns(func(p *fakeProcess) { p.uid = 65534 })},
			pid:   100, comm: "coredns", corefile: "/etc/coredns/Corefile", forwards: fromResolv, resolv: map[string][]string{"/etc/resolv.conf": {"10.0.0.2"}},
		},
		{
			name: "no listener", tables: nil,
			procs:   []fakeProcess{coredns(nil)},
			nilWant: true,
		},
		{
			name: "the Corefile cannot be read", tables: udp,
			procs: []fakeProcess{coredns(func(p *fakeProcess) { delete(p.files, "/etc/coredns/Corefile") })},
			pid:   100, comm: "coredns", corefile: "/etc/coredns/Corefile", resolv: map[string][]string{},
			err: "read the Corefile of coredns (pid 100)",
		},
		{
			name: "the Corefile does not parse", tables: udp,
			procs: []fakeProcess{coredns(func(p *fakeProcess) { p.files["/etc/coredns/Corefile"] = ".:53 {\n forward . 10.0.0.3\n" })},
			pid:   100, comm: "coredns", corefile: "/etc/coredns/Corefile", resolv: map[string][]string{},
			forwards: []probes.Forward{{Zones: []string{"."}, From: ".", To: []string{"10.0.0.3"}, Line: 2}},
			err:      "/etc/coredns/Corefile (pid 100): unbalanced {",
		},
		{
			name: "the resolv.conf it forwards to is missing in its root", tables: udp,
			procs: []fakeProcess{coredns(func(p *fakeProcess) { delete(p.files, "/etc/resolv.conf") })},
			pid:   100, comm: "coredns", corefile: "/etc/coredns/Corefile", forwards: fromResolv, resolv: map[string][]string{},
			err: "read /etc/resolv.conf of coredns (pid 100)",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cp, _ := findHolders(fakeProc(t, nil, tc.procs...), tc.tables)
			if tc.nilWant {
				if cp != nil {
					t.Fatalf("found %+v, want none", cp)
				}
				return
			}
			if cp == nil {
				t.Fatal("no cache process found")
			}
			if cp.PID != tc.pid || cp.Comm != tc.comm || cp.Corefile != tc.corefile {
				t.Errorf("pid %d comm %q corefile %q, want %d %q %q", cp.PID, cp.Comm, cp.Corefile, tc.pid, tc.comm, tc.corefile)
			}
			if diff := cmp.Diff(tc.forwards, cp.Forwards); diff != "" {
				t.Errorf("forwards (-want +got):\n%s", diff)
			}
			resolv := map[string][]string{}
			for file, rf := range cp.Resolv {
				resolv[file] = []string{}
				for _, ns := range rf.Nameservers() {
					resolv[file] = append(resolv[file], ns.String())
				}
			}
			if diff := cmp.Diff(tc.resolv, resolv); diff != "" {
				t.Errorf("resolv.conf files (-want +got):\n%s", diff)
			}
			switch {
			case tc.err == "" && cp.Err != nil:
				t.Errorf("error %v", cp.Err)
			case tc.err != "" && (cp.Err == nil || !strings.Contains(cp.Err.Error(), tc.err)):
				t.Errorf("error %v, want one saying %q", cp.Err, tc.err)
			}
		})
	}
}

// TestFindDNSServers finds every node-cache and coredns process with a port-53 socket in its own
// network namespace's tables, by PID, each with its Corefile's blocks and the resolv.conf it forwards
// to read inside its own root, and what says whose it is (its namespace, the host's or not, root's
// or not, port 53 privileged there or not); other programs and DNS processes without such a socket
// are left out, and so is one holding a socket's inode number that is not its owner.
func TestFindDNSServers(t *testing.T) {
	const podUDP = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n" +
		"  2: 00000000:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000 65532        0 5152 2 0000000000000000 0\n"
	coredns := map[string]string{"/etc/coredns/Corefile": ".:53 {\n    kubernetes cluster.local in-addr.arpa {\n      fallthrough in-addr.arpa\n    }\n    forward . /etc/resolv.conf\n}\n", "/etc/resolv.conf": "nameserver 169.254.25.10\n"}
	procs := []fakeProcess{
		{pid: 2000, comm: "coredns", args: []string{"/coredns", "-conf", "/etc/coredns/Corefile"}, sockets: []string{"5152"}, files: coredns, netns: "pod", uid: 65532},
		{pid: 100, comm: "node-cache", args: []string{"/node-cache", "-conf", "/etc/Corefile"}, sockets: []string{"4242"},
			files: map[string]string{"/etc/Corefile": ".:53 {\n    forward . /etc/resolv.conf\n}\n", "/etc/resolv.conf": "nameserver 10.0.0.2\n"}},
		{pid: 300, comm: "dnsmasq", sockets: []string{"5152"}},
		{pid: 400, comm: "coredns", sockets: []string{"9999"}},
		// The socket's inode number, but not its owner: a number that came round (get_next_ino).
		{pid: 500, comm: "coredns", sockets: []string{"5152"}, uid: 1000},
	}
	root := fakeProc(t, map[string]string{"udp": procNetUDP}, procs...)
	fixture.TreeAt(t, root, map[string]string{"sys/net/ipv4/ip_unprivileged_port_start": "1024\n"})
	for _, p := range procs {
		table := procNetUDP // the host's namespace
		if p.pid != 100 {
			table = podUDP
		}
		fixture.TreeAt(t, root, map[string]string{strconv.Itoa(p.pid) + "/net/udp": table})
	}
	got := FindDNSServers(root)
	var pids []int
	for _, s := range got {
		pids = append(pids, s.PID)
	}
	if d := cmp.Diff([]int{100, 2000}, pids); d != "" {
		t.Fatalf("servers (-want +got):\n%s", d)
	}
	if nc := got[0]; !nc.HostNet || !nc.Root || !nc.PrivilegedPort || nc.NetNS.IsZero() {
		t.Errorf("node-cache in the host's namespace, root's, port 53 privileged: %+v", nc)
	}
	if cd := got[1]; cd.HostNet || cd.Root || cd.PrivilegedPort || cd.NetNS.IsZero() || cd.NetNS == got[0].NetNS {
		t.Errorf("coredns in a pod's namespace, uid 65532: %+v", cd)
	}
	// Port 53 is not privileged where the host lowered ip_unprivileged_port_start.
	fixture.TreeAt(t, root, map[string]string{"sys/net/ipv4/ip_unprivileged_port_start": "53\n"})
	if nc := FindDNSServers(root)[0]; nc.PrivilegedPort {
		t.Errorf("port 53 privileged with ip_unprivileged_port_start 53: %+v", nc)
	}
	cd := got[1]
	if cd.Err != nil || len(cd.Blocks) != 1 || cd.Blocks[0].Kubernetes == nil || !cd.Blocks[0].Kubernetes.Answers("cluster.local") || cd.Blocks[0].Kubernetes.Answers("in-addr.arpa") {
		t.Errorf("coredns: %+v (err %v)", cd.Blocks, cd.Err)
	}
	if rf := cd.Resolv["/etc/resolv.conf"]; rf == nil || len(rf.Nameservers()) != 1 || rf.Nameservers()[0] != cache {
		t.Errorf("coredns's resolv.conf: %+v", cd.Resolv)
	}
}
