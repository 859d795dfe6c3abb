package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/testutil/nstest"
	"github.com/nodedns/nodedns/resolvconf"
	"github.com/nodedns/nodedns/systemd"
	"github.com/nodedns/nodedns/systemd/bus"
)

// These tests run the real binary as `nodedns run` on a live node: inside an nstest sandbox, with a
// real systemd-resolved 252 on a private system bus, and (for DHCP) a real systemd-networkd 252
// taking a lease from dnsmasq in a second sandbox. PID 1 is not systemd here, so nodedns restarts
// resolved with resolved.restartCommand (the sandbox's restart script), as such nodes must.

// liveDeadline bounds every wait; the figures the issue asks for are measured and logged, and the
// assertions on them are generous (a loaded CI machine must not fail a correct daemon).
const liveDeadline = 30 * time.Second

// startLiveRun starts `nodedns --config cfg --log-level debug run` inside sb and waits until it has
// applied once. GOTRACEBACK=all makes SIGQUIT dump every goroutine (goroutineDump).
func startLiveRun(t *testing.T, sb *nstest.Sandbox, bin, cfg string) *daemonProc {
	t.Helper()
	// The command is the sandbox's enter helper: it passes signals on to nodedns (SIGTERM, SIGQUIT)
	// and ends as nodedns ended.
	cmd := sb.Cmd(context.Background(), bin, "--config", cfg, "--log-level", "debug", "run")
	cmd.Env = append(os.Environ(), "GOTRACEBACK=all")
	lb := &syncBuf{}
	cmd.Stderr, cmd.Stdout = lb, lb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &daemonProc{cmd: cmd, log: lb, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case err := <-p.done:
			p.done <- err
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("nodedns run log:\n%s", lb.String())
		}
	})
	nstest.WaitFor(t, liveDeadline, "nodedns run ready", func() bool { return strings.Contains(lb.String(), "daemon ready") })
	return p
}

// goroutineDump sends SIGQUIT and returns the goroutine stacks the Go runtime prints, one string
// per goroutine. The daemon exits 2, as the runtime does on SIGQUIT.
func goroutineDump(t *testing.T, p *daemonProc) []string {
	t.Helper()
	if code := p.stop(t, syscall.SIGQUIT); code != 2 {
		t.Fatalf("exit %d after SIGQUIT, want the runtime's 2", code)
	}
	out := p.log.String()
	i := strings.Index(out, "SIGQUIT: quit")
	if i < 0 {
		t.Fatalf("no SIGQUIT dump in the output:\n%s", out)
	}
	var gs []string
	for _, b := range strings.Split(out[i:], "\n\n") {
		if strings.HasPrefix(b, "goroutine ") {
			gs = append(gs, b)
		}
	}
	if len(gs) == 0 {
		t.Fatalf("no goroutine in the SIGQUIT dump:\n%s", out[i:])
	}
	return gs
}

// ownGoroutines drops the goroutines that run only runtime code (GC workers start at the first
// GC, whenever that is, one per P): they are not the daemon's, and not a leak.
func ownGoroutines(gs []string) []string {
	var out []string
	for _, g := range gs {
		for _, l := range strings.Split(g, "\n")[1:] {
			if l != "" && !strings.HasPrefix(l, "\t") && !strings.HasPrefix(strings.TrimPrefix(l, "created by "), "runtime.") {
				out = append(out, g)
				break
			}
		}
	}
	return out
}

// goroutineKinds counts goroutines by the first function of this module, godbus or fsnotify on
// their stack ("other": os/signal's, the runtime's), for a readable leak report.
func goroutineKinds(gs []string) map[string]int {
	re := regexp.MustCompile(`(?m)^((github\.com/nodedns/nodedns|github\.com/godbus/dbus/v5|github\.com/fsnotify)[^\s(]*(\.\(\*?[A-Za-z]+\))?\.[A-Za-z0-9_]+)`)
	out := map[string]int{}
	for _, g := range gs {
		k := "other"
		if m := re.FindStringSubmatch(g); m != nil {
			k = m[1]
		}
		out[k]++
	}
	return out
}

