package demo

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/testutil/fixture"
	"github.com/nodedns/nodedns/internal/testutil/nstest"
	"golang.org/x/sys/unix"
)

// node is one simulated Kubernetes node and its LAN.
type node struct {
	d       *demo
	sb, lan *nstest.Sandbox
	iface   string
	dnsmasq *exec.Cmd
	cache   *proc
}

// newNode makes the node and its LAN: the node's uplink iface at nodeAddr, the LAN resolver at
// lanDNS, the cluster DNS, and, with cacheLink, the nodelocaldns bridge with the cache address (the
// cache itself is started by startCache; without cacheLink the node-cache model makes its own).
func (d *demo) newNode(iface string, dhcp, cacheLink bool) *node {
	t := d.t
	n := &node{d: d, iface: iface}
	n.sb = nstest.NewWith(t, nstest.Options{UTSNamespace: true})
	n.lan = nstest.New(t)
	n.sb.Isolate(t)
	a, _ := nstest.Veth(t, n.sb, n.lan, nodeAddr+"/24", lanDNS+"/24")
	link := ""
	if cacheLink {
		link = fmt.Sprintf("ip link add nodelocaldns type bridge\nip addr add %s/32 dev nodelocaldns\nip link set nodelocaldns up\n", cacheAddr)
	}
	n.sb.Run(t, fmt.Sprintf(`set -e
hostname node1
ip link set %[1]s down
ip link set %[1]s name %[2]s
ip link set %[2]s up
ip route replace default via %[3]s dev %[2]s
%[5]sip link add kube-ipvs0 type bridge
ip addr add %[4]s/32 dev kube-ipvs0
ip link set kube-ipvs0 up
mkdir -p /var/lib/kubelet /var/lib/dhcp /etc/dhcp
`, a, iface, lanDNS, clusterDNS, link))

	// The LAN resolver: answers outsideName (standing in for the internet), NXDOMAIN for its own
	// domain's unknown names, and logs every query it receives.
	args := []string{"--keep-in-foreground", "--conf-file=/dev/null", "--pid-file=",
		"--no-resolv", "--no-hosts", "--listen-address=" + lanDNS, "--bind-interfaces",
		"--local=/" + dhcpDomain + "/", "--address=/" + outsideName + "/" + outsideAddr,
		"--log-queries", "--log-facility=-"}
	if dhcp {
		// The LAN's DHCP server hands the node its address by MAC, with the LAN resolver and the
		// domain as search domain (as in incident 001).
		args = append(args, "--dhcp-range="+nodeAddr+","+nodeAddr+",255.255.255.0,12h", "--dhcp-authoritative", "--no-ping",
			"--dhcp-leasefile="+filepath.Join(n.lan.Dir(), "dnsmasq.leases"),
			"--dhcp-option=option:router,"+lanDNS, "--dhcp-option=option:dns-server,"+lanDNS,
			"--dhcp-option=option:domain-name,"+dhcpDomain, "--dhcp-option=option:domain-search,"+dhcpDomain)
	}
	n.dnsmasq = n.lan.Start(t, "dnsmasq", args...)
	nstest.WaitFor(t, 20*time.Second, "the LAN resolver", func() bool {
		return n.podLookupVia(lanDNS, outsideName+".") == outsideAddr
	})

	// The cluster DNS: the cluster's zones, nothing else.
	corefile := filepath.Join(n.sb.Dir(), "Corefile-cluster")
	must(t, os.WriteFile(corefile, []byte(fmt.Sprintf(`cluster.local:53 in-addr.arpa:53 ip6.arpa:53 {
    bind %s
    errors
    hosts {
        %s %s
    }
}
`, clusterDNS, clusterAddr, clusterName)), 0o644))
	n.sb.Start(t, d.coredns, "-conf", corefile)
	nstest.WaitFor(t, 20*time.Second, "the cluster DNS", func() bool {
		return n.podLookupVia(clusterDNS, clusterName+".") == clusterAddr
	})
	return n
}

// kubesprayCorefile is kubespray's nodelocaldns ConfigMap for a node whose cluster DNS is
// clusterDNS and whose upstream forward target is the default /etc/resolv.conf, its metrics on the
// cache address.
var kubesprayCorefile = fixture.KubesprayCorefileFor(cacheAddr, clusterDNS, cacheAddr+":9253")

var resolvConfKey = regexp.MustCompile(`(?m)^resolvConf:\s*"?([^"\s]+)"?\s*$`)

