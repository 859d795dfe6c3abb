package nstest

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// CoreDNSEnv names the environment variable holding the CoreDNS v1.15.0 binary that .ci/run builds
// (go install github.com/coredns/coredns@v1.15.0, about 6 minutes on 2 cores) and caches.
const CoreDNSEnv = "NODEDNS_COREDNS"

// CoreDNS finds the CoreDNS binary ($NODEDNS_COREDNS, $NODEDNS_CACHE/coredns-v1.15.0/bin, the
// default cache, PATH), or skips the test.
func CoreDNS(t testing.TB) string {
	t.Helper()
	cands := []string{os.Getenv(CoreDNSEnv)}
	if c := os.Getenv("NODEDNS_CACHE"); c != "" {
		cands = append(cands, filepath.Join(c, "coredns-v1.15.0/bin/coredns"))
	}
	if h, err := os.UserHomeDir(); err == nil {
		cands = append(cands, filepath.Join(h, ".cache/nodedns-ci/coredns-v1.15.0/bin/coredns"))
	}
	if p, err := exec.LookPath("coredns"); err == nil {
		cands = append(cands, p)
	}
	for _, c := range cands {
		if fi, err := os.Stat(c); c != "" && err == nil && fi.Mode().IsRegular() {
			return c
		}
	}
	t.Skipf("needs CoreDNS v1.15.0: .ci/run builds it into $NODEDNS_CACHE/coredns-v1.15.0/bin (or set %s)", CoreDNSEnv)
	return ""
}

// ClusterName is the name every cache built by StartCache answers from its cluster.local zone.
const ClusterName = "kubernetes.default.svc.cluster.local."

// ClusterNameAddr is ClusterName's answer.
const ClusterNameAddr = "10.233.0.1"

// DefaultCacheAddrs are a dual-stack node's cache addresses: kubespray's 169.254.25.10 and a ULA
// from fd00::/8, as the Kubernetes docs recommend for IPv6.
var DefaultCacheAddrs = []netip.Addr{netip.MustParseAddr("169.254.25.10"), netip.MustParseAddr("fd00:25::10")}

// CacheOptions shape the node-local cache StartCache runs.
type CacheOptions struct {
	// Interface is the cache's interface, default nodelocaldns: a bridge (this kernel has no dummy
	// link type), brought up, so the kernel gives it an fe80:: address as on AKS-style nodes.
	Interface string
	// Addrs are the cache addresses, each a /32 or /128 on the interface; default DefaultCacheAddrs.
	Addrs []netip.Addr
	// Forward, when set, adds a "." zone forwarding to this resolv.conf (as node-cache's
	// `forward . /etc/resolv.conf`); without it the cache answers only cluster.local.
	Forward string
	// NoNotrack leaves out the raw-table NOTRACK rules.
	NoNotrack bool
	// ClusterDNS, when set, gives the cache kubespray's Corefile shape: cluster.local, in-addr.arpa
	// and ip6.arpa each in a server block forwarding to this address (force_tcp), instead of the
	// cluster.local hosts zone; ClusterName is then answered by whatever serves it there. Loop adds
	// kubespray's `loop` plugin to every block.
	ClusterDNS netip.Addr
	Loop       bool
	// Corefile, when set, is the cache's whole Corefile instead of the one StartCache writes (it must
	// still answer ClusterName on every address: Start waits for that).
	Corefile string
	// AsPod runs CoreDNS as node-local-dns's container runs it: in the node's network namespace
	// (the DaemonSet's hostNetwork: true) but in a PID and mount namespace of its own, whose init it
	// is, as root with a container's capabilities (containerd's defaults and the addon's NET_ADMIN;
	// kubernetes/dns's nodelocaldns.yaml), which a reader without CAP_SYS_PTRACE and with fewer
	// capabilities (the packaged unit) may not look into (its /proc/PID/fd). Root's as a pod's is:
	// the kernel lets a socket join another's SO_REUSEPORT group only when the same user made both,
	// so a cache of another user could not bind beside the standby at all. Stop SIGKILLs CoreDNS
	// itself, as a crash of the container would.
	AsPod bool
	// UID, with AsPod, runs the pod's CoreDNS as this user (and its group) with
	// CAP_NET_BIND_SERVICE as an ambient capability, as a DaemonSet whose securityContext sets
	// runAsUser does; 0: root's. Its binary and Corefile are bind-mounted under /run in the node
	// (the test's own paths are root's alone).
	UID int
}