// percentile returns the p-th percentile (nearest rank) of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(float64(len(s))*p+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

var loopAddrs = []netip.Addr{netip.MustParseAddr("169.254.25.10"), netip.MustParseAddr("169.254.20.10")}

// TestRunLiveUnderFire is the issue's "Under fire" on a live node: the real binary runs `nodedns
// run` in a sandbox with a real systemd-resolved 252 and dbus-daemon. The node is seed 001:
// kubespray's drop-in points resolved's global DNS at the node-local cache, and something that
// pushes per-link settings over D-Bus (as NetworkManager does, again after every resolved restart it
// sees) gives the DHCP link ndf1 a loop server and the DHCP search domain example.org. The desired
// state is: no loop address in resolved's global or per-link DNS, no example.org on the link, and
// the same in resolved's own resolv.conf.
//
//   - (a) resolved is killed (SIGKILL, a crash) and started again (as systemd's Restart= would), and
//     the pusher pushes its settings again: the desired state must come back; the time from the kill
//     and from the push are logged, p50 and max over five crashes, and asserted against a generous
//     bound (the figure is 2 s);
//   - (b) dbus-daemon is killed and started again; resolved 252 stays up but off the new bus, so it
//     is restarted as well, as a real node's operator or service manager must; the pusher pushes
//     again: nodedns must reconnect and set the link right over the new bus (only it sets links);
//   - (c) after all that, the daemon has no more goroutines than a fresh daemon on the same node
//     (SIGQUIT dumps of both, compared by kind), and a third daemon stopped with SIGTERM right after
//     a crash and a push (its passes for them may still be running; not forced) exits 0 with no
//     temp file on the node.
func TestRunLiveUnderFire(t *testing.T) { nstest.Suites(t, testRunLiveUnderFire) }