// kubeletResolvConf returns the file kubelet's config names as resolvConf and its contents.
func (n *node) kubeletResolvConf() (string, []byte) {
	t := n.d.t
	cfg, err := os.ReadFile(n.sb.Path("/var/lib/kubelet/config.yaml"))
	must(t, err)
	m := resolvConfKey.FindSubmatch(cfg)
	if m == nil {
		t.Fatalf("kubelet's config has no resolvConf:\n%s", cfg)
	}
	p := string(m[1])
	data, err := os.ReadFile(n.sb.Path(p))
	must(t, err)
	return p, data
}

// podFiles writes the two files kubelet would write when it (re)creates the pods, from kubelet's
// resolvConf as it is now: the cache's (dnsPolicy: Default: the host file's nameservers, search and
// options) and an ordinary pod's (dnsPolicy: ClusterFirst). It returns their paths and the host
// file's nameserver and search lines.
func (n *node) podFiles() (cachePod, pod string, ns, search []string) {
	t := n.d.t
	_, data := n.kubeletResolvConf()
	var opts []string
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "nameserver":
			ns = append(ns, f[1])
		case "search":
			search = f[1:]
		case "options":
			opts = append(opts, f[1:]...)
		}
	}
	var def strings.Builder
	for _, s := range ns {
		fmt.Fprintf(&def, "nameserver %s\n", s)
	}
	if len(search) > 0 {
		fmt.Fprintf(&def, "search %s\n", strings.Join(search, " "))
	}
	if len(opts) > 0 {
		fmt.Fprintf(&def, "options %s\n", strings.Join(opts, " "))
	}
	cluster := []string{"default.svc.cluster.local", "svc.cluster.local", "cluster.local"}
	seen := map[string]bool{}
	var all []string
	for _, s := range append(cluster, search...) {
		if k := strings.TrimSuffix(s, "."); !seen[k] {
			seen[k] = true
			all = append(all, s)
		}
	}
	cachePod = filepath.Join(n.sb.Dir(), "pod-nodelocaldns-resolv.conf")
	pod = filepath.Join(n.sb.Dir(), "pod-resolv.conf")
	must(t, os.WriteFile(cachePod, []byte(def.String()), 0o644))
	must(t, os.WriteFile(pod, []byte(fmt.Sprintf("search %s\nnameserver %s\noptions ndots:5\n", strings.Join(all, " "), cacheAddr)), 0o644))
	return cachePod, pod, ns, search
}

// proc is a process started in the node with its exit observed.
type proc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	code int
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) output() string {
	data, _ := os.ReadFile(p.log)
	return string(data)
}

// stop ends the process with sig (the command is the sandbox's enter helper, which passes the
// signal on to the program) and waits for it.
func (p *proc) stop(sig syscall.Signal) {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill() // the program dies with the helper
		<-p.done
	}
}

// start runs name in the node and watches its exit; it is killed when the demo ends, before the
// sandbox goes. (The sandbox's own Start waits for its processes at cleanup, so a process whose exit
// the demo watches is started here instead.)
func (n *node) start(name string, args ...string) *proc {
	t := n.d.t
	logf, err := os.CreateTemp(n.sb.Dir(), filepath.Base(name)+"-*.log")
	must(t, err)
	cmd := n.sb.Cmd(context.Background(), name, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s in the node: %v", name, err)
	}
	p := &proc{cmd: cmd, log: logf.Name(), done: make(chan struct{}), code: -1}
	go func() {
		_ = cmd.Wait()
		p.code = cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop(syscall.SIGKILL)
		if t.Failed() {
			t.Logf("log of %s %v:\n%s", name, args, p.output())
		}
		logf.Close()
	})
	return p
}

var loopFatal = regexp.MustCompile(`\[FATAL\] plugin/loop: Loop .*`)

// startCache (re)creates the node-local cache pod with its /etc/resolv.conf from kubelet's
// resolvConf, and waits until it answers a cluster name or exits. Like kubelet with a crashing pod,
// it starts it again after an exit, up to restarts times; f counts the loop FATALs seen.
func (n *node) startCache(f *Figures, restarts int) {
	t := n.d.t
	corefile := filepath.Join(n.sb.Dir(), "Corefile-nodelocaldns")
	must(t, os.WriteFile(corefile, []byte(kubesprayCorefile), 0o644))
	cachePod, _, _, _ := n.podFiles()
	for try := 0; ; try++ {
		if n.cache != nil {
			n.cache.stop(syscall.SIGKILL)
		}
		f.Starts++
		n.cache = n.start("unshare", "-m", "--propagation", "private", "sh", "-c",
			fmt.Sprintf("mount --bind %s /etc/resolv.conf && exec %s -conf %s", nstest.Quote(cachePod), nstest.Quote(n.d.coredns), nstest.Quote(corefile)))
		// Up: answering the cluster name; the loop plugin's probe of "." is sent at start and
		// answered (or caught) within a second or two, so a cache still running 3 s after it
		// answered has passed it.
		var upAt time.Time
		nstest.WaitFor(t, 30*time.Second, "the node-local cache to answer or exit", func() bool {
			if n.cache.exited() {
				return true
			}
			if upAt.IsZero() {
				if n.podLookupVia(cacheAddr, clusterName+".") == clusterAddr {
					upAt = time.Now()
				}
				return false
			}
			return time.Since(upAt) > 3*time.Second
		})
		if !n.cache.exited() {
			f.CacheUp = true
			f.ExitCode = -1
			return
		}
		f.CacheUp = false
		f.ExitCode = n.cache.code
		if m := loopFatal.FindString(n.cache.output()); m != "" {
			f.LoopFatals++
			if f.FatalLine == "" {
				f.FatalLine = m
			}
		}
		if try >= restarts {
			return
		}
	}
}