// Cache is a real CoreDNS as the node-local cache of a sandbox node: bound to every cache address,
// answering ClusterName from a hosts zone for cluster.local (as node-cache forwards cluster.local
// to kube-dns, outside the upstream chain).
type Cache struct {
	Interface string
	Addrs     []netip.Addr
	Corefile  string
	Cmd       *exec.Cmd

	sb         *Sandbox
	bin        string
	forward    string
	clusterDNS netip.Addr
	loop       bool
	corefile   string
	asPod      bool
	uid        int
	pid        int // CoreDNS's PID as this machine numbers it
}

// StartCache makes a healthy node-local cache in the sandbox: the interface up with the cache
// addresses (waiting until the IPv6 ones are no longer tentative: CoreDNS cannot bind a tentative
// address), the raw-table NOTRACK rules node-cache installs for both families (PREROUTING and
// OUTPUT, udp and tcp 53; iptables and ip6tables), and CoreDNS bound to the addresses, answering on
// each of them over UDP and TCP before StartCache returns.
func (sb *Sandbox) StartCache(t testing.TB, o CacheOptions) *Cache {
	t.Helper()
	sb.Opts.Suite.Need(t, "apt-get install iptables bind9-dnsutils", "iptables", "ip6tables", "dig")
	c := &Cache{Interface: o.Interface, Addrs: o.Addrs, sb: sb, bin: CoreDNS(t), forward: o.Forward, clusterDNS: o.ClusterDNS, loop: o.Loop, corefile: o.Corefile, asPod: o.AsPod, uid: o.UID}
	if c.Interface == "" {
		c.Interface = "nodelocaldns"
	}
	if len(c.Addrs) == 0 {
		c.Addrs = DefaultCacheAddrs
	}
	var b strings.Builder
	fmt.Fprintf(&b, "set -e\nip link add %[1]s type bridge\nip link set %[1]s up\n", c.Interface)
	for _, a := range c.Addrs {
		fmt.Fprintf(&b, "ip addr add %s dev %s\n", netip.PrefixFrom(a, a.BitLen()), c.Interface)
	}
	sb.Run(t, b.String())
	WaitFor(t, 10*time.Second, "the IPv6 cache addresses to leave DAD", func() bool {
		out, err := sb.Try("ip -6 addr show dev " + c.Interface + " tentative")
		return err == nil && strings.TrimSpace(out) == ""
	})
	if !o.NoNotrack {
		for _, a := range c.Addrs {
			c.Notrack(t, "-A", a)
		}
	}
	c.Corefile = filepath.Join(sb.Dir(), fmt.Sprintf("Corefile-%s", c.Interface))
	c.writeCorefile(t)
	c.Start(t)
	return c
}