func testRunLiveUnderFire(t *testing.T, s nstest.Suite) {
	bin := nstest.Build(t)
	sb := nstest.NewWith(t, nstest.Options{Suite: s})
	sb.Isolate(t)
	seed001Node(t, sb, "ndf1")
	sysbus := sb.SystemBus(t)
	res := sb.StartResolved(t)
	cfg := sb.Dir() + "/config.yaml"
	must(t, os.WriteFile(cfg, []byte("resolved:\n  restartCommand: ["+strconv.Quote(res.RestartScript)+"]\nnetplan:\n  mode: \"off\"\n"), 0o644))
	idx, err := strconv.Atoi(sb.IfIndex(t, "ndf1"))
	must(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// The test's own client plays the pusher and the observer; it reconnects by itself.
	c, err := bus.DialResolved(ctx, bus.ResolvedOptions{Address: sb.BusAddress(), MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
	must(t, err)
	defer c.Close()
	push := func() {
		t.Helper()
		nstest.WaitFor(t, liveDeadline, "resolved answering the test's client", func() bool { return c.Ping(ctx) == nil })
		must(t, c.SetLinkDNS(ctx, idx, []systemd.DNSServer{{Addr: netip.MustParseAddr("10.77.0.2")}, {Addr: loopAddrs[0]}}))
		must(t, c.SetLinkDomains(ctx, idx, []systemd.Domain{{Name: "example.org"}}))
	}
	// desired says why the state is not the desired one yet ("" when it is).
	desired := func() string {
		m, err := c.Manager(ctx)
		if err != nil {
			return err.Error()
		}
		for _, s := range m.DNS {
			if slices.Contains(loopAddrs, s.Addr) {
				return fmt.Sprintf("resolved lists %v (link %d)", s.Addr, s.IfIndex)
			}
		}
		for _, d := range m.Domains {
			if !d.RoutingOnly && resolvconf.CanonicalDomain(d.Name) == "example.org" {
				return fmt.Sprintf("resolved searches example.org (link %d)", d.IfIndex)
			}
		}
		li, err := c.Link(ctx, idx)
		if err != nil {
			return err.Error()
		}
		if !slices.ContainsFunc(li.DNS, func(s systemd.DNSServer) bool { return s.Addr == netip.MustParseAddr("10.77.0.2") }) {
			return fmt.Sprintf("the link lost its real server: %v", li.DNS)
		}
		data, err := os.ReadFile(sb.Path("/run/systemd/resolve/resolv.conf"))
		if err != nil {
			return err.Error()
		}
		for _, bad := range []string{"169.254.25.10", "example.org"} {
			if strings.Contains(string(data), bad) {
				return "resolved's resolv.conf has " + bad
			}
		}
		return ""
	}
	waitDesired := func(what string) time.Time {
		t.Helper()
		end := time.Now().Add(liveDeadline)
		for {
			why := desired()
			if why == "" {
				return time.Now()
			}
			if time.Now().After(end) {
				t.Fatalf("%s: not back to the desired state within %v: %s", what, liveDeadline, why)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	push()
	start := readSandboxFile(t, sb, "/run/systemd/resolve/resolv.conf")
	contains(t, "resolved's resolv.conf at the start", start, "nameserver 169.254.25.10")
	contains(t, "resolved's resolv.conf at the start", start, "search example.org")

	// A: the first apply; its SIGQUIT dump is the baseline of a daemon that has done its work.
	a := startLiveRun(t, sb, bin, cfg)
	waitDesired("first apply")
	for _, want := range []string{"action done", "kind=restart-resolved", "kind=set-link-dns", "kind=set-link-domains"} {
		contains(t, "first daemon's log", a.log.String(), want)
	}
	time.Sleep(time.Second) // idle: the passes the restart's own events cause are over
	base := ownGoroutines(goroutineDump(t, a))

	// B: under fire.
	b := startLiveRun(t, sb, bin, cfg)
	var fromKill, fromPush, down []time.Duration
	for i := range 5 {
		pid := res.PID(t)
		t0 := time.Now()
		must(t, syscall.Kill(pid, syscall.SIGKILL))
		res.Restart(t) // waits for the old process to be gone, starts resolved, waits until it answers
		tr := time.Now()
		push()
		t1 := time.Now()
		t2 := waitDesired(fmt.Sprintf("crash %d", i+1))
		fromKill, fromPush, down = append(fromKill, t2.Sub(t0)), append(fromPush, t2.Sub(t1)), append(down, tr.Sub(t0))
	}
	var busKill, busPush []time.Duration
	for i := range 2 {
		t0 := time.Now()
		// Only this sandbox's dbus-daemon, by its process (the command Start returns is the program itself).
		must(t, sysbus.Process.Kill())
		_ = sysbus.Wait()
		sysbus = sb.SystemBus(t)
		res.Restart(t)
		push()
		t1 := time.Now()
		t2 := waitDesired(fmt.Sprintf("bus restart %d", i+1))
		busKill, busPush = append(busKill, t2.Sub(t0)), append(busPush, t2.Sub(t1))
	}
	r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	t.Logf("resolved crash -> desired state again, 5 crashes: from the kill p50 %v max %v (of which resolved down until it answers again: %s); from the re-push p50 %v max %v",
		r(percentile(fromKill, .5)), r(slices.Max(fromKill)), durations(down), r(percentile(fromPush, .5)), r(slices.Max(fromPush)))
	t.Logf("dbus-daemon restart (+ resolved restart) -> desired state again, 2 restarts: from the kill %v; from the re-push %v", durations(busKill), durations(busPush))
	// The figure is 2 s from the crash; the bound is generous, the figure is the log line.
	if m := slices.Max(fromKill); m > 10*time.Second {
		t.Errorf("desired state back %v after a resolved crash, want well under 10s (the issue's figure: 2s)", m)
	}

	// The client's events reached the daemon, which re-read resolved and re-applied. After a bus
	// restart resolved may take its name before nodedns is back on the bus: then the reconnect is
	// the only notice, and enough.
	log := b.log.String()
	if n := strings.Count(log, `msg="systemd-resolved is on the bus"`); n < 5 {
		t.Errorf("%d resolved start events logged, want at least one per crash (5)", n)
	}
	if n := strings.Count(log, `msg="system bus reconnected"`); n != 2 {
		t.Errorf("%d bus reconnects logged, want 2", n)
	}
	if n := strings.Count(log, `trigger="systemd-resolved started (NameOwnerChanged)"`); n == 0 {
		t.Errorf("no pass triggered by a resolved start")
	}
	if n := strings.Count(log, "kind=set-link-domains"); n < 7 {
		t.Errorf("link domains set %d times, want at least once per re-push (7)", n)
	}

	// (c) No goroutine leak: after 7 restarts and 2 reconnects, B has what a fresh A had.
	time.Sleep(time.Second)
	fired := ownGoroutines(goroutineDump(t, b))
	bk, fk := goroutineKinds(base), goroutineKinds(fired)
	t.Logf("goroutines (the runtime's own left out): fresh daemon %d, after the fire %d", len(base), len(fired))
	if len(fired) > len(base) {
		t.Errorf("goroutines: %d in a fresh daemon, %d after the fire; by kind fresh %v, fired %v", len(base), len(fired), bk, fk)
	}
	for k, n := range fk {
		if n > bk[k] {
			t.Errorf("goroutines of %s: %d in a fresh daemon, %d after the fire", k, bk[k], n)
		}
	}

	// (c) SIGTERM right after a crash and a push: exit 0, no temp file left.
	cd := startLiveRun(t, sb, bin, cfg)
	must(t, syscall.Kill(res.PID(t), syscall.SIGKILL))
	res.Restart(t)
	push()
	if code := cd.stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("exit %d after SIGTERM, want 0", code)
	}
	contains(t, "the SIGTERMed daemon's log", cd.log.String(), "daemon stopped")
	for _, d := range []string{"/etc", "/var/lib/nodedns", "/run/systemd/resolve"} {
		if tmp := tempFiles(t, sb.Path(d)); len(tmp) > 0 {
			t.Errorf("temp files left after SIGTERM: %v", tmp)
		}
	}
}

func durations(ds []time.Duration) string {
	var s []string
	for _, d := range ds {
		s = append(s, d.Round(time.Millisecond).String())
	}
	return strings.Join(s, ", ")
}

// TestRunLiveNetworkdDHCP is the "Real DHCP" (b) on a live node: dnsmasq in one sandbox
// hands out domain example.org and a DNS server; a real systemd-networkd 252 in the other takes the
// lease through a .network file with [DHCPv4] UseDomains=yes and feeds a real systemd-resolved 252,
// which then searches example.org. resolved answers SetLinkDomains on networkd's link with LinkBusy,
// so the only place nodedns can strip the domain is networkd: `nodedns run` with netplan.apply: true
// (the node has no netplan, so the mode is override through networkd drop-ins) must write the
// UseDomains=no drop-in and run `networkctl reload`, after which neither networkd's link nor resolved
// has example.org, and the kubelet file names the lease's server without example.org. Then three
// renewals (`networkctl renew`) each bring a new DNS server; the time from networkd's lease file
// showing it to the kubelet file showing it is logged (the figure: within 1 s) and asserted
// against a generous bound.
func TestRunLiveNetworkdDHCP(t *testing.T) { nstest.Suites(t, testRunLiveNetworkdDHCP) }

func testRunLiveNetworkdDHCP(t *testing.T, s nstest.Suite) {
	s.Need(t, "apt-get install dnsmasq-base systemd", "dnsmasq", "networkctl", "/lib/systemd/systemd-networkd")
	bin := nstest.Build(t)
	srv, cli := nstest.New(t), nstest.NewWith(t, nstest.Options{Suite: s})
	srvIf, cliIf := nstest.Veth(t, srv, cli, "10.77.0.1/24", "10.77.0.2/24")
	cli.Run(t, "ip addr flush dev "+cliIf)
	opts := nstest.DHCPOptions{Range: "10.77.0.50,10.77.0.99,255.255.255.0,1h", Router: "10.77.0.1", DNS: []string{"10.77.0.53"}, Domain: "example.org"}
	dhcp := srv.StartDHCPServer(t, srvIf, opts)

	cli.Isolate(t)
	cli.SystemBus(t)
	res := cli.StartResolved(t)
	network := cli.NetworkFile(t, "50-ndtest", cliIf)
	cli.Run(t, `set -e
rm -f /etc/resolv.conf && ln -s /run/systemd/resolve/stub-resolv.conf /etc/resolv.conf
cat > /var/lib/kubelet/config.yaml <<'EOF'
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
clusterDNS: [169.254.25.10]
clusterDomain: cluster.local
resolvConf: /var/lib/nodedns/resolv.conf
EOF
`)
	cli.StartNetworkd(t)
	ifindex := cli.IfIndex(t, cliIf)
	leaseFile := cli.Path("/run/systemd/netif/leases/" + ifindex)
	linkFile := cli.Path("/run/systemd/netif/links/" + ifindex)
	resolvedConf := cli.Path("/run/systemd/resolve/resolv.conf")
	kubelet := cli.Path("/var/lib/nodedns/resolv.conf")
	// leaseHas reports whether networkd's lease has key=value. networkd 262 keeps its lease in no
	// file (docs/contract.md, "DHCP search domains"): there the lease is seen in the link
	// state networkd writes from it (DNS=, DOMAINS=).
	leaseHas := func(key, value string) bool { return nstest.FileHas(leaseFile, key+"="+value) }
	if s.Chrooted() {
		linkKey := map[string]string{"DOMAINNAME": "DOMAINS", "DNS": "DNS"}
		leaseHas = func(key, value string) bool { return nstest.FileHas(linkFile, "\n"+linkKey[key]+"="+value) }
	}
	nstest.WaitFor(t, liveDeadline, "a DHCP lease with DOMAINNAME=example.org", func() bool { return leaseHas("DOMAINNAME", "example.org") })
	nstest.WaitFor(t, liveDeadline, "networkd passing example.org to the link", func() bool { return nstest.FileHas(linkFile, "DOMAINS=example.org") })
	nstest.WaitFor(t, liveDeadline, "resolved searching example.org", func() bool { return nstest.FileHas(resolvedConf, "search example.org") })

	cfg := cli.Dir() + "/config.yaml"
	must(t, os.WriteFile(cfg, []byte("resolved:\n  restartCommand: ["+strconv.Quote(res.RestartScript)+"]\nnetplan:\n  apply: true\n"), 0o644))
	p := startLiveRun(t, cli, bin, cfg)

	dropIn := cli.Path("/etc/systemd/network/50-ndtest.network.d/nodedns.conf")
	nstest.WaitFor(t, liveDeadline, "nodedns's networkd drop-in", func() bool { return nstest.FileHas(dropIn, "[DHCPv4]\nUseDomains=no\n") })
	contains(t, "the drop-in", readSandboxFile(t, cli, "/etc/systemd/network/50-ndtest.network.d/nodedns.conf"), network)
	nstest.WaitFor(t, liveDeadline, "networkctl reload run by nodedns", func() bool {
		return strings.Contains(p.log.String(), "action done") && strings.Contains(p.log.String(), "kind=networkctl-reload")
	})
	t.Cleanup(func() {
		if t.Failed() {
			for _, f := range []string{leaseFile, linkFile, resolvedConf, kubelet} {
				data, err := os.ReadFile(f)
				t.Logf("%s (%v):\n%s", f, err, data)
			}
		}
	})
	nstest.WaitFor(t, liveDeadline, "example.org gone from networkd's link and from resolved", func() bool {
		// Not ADMIN_STATE=configured: networkd 252 left this veth "configuring" here after the
		// reload (seen, cause not looked into; the DHCP part is done, DOMAINS= is written).
		return nstest.FileHas(linkFile, "\nDOMAINS=\n") && !nstest.FileHas(linkFile, "example.org") &&
			nstest.FileHas(resolvedConf, "nameserver 10.77.0.53") && !nstest.FileHas(resolvedConf, "example.org")
	})
	nstest.WaitFor(t, liveDeadline, "the kubelet file from the lease", func() bool { return nstest.FileHas(kubelet, "nameserver 10.77.0.53\n") })
	k := readSandboxFile(t, cli, "/var/lib/nodedns/resolv.conf")
	for _, bad := range []string{"example.org", "169.254.25.10", "127.0.0.53"} {
		notContains(t, "the kubelet file", k, bad)
	}
	// nodedns remembers the lease's domain, so a pass while networkd re-takes the lease (its file
	// gone for a moment; on 262 the varlink reply without it) keeps it out (docs/contract.md "DHCP
	// search domains"; TestDHCPDomainRecordBridgesALeaseGap makes that moment deterministically).
	rec := readSandboxFile(t, cli, "/var/lib/nodedns/dhcp-domains.json")
	t.Logf("nodedns's record of DHCP domains:\n%s", rec)
	contains(t, "nodedns's record of DHCP domains", rec, `"example.org"`)
	// The domain was stripped where it can be: never by SetLinkDomains on networkd's link.
	for _, bad := range []string{"action failed", "LinkBusy"} {
		notContains(t, "the daemon's log", p.log.String(), bad)
	}

	// Renewals, each with a new DNS server.
	var lags []time.Duration
	for i, dns := range []string{"10.77.0.54", "10.77.0.55", "10.77.0.56"} {
		o := opts
		o.DNS = []string{dns}
		dhcp.Restart(t, o)
		cli.Run(t, "networkctl renew "+cliIf)
		var tLease time.Time
		end := time.Now().Add(liveDeadline)
		for {
			now := time.Now()
			if tLease.IsZero() && leaseHas("DNS", dns+"\n") {
				tLease = now
			}
			if nstest.FileHas(kubelet, "nameserver "+dns+"\n") {
				if tLease.IsZero() {
					tLease = now // both seen in the same poll
				}
				lags = append(lags, now.Sub(tLease))
				break
			}
			if now.After(end) {
				t.Fatalf("renewal %d: the kubelet file did not follow %s within %v (lease has it: %v)\nkubelet file:\n%s", i+1, dns, liveDeadline, !tLease.IsZero(), readSandboxFile(t, cli, "/var/lib/nodedns/resolv.conf"))
			}
			time.Sleep(2 * time.Millisecond)
		}
		k := readSandboxFile(t, cli, "/var/lib/nodedns/resolv.conf")
		if strings.Count(k, "nameserver ") != 1 || strings.Contains(k, "example.org") {
			t.Errorf("renewal %d: kubelet file:\n%s\nwant only nameserver %s (an old lease's server must not linger) and no example.org", i+1, k, dns)
		}
	}
	t.Logf("renewal with a new DNS server: networkd's lease file -> kubelet file: %s (max %v)", durations(lags), slices.Max(lags).Round(time.Millisecond))
	if m := slices.Max(lags); m > 5*time.Second {
		t.Errorf("the kubelet file followed a renewal %v after the lease, want well under 5s (the issue's figure: 1s)", m)
	}
	if nstest.FileHas(resolvedConf, "example.org") {
		t.Errorf("example.org came back in resolved after the renewals")
	}
	if code := p.stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
}
