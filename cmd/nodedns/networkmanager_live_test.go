package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/nodedns/nodedns/internal/networkmanager"
	nmbus "github.com/nodedns/nodedns/internal/networkmanager/bus"
	"github.com/nodedns/nodedns/internal/testutil/nstest"
	"github.com/nodedns/nodedns/probes"
)

// These tests run the real binary on a node with a real NetworkManager 1.42.4 (nstest
// StartNetworkManager: its own PID, UTS, mount and network namespaces, a private system bus, a
// dnsmasq DHCP server on a veth offering 10.66.0.53 and example.org) and kubespray's dns.conf.
// nodedns runs inside the node's namespaces, as on a real node: NM answers Reload only to callers
// whose PID it can see.

const (
	nmLoop        = "169.254.25.10"
	nmKubeletConf = "/etc/kubernetes/kubelet-config.yaml"
)

// nmKubesprayFile reads a file of the kubespray NetworkManager tree.
func nmKubesprayFile(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata/kubespray/networkmanager", p))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// nmLive is a NetworkManager node with nodedns's binary, config and a NetworkManager program on
// PATH for `--print-config`.
type nmLive struct {
	*nstest.NetworkManager
	bin, cfg, path string
}

// nmKubesprayConfD are the conf.d files kubespray writes on a NetworkManager node.
func nmKubesprayConfD(t *testing.T) map[string]string {
	return map[string]string{
		"dns.conf":    nmKubesprayFile(t, "etc/NetworkManager/conf.d/dns.conf"),
		"k8s.conf":    nmKubesprayFile(t, "etc/NetworkManager/conf.d/k8s.conf"),
		"calico.conf": nmKubesprayFile(t, "etc/NetworkManager/conf.d/calico.conf"),
	}
}

// startNMLive starts a NetworkManager node with confD in conf.d (kubespray's: nmKubesprayConfD),
// kubelet's config reading /etc/resolv.conf, DHCP renewing every 2 s.
func startNMLive(t *testing.T, s nstest.Suite, confD map[string]string) *nmLive {
	t.Helper()
	return startNMLiveWith(t, nstest.NMOptions{ConfD: confD, Suite: s})
}

// startNMLiveWith is startNMLive with more of the node's options (o.DHCP and o.Hostname are set).
func startNMLiveWith(t *testing.T, o nstest.NMOptions) *nmLive {
	t.Helper()
	nstest.Require(t)
	offer := nstest.NMDefaultDHCP()
	offer.Options = []string{"option:T1,2", "option:T2,3"}
	o.DHCP, o.Hostname = offer, "node1"
	nm := nstest.StartNetworkManager(t, o)
	nm.WriteFile(t, nmKubeletConf, nmKubesprayFile(t, "etc/kubernetes/kubelet-config.yaml"), 0o600)
	l := &nmLive{NetworkManager: nm, bin: nstest.Build(t), cfg: filepath.Join(nm.Node.Dir(), "config.yaml")}
	must(t, os.WriteFile(l.cfg, []byte("kubelet:\n  config: "+nmKubeletConf+"\nnetplan:\n  mode: \"off\"\nprobes:\n  timeout: 300ms\n"), 0o644))
	// The unpacked NetworkManager needs its libraries: a wrapper named NetworkManager on PATH, as
	// /usr/sbin/NetworkManager is on a real node.
	binDir := filepath.Join(nm.Node.Dir(), "bin")
	must(t, os.MkdirAll(binDir, 0o755))
	wrapper := fmt.Sprintf("#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s \"$@\"\n", filepath.Join(nm.Dir, "usr/lib/x86_64-linux-gnu"), filepath.Join(nm.Dir, "usr/sbin/NetworkManager"))
	must(t, os.WriteFile(filepath.Join(binDir, "NetworkManager"), []byte(wrapper), 0o755))
	l.path = binDir + ":" + os.Getenv("PATH")
	return l
}

// run runs nodedns inside the node and returns its combined output and exit code.
func (l *nmLive) run(t *testing.T, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := l.Node.Cmd(ctx, "env", append([]string{"PATH=" + l.path, l.bin, "--config", l.cfg}, args...)...)
	out, err := cmd.CombinedOutput()
	code := 0
	if err != nil {
		code = cmd.ProcessState.ExitCode()
	}
	t.Logf("nodedns %s -> %d\n%s", strings.Join(args, " "), code, out)
	return string(out), code
}

func (l *nmLive) check(t *testing.T) (probes.Report, int) {
	t.Helper()
	out, code := l.run(t, "check", "-o", "json")
	var rep probes.Report
	i := strings.Index(out, "{\n")
	if i < 0 {
		t.Fatalf("check -o json printed no JSON:\n%s", out)
	}
	if err := json.Unmarshal([]byte(out[i:]), &rep); err != nil {
		t.Fatalf("check -o json: %v\n%s", err, out)
	}
	return rep, code
}

func (l *nmLive) read(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(l.Path(p))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// confD is every file of /etc/NetworkManager/conf.d with its bytes.
func (l *nmLive) confD(t *testing.T) map[string]string {
	t.Helper()
	es, err := os.ReadDir(l.Path(networkmanager.EtcConfDir))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, e := range es {
		m[e.Name()] = l.read(t, networkmanager.EtcConfDir+"/"+e.Name())
	}
	return m
}

func nmStarServers(t *testing.T, c *nmbus.Client) []string {
	t.Helper()
	g, err := c.GlobalDNS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if g == nil {
		return nil
	}
	d, _ := g.Domain("*")
	return d.Servers
}

// TestNetworkManagerLive is issue 12's node: kubespray's dns.conf (`servers = 169.254.25.10,
// 10.66.0.53`, cluster searches) and DHCP from dnsmasq (10.66.0.53, example.org).
//   - before: check exits 1, resolvconf.loop naming NetworkManager and dns.conf:3;
//   - apply: NM's resolv.conf (NM's header: nodedns never writes it) lists 10.66.0.53 and no
//     169.254.25.10; GlobalDnsConfiguration over D-Bus lists no loop address; the kubelet file lists
//     10.66.0.53 with no loop address and no example.org; a second plan is empty;
//   - NM restarted (kubespray's handler): still no loop;
//   - restore: conf.d byte-identical to before, connection settings equal, NM's resolv.conf
//     byte-identical to what it wrote before apply.
func TestNetworkManagerLive(t *testing.T) { nstest.Suites(t, testNetworkManagerLive) }

func testNetworkManagerLive(t *testing.T, suite nstest.Suite) {
	l := startNMLive(t, suite, nmKubesprayConfD(t))
	c := dialNMBus(t, l.NetworkManager)
	ctx := context.Background()
	before := l.ResolvConf(t)
	if !strings.Contains(string(before), "nameserver "+nmLoop) {
		t.Fatalf("kubespray's dns.conf did not put the cache into NM's resolv.conf:\n%s", before)
	}
	confBefore := l.confD(t)
	connsBefore, err := c.Connections(ctx)
	must(t, err)

	rep, code := l.check(t)
	loop := byID(rep, "resolvconf.loop")
	if code != 1 || loop.Status != probes.Problem {
		t.Errorf("check before apply: exit %d, resolvconf.loop %s", code, loop.Status)
	}
	contains(t, "resolvconf.loop", loop.Message, "NetworkManager writes it, from [global-dns-domain-*] servers= in /etc/NetworkManager/conf.d/dns.conf:3")

	start := time.Now()
	out, code := l.run(t, "apply")
	if code != 0 {
		t.Fatalf("apply exited %d", code)
	}
	contains(t, "apply output", out, "wrote /etc/NetworkManager/conf.d/zz-nodedns.conf")
	notContains(t, "apply output", out, "wrote /etc/resolv.conf")
	l.WaitResolvConf(t, "NM's fixed resolv.conf", func(s string) bool { return s == nmFixedResolv })
	t.Logf("apply until NM's resolv.conf is fixed: %v", time.Since(start).Round(time.Millisecond))
	if got := nmStarServers(t, c); !slices.Equal(got, []string{"10.66.0.53"}) {
		t.Errorf("GlobalDnsConfiguration \"*\" servers after apply: %v", got)
	}
	kubelet := l.read(t, "/var/lib/nodedns/resolv.conf")
	contains(t, "kubelet file", kubelet, "nameserver 10.66.0.53\n")
	for _, bad := range []string{nmLoop, "example.org", "svc.cluster.local"} {
		notContains(t, "kubelet file", kubelet, bad)
	}
	rep, _ = l.check(t)
	for _, id := range []string{"resolvconf.loop", "resolvconf.search", "resolvconf.nameservers", "kubelet.resolvconf", "dhcp.search"} {
		if r := byID(rep, id); r.Status != probes.OK {
			t.Errorf("%s after apply = %s: %s (%s)", id, r.Status, r.Message, r.Hint)
		}
	}
	if out, code := l.run(t, "plan", "--detailed-exitcode"); code != 0 {
		t.Errorf("plan after apply exited %d, want 0:\n%s", code, out)
	}

	// kubespray's handler restarts NetworkManager: it reads zz-nodedns.conf again.
	l.Restart(t)
	l.WaitDHCP(t, "a lease after the restart", func(st string) bool { return strings.Contains(st, "dhcp4.domain_name_servers=") })
	for i := 0; i < 10; i++ {
		if got := string(l.ResolvConf(t)); got != nmFixedResolv {
			t.Fatalf("NM's resolv.conf %d ms after the restart:\n%s", i*50, got)
		}
		time.Sleep(50 * time.Millisecond)
	}

	out, code = l.run(t, "restore")
	if code != 0 {
		t.Fatalf("restore exited %d", code)
	}
	contains(t, "restore output", out, "reload-networkmanager NetworkManager")
	l.WaitResolvConf(t, "NM's original resolv.conf", func(s string) bool { return s == string(before) })
	if diff := cmp.Diff(confBefore, l.confD(t)); diff != "" {
		t.Errorf("conf.d after restore (-before +after):\n%s", diff)
	}
	connsAfter, err := c.Connections(ctx)
	must(t, err)
	// By UUID: the D-Bus object paths are NM's own numbering, new after its restart.
	byUUID := cmpopts.SortSlices(func(a, b nmbus.Connection) bool { return a.UUID < b.UUID })
	if diff := cmp.Diff(connsBefore, connsAfter, byUUID, cmpopts.IgnoreFields(nmbus.Connection{}, "Path")); diff != "" {
		t.Errorf("connection settings after restore (-before +after):\n%s", diff)
	}
	if got := nmStarServers(t, c); !slices.Equal(got, []string{nmLoop, "10.66.0.53"}) {
		t.Errorf("GlobalDnsConfiguration \"*\" servers after restore: %v, want kubespray's", got)
	}
}

// TestNetworkManagerLiveDBusAndBadFiles: a global DNS set over D-Bus (stored in
// NetworkManager-intern.conf), and a conf.d file NetworkManager cannot parse.
//   - check names "set over D-Bus"; apply backs the intern file up before its reload (NM 1.42.4
//     drops the D-Bus global DNS for good once a conf.d file sets one), keeps its search domain, and
//     a second plan is empty although NM has dropped it;
//   - a bad conf.d file: plan blocks zz-nodedns.conf with NetworkManager's own --print-config
//     message (Reload would answer success and keep the old configuration);
//   - restore puts the intern file back byte for byte and reloads: NM's resolv.conf is again what
//     it wrote from the D-Bus global DNS.
func TestNetworkManagerLiveDBusAndBadFiles(t *testing.T) {
	nstest.Suites(t, testNetworkManagerLiveDBusAndBadFiles)
}

func testNetworkManagerLiveDBusAndBadFiles(t *testing.T, suite nstest.Suite) {
	l := startNMLive(t, suite, nil)
	c := dialNMBus(t, l.NetworkManager)
	set := &networkmanager.GlobalDNS{Searches: []string{"corp.example"},
		Domains: []networkmanager.GlobalDNSDomain{{Name: "*", Servers: []string{nmLoop, "10.66.0.53"}}}}
	must(t, c.SetGlobalDNS(context.Background(), set))
	loop := "# Generated by NetworkManager\nsearch corp.example\nnameserver 169.254.25.10\nnameserver 10.66.0.53\n"
	l.WaitResolvConf(t, "the global DNS set over D-Bus", func(s string) bool { return s == loop })
	intern := l.read(t, networkmanager.InternConfPath)

	rep, _ := l.check(t)
	contains(t, "resolvconf.loop", byID(rep, "resolvconf.loop").Message, "NetworkManager writes it, from a global DNS configuration set over D-Bus (stored in /var/lib/NetworkManager/NetworkManager-intern.conf)")
	out, _ := l.run(t, "plan")
	if got := l.read(t, networkmanager.InternConfPath); got != intern {
		t.Errorf("plan changed the intern file (NetworkManager --print-config must run on a copy):\n%s", got)
	}
	contains(t, "plan", out, "back up /var/lib/NetworkManager/NetworkManager-intern.conf; Manager.Reload")
	if _, code := l.run(t, "apply"); code != 0 {
		t.Fatalf("apply exited %d", code)
	}
	fixed := "# Generated by NetworkManager\nsearch corp.example\nnameserver 10.66.0.53\n"
	l.WaitResolvConf(t, "NM's fixed resolv.conf", func(s string) bool { return s == fixed })
	if got := l.read(t, networkmanager.InternConfPath); got == intern {
		t.Errorf("NetworkManager kept the D-Bus global DNS in its intern file (FACTS.md says 1.42.4 drops it):\n%s", got)
	}
	if out, code := l.run(t, "plan", "--detailed-exitcode"); code != 0 {
		t.Errorf("plan after apply exited %d, want 0:\n%s", code, out)
	}

	bad := networkmanager.EtcConfDir + "/50-bad.conf"
	l.WriteFile(t, bad, "; GKeyFile has no ';' comments\n", 0o644)
	// A renewal's new server makes nodedns want to rewrite zz-nodedns.conf: blocked, with NM's words.
	must(t, os.WriteFile(l.Path(networkmanager.NodeDNSConfPath), []byte("[global-dns-domain-*]\nservers=10.66.0.99\n"), 0o644))
	out, code := l.run(t, "plan")
	if code != 1 {
		t.Errorf("plan with a bad conf.d file exited %d, want 1 (blocked)", code)
	}
	contains(t, "plan", out, "# blocked /etc/NetworkManager/conf.d/zz-nodedns.conf: NetworkManager refuses its configuration (`NetworkManager --print-config` exits 7: Failed to read configuration: /etc/NetworkManager/conf.d/50-bad.conf: ")
	l.RemoveFile(t, bad)

	out, code = l.run(t, "restore")
	if code != 0 {
		t.Fatalf("restore exited %d", code)
	}
	contains(t, "restore output", out, "restored /var/lib/NetworkManager/NetworkManager-intern.conf")
	l.WaitResolvConf(t, "the D-Bus global DNS back", func(s string) bool { return s == loop })
	if got := l.read(t, networkmanager.InternConfPath); got != intern {
		t.Errorf("the intern file after restore:\n%s\nwant:\n%s", got, intern)
	}
	if got := nmStarServers(t, c); !slices.Equal(got, []string{nmLoop, "10.66.0.53"}) {
		t.Errorf("GlobalDnsConfiguration after restore: %v", got)
	}
}

// TestNetworkManagerRunLive runs `nodedns run` on the same node:
//   - for 20 s while NetworkManager reloads and reapplies 5 times: nodedns writes /etc/resolv.conf 0
//     times and reports no fight (no "another writer", no backoff);
//   - the DHCP server changes its offer to 10.66.0.54: NM's resolv.conf and the kubelet file follow
//     within seconds (NM keeps the old global servers until zz-nodedns.conf is rewritten and NM
//     reloaded: nodedns does both on NM's DHCP4Config signal);
//   - NetworkManager restarted;
//
// and no sample of NM's resolv.conf or the kubelet file taken every 50 ms from the first fix on
// shows a loop address.
func TestNetworkManagerRunLive(t *testing.T) { nstest.Suites(t, testNetworkManagerRunLive) }

func testNetworkManagerRunLive(t *testing.T, suite nstest.Suite) {
	l := startNMLive(t, suite, nmKubesprayConfD(t))
	d := l.startRun(t)
	l.WaitResolvConf(t, "the daemon's first fix", func(s string) bool { return s == nmFixedResolv })

	s := l.sample(t, 50*time.Millisecond)
	for i := 0; i < 5; i++ {
		l.Reload(t)
		time.Sleep(2 * time.Second)
		l.Reapply(t)
		time.Sleep(2 * time.Second)
	}
	log := d.log.String()
	if n := strings.Count(log, "msg=wrote path=/etc/resolv.conf"); n != 0 {
		t.Errorf("nodedns wrote /etc/resolv.conf %d times", n)
	}
	for _, fight := range []string{"another writer", "stops fighting", "backed off"} {
		notContains(t, "nodedns run log", log, fight)
	}
	if _, err := os.Stat(l.Path("/var/lib/nodedns/writers.json")); !os.IsNotExist(err) {
		t.Errorf("writers.json after 20 s of reloads and reapplies: %v", err)
	}
	if got := string(l.ResolvConf(t)); got != nmFixedResolv {
		t.Errorf("NM's resolv.conf after the reloads:\n%s", got)
	}

	renewed := nstest.NMDefaultDHCP()
	renewed.DNS = []string{"10.66.0.54"}
	renewed.Options = []string{"option:T1,2", "option:T2,3"}
	l.ChangeOffer(t, renewed)
	l.WaitDHCP(t, "the renewed offer in NM's device state", func(st string) bool { return strings.Contains(st, "dhcp4.domain_name_servers=10.66.0.54") })
	seen := time.Now()
	want := strings.Replace(nmFixedResolv, "10.66.0.53", "10.66.0.54", 1)
	l.WaitResolvConf(t, "NM's resolv.conf with the renewed server", func(s string) bool { return s == want })
	resolvFollowed := time.Since(seen)
	nstest.WaitFor(t, 30*time.Second, "the kubelet file with the renewed server", func() bool {
		data, _ := os.ReadFile(l.Path("/var/lib/nodedns/resolv.conf"))
		return strings.Contains(string(data), "nameserver 10.66.0.54\n") && !strings.Contains(string(data), "10.66.0.53")
	})
	kubeletFollowed := time.Since(seen)
	t.Logf("from NM's new lease (device state file) to NM's resolv.conf: %v, to the kubelet file: %v", resolvFollowed.Round(time.Millisecond), kubeletFollowed.Round(time.Millisecond))
	if resolvFollowed > 10*time.Second || kubeletFollowed > 10*time.Second {
		t.Errorf("the renewal took %v and %v to reach NM's resolv.conf and the kubelet file, want seconds", resolvFollowed, kubeletFollowed)
	}

	l.Restart(t)
	l.WaitDHCP(t, "a lease after the restart", func(st string) bool { return strings.Contains(st, "dhcp4.domain_name_servers=10.66.0.54") })
	time.Sleep(time.Second)
	if got := string(l.ResolvConf(t)); got != want {
		t.Errorf("NM's resolv.conf after a restart:\n%s", got)
	}
	n, loops := s.stop()
	t.Logf("%d samples every 50 ms of NM's resolv.conf and the kubelet file", n)
	if n < 200 || len(loops) > 0 {
		t.Errorf("%d samples, %d with a loop address: %q", n, len(loops), loops)
	}
	if code := d.stop(t); code != 0 {
		t.Errorf("nodedns run exited %d after SIGTERM", code)
	}
	log = d.log.String()
	reloads := strings.Count(log, "msg=\"action done\" kind=reload-networkmanager")
	t.Logf("nodedns run: %d passes, %d NetworkManager reloads, %d writes in all", strings.Count(log, "msg=reconciled"), reloads, strings.Count(log, "msg=wrote "))
	// The first fix and the renewal; a pass that reloads NM when nothing changed would show here.
	if reloads > 3 {
		t.Errorf("%d NetworkManager reloads, want the first fix and the renewal's", reloads)
	}
}

// TestNetworkManagerRunDHCPOnly: no global DNS, only DHCP's example.org reaches NM's resolv.conf.
// `nodedns run` keeps it out with zz-nodedns.conf, also across NetworkManager restarts: no sample
// every 50 ms shows example.org once it is gone, and the override is never removed. (Had a pass run
// before NM reported its devices again, the device state files stand for them: TestNMObserve.)
func TestNetworkManagerRunDHCPOnly(t *testing.T) { nstest.Suites(t, testNetworkManagerRunDHCPOnly) }

func testNetworkManagerRunDHCPOnly(t *testing.T, suite nstest.Suite) {
	l := startNMLive(t, suite, nil)
	orig := "# Generated by NetworkManager\nsearch example.org\nnameserver 10.66.0.53\n"
	if got := string(l.ResolvConf(t)); got != orig {
		t.Fatalf("NM's resolv.conf before:\n%s", got)
	}
	d := l.startRun(t)
	fixed := "# Generated by NetworkManager\nnameserver 10.66.0.53\n"
	l.WaitResolvConf(t, "no DHCP search domain", func(s string) bool { return s == fixed })
	stop := make(chan struct{})
	var bad []string
	var n int
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			n++
			if data, err := os.ReadFile(l.Path("/etc/resolv.conf")); err == nil && strings.Contains(string(data), "example.org") {
				bad = append(bad, string(data))
			}
		}
	}()
	for i := 0; i < 2; i++ {
		l.Restart(t)
		l.WaitDHCP(t, "a lease after the restart", func(st string) bool { return strings.Contains(st, "dhcp4.domain_search=example.org") })
		time.Sleep(time.Second)
	}
	close(stop)
	<-done
	t.Logf("%d samples across 2 restarts", n)
	if len(bad) > 0 {
		t.Errorf("%d samples with example.org: %q", len(bad), bad)
	}
	notContains(t, "nodedns run log", d.log.String(), "msg=removed path=/etc/NetworkManager/conf.d/zz-nodedns.conf")
	if code := d.stop(t); code != 0 {
		t.Errorf("nodedns run exited %d", code)
	}
}