// writeCorefile writes the Corefile for c.Addrs: cluster.local from a hosts zone, and with a
// forward file everything else forwarded to it.
func (c *Cache) writeCorefile(t testing.TB) {
	t.Helper()
	if c.corefile != "" {
		if err := os.WriteFile(c.Corefile, []byte(c.corefile), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	var bind []string
	for _, a := range c.Addrs {
		bind = append(bind, a.String())
	}
	corefile := fmt.Sprintf(`cluster.local:53 {
    bind %[1]s
    hosts {
        %[2]s %[3]s
    }
}
`, strings.Join(bind, " "), ClusterNameAddr, strings.TrimSuffix(ClusterName, "."))
	loop := ""
	if c.loop {
		loop = "    loop\n"
	}
	if c.clusterDNS.IsValid() {
		// kubespray's nodelocaldns ConfigMap (roles/kubernetes-apps/ansible/templates/nodelocaldns-config.yml.j2).
		corefile = ""
		for _, z := range []string{"cluster.local", "in-addr.arpa", "ip6.arpa"} {
			corefile += fmt.Sprintf("%s:53 {\n    errors\n    cache 30\n%s    bind %s\n    forward . %s {\n        force_tcp\n    }\n}\n", z, loop, strings.Join(bind, " "), c.clusterDNS)
		}
	}
	if c.forward != "" {
		corefile += fmt.Sprintf(".:53 {\n    bind %s\n    errors\n%s    forward . %s\n}\n", strings.Join(bind, " "), loop, c.forward)
	}
	if err := os.WriteFile(c.Corefile, []byte(corefile), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Rebind makes CoreDNS listen on addrs instead (each must be on the node already, as node-cache binds
// every address of its interface): it rewrites the Corefile and restarts CoreDNS.
func (c *Cache) Rebind(t testing.TB, addrs []netip.Addr) {
	t.Helper()
	c.Addrs = addrs
	c.writeCorefile(t)
	c.Start(t)
}

// Notrack adds (-A) or deletes (-D) the raw-table NOTRACK rules node-cache installs for addr, with
// iptables or ip6tables by its family.
func (c *Cache) Notrack(t testing.TB, op string, addr netip.Addr) {
	t.Helper()
	cmd := "iptables"
	if addr.Is6() {
		cmd = "ip6tables"
	}
	c.sb.Run(t, fmt.Sprintf(`for c in PREROUTING OUTPUT; do for p in udp tcp; do %s -t raw %s $c -d %s -p $p --dport 53 -j NOTRACK; done; done`,
		cmd, op, netip.PrefixFrom(addr, addr.BitLen())))
}

// Start starts CoreDNS (stopping a running one first) and waits until it answers ClusterName on
// every cache address over UDP and TCP, asked from the node with dig.
func (c *Cache) Start(t testing.TB) {
	t.Helper()
	c.Stop()
	if c.asPod {
		c.startPod(t)
	} else {
		c.Cmd = c.sb.Start(t, c.bin, "-conf", c.Corefile)
		c.pid = c.Cmd.Process.Pid
	}
	for _, a := range c.Addrs {
		for _, tcp := range []string{"+notcp", "+tcp"} {
			WaitFor(t, 20*time.Second, fmt.Sprintf("the cache on %s (%s)", a, tcp), func() bool {
				out, err := c.sb.Try(fmt.Sprintf("dig %s +tries=1 +time=1 @%s %s A", tcp, a, ClusterName))
				return err == nil && strings.Contains(out, "status: NOERROR") && strings.Contains(out, ClusterNameAddr)
			})
		}
	}
}

// podCaps are a container's capabilities as containerd grants them by default
// (containerd's pkg/oci/spec.go, defaultUnixCaps) with NET_ADMIN, which kubernetes/dns's
// cluster/addons/dns/nodelocaldns/nodelocaldns.yaml adds for node-cache.
const podCaps = "-all,+chown,+dac_override,+fsetid,+fowner,+mknod,+net_raw,+setgid,+setuid,+setfcap,+setpcap,+net_bind_service,+sys_chroot,+kill,+audit_write,+net_admin"

// startPod starts CoreDNS as CacheOptions.AsPod says; unshare's --kill-child takes CoreDNS along if
// unshare itself is killed (the sandbox's end).
func (c *Cache) startPod(t testing.TB) {
	t.Helper()
	bin, corefile, user := c.bin, c.Corefile, []string{"--inh-caps=-all"}
	if c.uid != 0 {
		// Where another user may reach them: the test's temporary directory and the CI cache are
		// root's alone. A bind mount of the file itself follows the Corefile's rewrites (same inode).
		bin, corefile = "/run/nodecache-uid/coredns", "/run/nodecache-uid/Corefile"
		c.sb.Run(t, fmt.Sprintf(`set -e
if ! mountpoint -q %[1]s; then
  mkdir -p /run/nodecache-uid && touch %[1]s %[2]s
  mount --bind %[3]s %[1]s && mount --bind %[4]s %[2]s
fi`, bin, corefile, Quote(c.bin), Quote(c.Corefile)))
		user = []string{fmt.Sprintf("--reuid=%d", c.uid), fmt.Sprintf("--regid=%d", c.uid), "--clear-groups",
			"--inh-caps=-all,+net_bind_service", "--ambient-caps=-all,+net_bind_service"}
	}
	args := append([]string{"--pid", "--fork", "--kill-child=KILL", "--mount-proc", "setpriv", "--bounding-set=" + podCaps}, user...)
	c.Cmd = c.sb.Start(t, "unshare", append(args, "--", bin, "-conf", corefile)...)
	WaitFor(t, 10*time.Second, "the pod's CoreDNS to run", func() bool {
		pid, err := ChildPID(c.Cmd.Process.Pid)
		if err != nil {
			return false
		}
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil || strings.TrimSpace(string(comm)) != "coredns" {
			return false
		}
		c.pid = pid
		return true
	})
}

// PID is CoreDNS's PID as this machine numbers it (0 when stopped).
func (c *Cache) PID() int { return c.pid }

// Stop kills CoreDNS (SIGKILL) and waits until it is gone.
func (c *Cache) Stop() {
	if c.Cmd != nil && c.Cmd.Process != nil {
		if c.pid > 0 && c.pid != c.Cmd.Process.Pid {
			_ = syscall.Kill(c.pid, syscall.SIGKILL)
		}
		_ = c.Cmd.Process.Kill()
		_ = c.Cmd.Wait()
		c.Cmd = nil
	}
	c.pid = 0
}

// Log is CoreDNS's output so far (its log plugin's lines, when the Corefile has one).
func (c *Cache) Log() string { return output(c.Cmd) }

// output is what a command Start began has written so far to its log file.
func output(cmd *exec.Cmd) string {
	if cmd == nil {
		return ""
	}
	f, ok := cmd.Stdout.(*os.File)
	if !ok {
		return ""
	}
	data, _ := os.ReadFile(f.Name())
	return string(data)
}