// measure fills the figures kubelet's files and the pods give now: the cache is (re)started
// (restarts: how often a crash is followed by a restart), then a pod looks up outsideName and, when
// leaks is set, Lookups dead service names while the LAN resolver's log is counted.
func (n *node) measure(f *Figures, restarts int, leaks bool) {
	_, pod, ns, search := n.podFiles()
	f.Nameservers, f.Search = ns, search
	f.Leaked, f.SelfForwarded = -1, -1
	n.startCache(f, restarts)
	f.Outside = n.podLookup(pod, outsideName)
	if leaks {
		before := n.leaked()
		names := make([]string, Lookups)
		for i := range names {
			names[i] = fmt.Sprintf("user%d-svc.user%d.svc.cluster.local", i+1, i+1)
		}
		n.podLookups(pod, names)
		time.Sleep(200 * time.Millisecond) // dnsmasq logs as it answers; let the last line land
		f.Leaked = n.leaked() - before
	}
	if f.CacheUp {
		f.SelfForwarded = n.selfForwarded()
	}
}

var leakRe = regexp.MustCompile(`(?m)query\[\w+\] \S+\.svc\.cluster\.local\.` + regexp.QuoteMeta(dhcpDomain) + ` from `)

// leaked counts the *.svc.cluster.local.<DHCP domain> queries in the LAN resolver's log so far.
func (n *node) leaked() int {
	f, ok := n.dnsmasq.Stdout.(*os.File)
	if !ok {
		n.d.t.Fatal("dnsmasq's log is not a file")
	}
	data, err := os.ReadFile(f.Name())
	must(n.d.t, err)
	return len(leakRe.FindAll(data, -1))
}

// podLookup resolves name with glibc (getent ahostsv4: A queries only) in a mount namespace whose
// /etc/resolv.conf is resolvConf, and returns the first address or why there is none.
func (n *node) podLookup(resolvConf, name string) string {
	return n.podLookups(resolvConf, []string{name})[0]
}

// podLookupVia resolves an absolute name through server only.
func (n *node) podLookupVia(server, name string) string {
	f := filepath.Join(n.sb.Dir(), "via-"+server+".conf")
	if err := os.WriteFile(f, []byte("nameserver "+server+"\noptions timeout:1 attempts:1\n"), 0o644); err != nil {
		n.d.t.Fatal(err)
	}
	return n.podLookups(f, []string{name})[0]
}