// nmRun is `nodedns run` inside the NetworkManager node.
type nmRun struct {
	l    *nmLive
	log  *syncBuf
	pidf string
	done chan int
}

func (l *nmLive) startRun(t *testing.T) *nmRun {
	t.Helper()
	d := &nmRun{l: l, log: &syncBuf{}, pidf: filepath.Join(l.Node.Dir(), "nodedns.pid"), done: make(chan int, 1)}
	// The PID as the node numbers it, so the test can signal nodedns itself (not nsenter).
	script := fmt.Sprintf("echo $$ > %s; exec env PATH=%s %s --config %s --log-level debug run", d.pidf, l.path, l.bin, l.cfg)
	cmd := l.Node.Cmd(context.Background(), "sh", "-c", script)
	cmd.Stdout, cmd.Stderr = d.log, d.log
	must(t, cmd.Start())
	go func() {
		err := cmd.Wait()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		d.done <- code
	}()
	t.Cleanup(func() {
		select {
		case c := <-d.done:
			d.done <- c
		default:
			_ = cmd.Process.Kill()
			<-d.done
		}
		if t.Failed() {
			t.Logf("nodedns run log:\n%s", d.log.String())
		}
	})
	nstest.WaitFor(t, 30*time.Second, "nodedns run ready", func() bool { return strings.Contains(d.log.String(), "daemon ready") })
	return d
}

