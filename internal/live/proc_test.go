package live

import (
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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
// descriptors point at, and files in its mount namespace (absolute paths under root/, relative ones
// under cwd/).
type fakeProcess struct {
	pid     int
	comm    string
	args    []string
	sockets []string
	files   map[string]string
}

// fakeProc builds a /proc tree: net/udp, net/udp6 and net/tcp as given, and the processes.
func fakeProc(t *testing.T, tables map[string]string, procs ...fakeProcess) string {
	t.Helper()
	files := map[string]string{"self/comm": "nodedns\n"} // not a pid: skipped
	for _, t6 := range []string{"udp", "udp6", "tcp", "tcp6"} {
		if data, ok := tables[t6]; ok {
			files["net/"+t6] = data
		}
	}
	for _, p := range procs {
		dir := strconv.Itoa(p.pid)
		files[dir+"/comm"] = p.comm + "\n"
		files[dir+"/cmdline"] = strings.Join(p.args, "\x00") + "\x00"
		for name, data := range p.files {
			if path.IsAbs(name) {
				files[dir+"/root"+name] = data
			} else {
				files[dir+"/cwd/"+name] = data
			}
		}
	}
	proc := fixture.Tree(t, files)
	for _, p := range procs {
		dir := strconv.Itoa(p.pid)
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

// TestFindCacheProcess finds the cache in fake /proc trees: by a socket on a cache address port 53
// and the process name, then its Corefile and the resolv.conf files it forwards to, read inside the
// process's own root.
func TestFindCacheProcess(t *testing.T) {
	const tcpHeader = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	udp := map[string]string{"udp": procNetUDP} // inode 4242 on 169.254.25.10:53, 4243 on 127.0.0.1:53
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
		tables   map[string]string
		procs    []fakeProcess
		addrs    []netip.Addr
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
			name:   "a TCP listener on the cache address",
			tables: map[string]string{"tcp": tcpHeader + "   0: 0A19FEA9:0035 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 306147 1 0 100 0 0 10 0\n"},
			procs:  []fakeProcess{coredns(func(p *fakeProcess) { p.sockets = []string{"306147"} })},
			pid:    100, comm: "coredns", corefile: "/etc/coredns/Corefile", forwards: fromResolv, resolv: map[string][]string{"/etc/resolv.conf": {"10.0.0.2"}},
		},
		{
			name:    "a TCP socket that does not listen",
			tables:  map[string]string{"tcp": tcpHeader + "   0: 0A19FEA9:0035 0100000A:D431 01 00000000:00000000 00:00000000 00000000     0        0 306148 1 0 100 0 0 10 0\n"},
			procs:   []fakeProcess{coredns(func(p *fakeProcess) { p.sockets = []string{"306148"} })},
			nilWant: true,
		},
		{
			name:   "an IPv6 cache address",
			tables: map[string]string{"udp6": "header\n13603: 000000FD000000000000000002000000:0035 00000000000000000000000000000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 306145 2 0 0\n"},
			procs:  []fakeProcess{coredns(func(p *fakeProcess) { p.sockets = []string{"306145"} })},
			addrs:  []netip.Addr{netip.MustParseAddr("fd00::2")},
			pid:    100, comm: "coredns", corefile: "/etc/coredns/Corefile", forwards: fromResolv, resolv: map[string][]string{"/etc/resolv.conf": {"10.0.0.2"}},
		},
		{
			name: "only a socket on another address", tables: udp,
			procs:   []fakeProcess{coredns(func(p *fakeProcess) { p.sockets = []string{"4243"} })},
			addrs:   []netip.Addr{netip.MustParseAddr("169.254.20.10")},
			nilWant: true,
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
			name: "no proc net tables", tables: map[string]string{},
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
			addrs := tc.addrs
			if addrs == nil {
				addrs = []netip.Addr{cache}
			}
			cp := FindCacheProcess(fakeProc(t, tc.tables, tc.procs...), addrs)
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

// TestFindPodCache finds a cache that runs in a network namespace of its own (cache mode lrp:
// node-local-dns in the pod network) by the port-53 socket in its own /proc/PID/net tables:
// node-cache before coredns, a process without such a socket never.
func TestFindPodCache(t *testing.T) {
	// A pod's own table: port 53 on its pod IP 10.200.0.2 (inode 5151) and on 0.0.0.0 (5152).
	const podUDP = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n" +
		"  1: 0200C80A:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 5151 2 0000000000000000 0\n" +
		"  2: 00000000:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 5152 2 0000000000000000 0\n"
	corefile := map[string]string{"/etc/Corefile": "cluster.local:53 {\n    forward . 10.233.0.3\n}\n.:53 {\n    forward . /etc/resolv.conf\n}\n", "/etc/resolv.conf": "nameserver 10.0.0.2\n"}
	proc := func(procs ...fakeProcess) string {
		root := fakeProc(t, map[string]string{"udp": procNetUDP}, procs...)
		for _, p := range procs {
			fixture.TreeAt(t, root, map[string]string{strconv.Itoa(p.pid) + "/net/udp": podUDP})
		}
		return root
	}
	tests := []struct {
		name  string
		procs []fakeProcess
		pid   int
	}{
		{"coredns in a pod", []fakeProcess{{pid: 300, comm: "coredns", args: []string{"coredns", "-conf", "/etc/Corefile"}, sockets: []string{"5151"}, files: corefile}}, 300},
		{"node-cache before a lower coredns", []fakeProcess{
			{pid: 100, comm: "coredns", args: []string{"coredns", "-conf", "/etc/Corefile"}, sockets: []string{"5152"}, files: corefile},
			{pid: 400, comm: "node-cache", args: []string{"node-cache", "-conf", "/etc/Corefile"}, sockets: []string{"5151"}, files: corefile},
			{pid: 500, comm: "node-cache", args: []string{"node-cache", "-conf", "/etc/Corefile"}, sockets: []string{"5151"}, files: corefile},
			{pid: 2000, comm: "coredns", args: []string{"coredns", "-conf", "/etc/Corefile"}, sockets: []string{"5152"}, files: corefile},
		}, 400},
		{"the lowest PID, in number not in name order", []fakeProcess{
			{pid: 1000, comm: "node-cache", args: []string{"node-cache", "-conf", "/etc/Corefile"}, sockets: []string{"5151"}, files: corefile},
			{pid: 200, comm: "coredns", args: []string{"coredns", "-conf", "/etc/Corefile"}, sockets: []string{"5151"}, files: corefile},
			{pid: 900, comm: "node-cache", args: []string{"node-cache", "-conf", "/etc/Corefile"}, sockets: []string{"5151"}, files: corefile},
		}, 900},
		{"a coredns holding no port-53 socket", []fakeProcess{{pid: 300, comm: "coredns", sockets: []string{"9999"}}}, 0},
		{"another program on port 53", []fakeProcess{{pid: 300, comm: "dnsmasq", sockets: []string{"5151"}}}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cp := FindPodCache(proc(tc.procs...))
			switch {
			case tc.pid == 0 && cp != nil:
				t.Fatalf("found %+v, want none", cp)
			case tc.pid == 0:
			case cp == nil:
				t.Fatalf("found none, want pid %d", tc.pid)
			case cp.PID != tc.pid || cp.Err != nil || len(cp.Forwards) != 2 || cp.Resolv["/etc/resolv.conf"] == nil:
				t.Errorf("found %+v, want pid %d with its Corefile and resolv.conf", cp, tc.pid)
			}
		})
	}
}

// TestFindDNSServers finds every node-cache and coredns process with a port-53 socket in its own
// network namespace's tables, by PID, each with its Corefile's blocks and the resolv.conf it forwards
// to read inside its own root; other programs and DNS processes without such a socket are left out.
func TestFindDNSServers(t *testing.T) {
	const podUDP = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n" +
		"  2: 00000000:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 5152 2 0000000000000000 0\n"
	coredns := map[string]string{"/etc/coredns/Corefile": ".:53 {\n    kubernetes cluster.local in-addr.arpa {\n      fallthrough in-addr.arpa\n    }\n    forward . /etc/resolv.conf\n}\n", "/etc/resolv.conf": "nameserver 169.254.25.10\n"}
	procs := []fakeProcess{
		{pid: 2000, comm: "coredns", args: []string{"/coredns", "-conf", "/etc/coredns/Corefile"}, sockets: []string{"5152"}, files: coredns},
		{pid: 100, comm: "node-cache", args: []string{"/node-cache", "-conf", "/etc/Corefile"}, sockets: []string{"4242"},
			files: map[string]string{"/etc/Corefile": ".:53 {\n    forward . /etc/resolv.conf\n}\n", "/etc/resolv.conf": "nameserver 10.0.0.2\n"}},
		{pid: 300, comm: "dnsmasq", sockets: []string{"5152"}},
		{pid: 400, comm: "coredns", sockets: []string{"9999"}},
	}
	root := fakeProc(t, map[string]string{"udp": procNetUDP}, procs...)
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
	cd := got[1]
	if cd.Err != nil || len(cd.Blocks) != 1 || cd.Blocks[0].Kubernetes == nil || !cd.Blocks[0].Kubernetes.Answers("cluster.local") || cd.Blocks[0].Kubernetes.Answers("in-addr.arpa") {
		t.Errorf("coredns: %+v (err %v)", cd.Blocks, cd.Err)
	}
	if rf := cd.Resolv["/etc/resolv.conf"]; rf == nil || len(rf.Nameservers()) != 1 || rf.Nameservers()[0] != cache {
		t.Errorf("coredns's resolv.conf: %+v", cd.Resolv)
	}
}