// podLookups resolves each name as a pod would, one after the other, and returns each first
// address or the failure.
func (n *node) podLookups(resolvConf string, names []string) []string {
	// A container has its own /etc/nsswitch.conf and /etc/hosts: glibc asks DNS, never this
	// machine's NSS modules (nss-resolve would ask the node's resolved instead of the pod's
	// resolv.conf) or its hosts file. The node's /etc is an overlay: creating a missing file there
	// to mount over touches nothing of this machine.
	nsswitch := filepath.Join(n.sb.Dir(), "pod-nsswitch.conf")
	hosts := filepath.Join(n.sb.Dir(), "pod-hosts")
	must(n.d.t, os.WriteFile(nsswitch, []byte("hosts: files dns\n"), 0o644))
	must(n.d.t, os.WriteFile(hosts, []byte("127.0.0.1 localhost\n"), 0o644))
	var b strings.Builder
	fmt.Fprintf(&b, "set -e\ntouch /etc/nsswitch.conf /etc/hosts\nmount --bind %s /etc/resolv.conf\nmount --bind %s /etc/nsswitch.conf\nmount --bind %s /etc/hosts\nset +e\n",
		nstest.Quote(resolvConf), nstest.Quote(nsswitch), nstest.Quote(hosts))
	for _, name := range names {
		fmt.Fprintf(&b, "a=$(getent ahostsv4 %s); rc=$?; echo \"$rc ${a%%%% *}\"\n", nstest.Quote(name))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := n.sb.Cmd(ctx, "unshare", "-m", "--propagation", "private", "sh", "-c", b.String()).CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err != nil || len(lines) != len(names) {
		n.d.t.Fatalf("pod lookups: %v: %s", err, out)
	}
	res := make([]string, len(names))
	for i, l := range lines {
		rc, addr, _ := strings.Cut(l, " ")
		switch {
		case rc == "0":
			res[i] = strings.TrimSpace(addr)
		case rc == "2":
			res[i] = "lookup failed"
		default:
			res[i] = "no answer (getent exit " + rc + ")"
		}
	}
	return res
}

// nodedns runs the real binary in the node with cfg.
func (n *node) nodedns(cfg string, args ...string) (string, int) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := n.sb.Cmd(ctx, n.d.bin, append([]string{"--config", cfg}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	code := 0
	if err != nil {
		code = -1
		if cmd.ProcessState != nil {
			code = cmd.ProcessState.ExitCode()
		}
		return string(out) + stderr.String(), code
	}
	return string(out), code
}

// changeRe matches the daemon's log of a change: `msg=wrote path=/etc/resolv.conf` or
// `msg="restarted systemd-resolved"`.
var changeRe = regexp.MustCompile(`(?m)msg=(?:(wrote|removed) path=(\S+)|"(restarted [^"]*)")`)

// runNodedns starts `nodedns run` in the node, waits until it is ready and until done holds, and
// returns the daemon and what it logged having changed.
func (n *node) runNodedns(cfg string, done func() bool) (*proc, []string) {
	t := n.d.t
	p := n.start(n.d.bin, "--config", cfg, "run")
	nstest.WaitFor(t, 60*time.Second, "nodedns run to be ready", func() bool {
		if p.exited() {
			t.Fatalf("nodedns run exited %d:\n%s", p.code, p.output())
		}
		return strings.Contains(p.output(), "daemon ready")
	})
	nstest.WaitFor(t, 60*time.Second, "nodedns run to fix the node", done)
	var changed []string
	for _, m := range changeRe.FindAllStringSubmatch(p.output(), -1) {
		if m[3] != "" {
			changed = append(changed, m[3])
		} else {
			changed = append(changed, m[1]+" "+m[2])
		}
	}
	return p, changed
}

// restore stops the daemon and runs `nodedns restore`, returning its report lines and whether
// kubelet's resolvConf is back to start (waiting a little: resolved rewrites its file after the
// restart restore asks for).
func (n *node) restore(p *proc, cfg string, start []byte) ([]string, bool) {
	p.stop(syscall.SIGTERM)
	out, code := n.nodedns(cfg, "restore")
	if code != 0 {
		n.d.t.Fatalf("nodedns restore exited %d:\n%s", code, out)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	exact := false
	deadline := time.Now().Add(10 * time.Second)
	for !exact && time.Now().Before(deadline) {
		_, now := n.kubeletResolvConf()
		if exact = string(now) == string(start); !exact {
			time.Sleep(50 * time.Millisecond)
		}
	}
	return lines, exact
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// selfForwarded asks the cache's Prometheus endpoint (kubespray's :9253) how many queries it
// forwarded to its own address, from inside the node's network namespace.
func (n *node) selfForwarded() int {
	t := n.d.t
	body, err := n.httpGet(cacheAddr+":9253", "/metrics")
	if err != nil {
		t.Fatalf("the cache's metrics: %v", err)
	}
	total := 0
	for _, l := range strings.Split(body, "\n") {
		if !strings.HasPrefix(l, "coredns_proxy_request_duration_seconds_count{") || !strings.Contains(l, `to="`+cacheAddr+`:53"`) {
			continue
		}
		f := strings.Fields(l)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("the cache's metrics: %q: %v", l, err)
		}
		total += int(v)
	}
	return total
}

// httpGet fetches path from addr inside the node's network namespace. The socket is made by a
// goroutine locked to a thread that joined the namespace; that thread is never unlocked, so it ends
// with the goroutine instead of going back to Go's pool in the wrong namespace.
func (n *node) httpGet(addr, path string) (string, error) {
	type result struct {
		conn net.Conn
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/net", n.sb.PID), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("setns: %w", err)}
			return
		}
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		ch <- result{c, err}
	}()
	r := <-ch
	if r.err != nil {
		return "", r.err
	}
	defer r.conn.Close()
	_ = r.conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(r.conn, "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n", path, addr); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(r.conn), nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return string(body), nil
}