func (d *nmRun) stop(t *testing.T) int {
	t.Helper()
	d.l.Node.Run(t, "kill -TERM $(cat "+d.pidf+")")
	select {
	case c := <-d.done:
		d.done <- c
		return c
	case <-time.After(30 * time.Second):
		t.Fatal("nodedns run did not exit after SIGTERM")
	}
	return -1
}

// sampler reads NM's resolv.conf and the kubelet file at a fixed interval and keeps every sample
// that lists a loop address.
type sampler struct {
	stopc chan struct{}
	wg    sync.WaitGroup
	n     int
	loops []string
}

func (l *nmLive) sample(t *testing.T, every time.Duration) *sampler {
	s := &sampler{stopc: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-s.stopc:
				return
			case <-tick.C:
			}
			for _, p := range []string{"/etc/resolv.conf", "/var/lib/nodedns/resolv.conf"} {
				data, err := os.ReadFile(l.Path(p))
				if err == nil && strings.Contains(string(data), nmLoop) {
					s.loops = append(s.loops, time.Now().Format("15:04:05.000")+" "+p+": "+string(data))
				}
			}
			s.n++
		}
	}()
	t.Cleanup(func() {
		select {
		case <-s.stopc:
		default:
			close(s.stopc)
		}
		s.wg.Wait()
	})
	return s
}

func (s *sampler) stop() (int, []string) {
	close(s.stopc)
	s.wg.Wait()
	return s.n, s.loops
}

// dialNMBus is a D-Bus client of the node's NetworkManager for the test (through the relay NM
// accepts as a caller).
func dialNMBus(t *testing.T, nm *nstest.NetworkManager) *nmbus.Client {
	t.Helper()
	c, err := nmbus.Dial(context.Background(), nmbus.Options{Address: nm.ClientBusAddress(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestNetworkManagerTreeIsReal measures the NetworkManager files of testdata/kubespray/
// networkmanager again on the real NetworkManager 1.42.4 with the tree's conf.d: its resolv.conf
// byte for byte, and its device state file but for what differs per run (hardware address,
// client id, expiry, address).
func TestNetworkManagerTreeIsReal(t *testing.T) { nstest.Suites(t, testNetworkManagerTreeIsReal) }

func testNetworkManagerTreeIsReal(t *testing.T, suite nstest.Suite) {
	offer := nstest.DHCPOptions{Range: "10.66.0.100,10.66.0.150,255.255.255.0,1h", Router: "10.66.0.1", DNS: []string{"10.66.0.53"}, Domain: "example.org"}
	nm := nstest.StartNetworkManager(t, nstest.NMOptions{Suite: suite, DHCP: offer, Hostname: "node1", ConfD: map[string]string{
		"dns.conf":    nmKubesprayFile(t, "etc/NetworkManager/conf.d/dns.conf"),
		"k8s.conf":    nmKubesprayFile(t, "etc/NetworkManager/conf.d/k8s.conf"),
		"calico.conf": nmKubesprayFile(t, "etc/NetworkManager/conf.d/calico.conf"),
	}})
	if got, want := string(nm.ResolvConf(t)), nmKubesprayFile(t, "etc/resolv.conf"); got != want {
		t.Errorf("NM's resolv.conf:\n%s\nthe tree's:\n%s", got, want)
	}
	intern, err := os.ReadFile(nm.Path(networkmanager.InternConfPath))
	must(t, err)
	if got, want := string(intern), nmKubesprayFile(t, "var/lib/NetworkManager/NetworkManager-intern.conf"); got != want {
		t.Errorf("NM's intern file:\n%s\nthe tree's:\n%s", got, want)
	}
	perRun := func(line string) string {
		for _, k := range []string{"perm-hw-addr-fake=", "dhcp4.dhcp_client_identifier=", "dhcp4.expiry=", "dhcp4.ip_address=10.66.0."} {
			if strings.HasPrefix(line, k) {
				return k
			}
		}
		return line
	}
	norm := func(s string) []string {
		var out []string
		for _, l := range strings.Split(s, "\n") {
			out = append(out, perRun(l))
		}
		return out
	}
	if diff := cmp.Diff(norm(nmKubesprayFile(t, "run/NetworkManager/devices/2")), norm(nm.DeviceState(t))); diff != "" {
		t.Errorf("NM's device state file (-tree +real, per-run values masked):\n%s", diff)
	}
}
