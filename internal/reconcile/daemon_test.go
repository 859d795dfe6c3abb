package reconcile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/node"
)

// These tests drive the daemon under a --root directory, as `nodedns run --root` does: real inotify
// on real directories, real atomic writes; nothing is mocked but the sd_notify socket (a recorder)
// and the live D-Bus event source (a channel), which need systemd and a bus.

const (
	goodResolv = "nameserver 10.0.0.2\n"
	badResolv  = "# written by another tool\nnameserver 169.254.25.10\nnameserver 10.0.0.2\n"
	// deadline is generous on purpose: the figures belong to the benchmarks, the tests prove behaviour.
	deadline = 10 * time.Second
)

func writeFile(t testing.TB, root, p, data string) {
	t.Helper()
	full := filepath.Join(root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// replaceFile writes atomically, as most writers (and resolvconf, netplan, kubespray's template) do.
func replaceFile(t testing.TB, root, p, data string) {
	t.Helper()
	full := filepath.Join(root, p)
	tmp := filepath.Join(filepath.Dir(full), ".writer-tmp")
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, full); err != nil {
		t.Fatal(err)
	}
}

func readFile(root, p string) string {
	data, _ := os.ReadFile(filepath.Join(root, p))
	return string(data)
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out after %v waiting for %s", deadline, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// notes records sd_notify states.
type notes struct {
	mu sync.Mutex
	s  []string
}

func (n *notes) notify(state string) error {
	n.mu.Lock()
	n.s = append(n.s, state)
	n.mu.Unlock()
	return nil
}

func (n *notes) all() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.s...)
}

func (n *notes) count(prefix string) int {
	c := 0
	for _, s := range n.all() {
		if strings.HasPrefix(s, prefix) {
			c++
		}
	}
	return c
}

// logBuf is a goroutine-safe log sink, so tests can assert decision lines.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type running struct {
	d    *Daemon
	root string
	log  *logBuf
	note *notes
	stop func() error
}

// startDaemon runs a daemon on root until the test ends (or stop is called) and waits for its first
// pass.
func startDaemon(t *testing.T, root string, cfg config.Config, mod func(d *Daemon)) *running {
	t.Helper()
	lb := &logBuf{}
	nt := &notes{}
	d := &Daemon{
		Node:   &Node{Root: root, Config: cfg, Log: slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug}))},
		Notify: nt.notify,
	}
	if mod != nil {
		mod(d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- d.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-errc:
			case <-time.After(deadline):
				runErr = errors.New("daemon did not stop")
			}
		})
		return runErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
		if t.Failed() {
			t.Logf("daemon log:\n%s", lb.String())
		}
	})
	waitFor(t, "READY=1", func() bool { return nt.count("READY=1") == 1 })
	return &running{d: d, root: root, log: lb, note: nt, stop: stop}
}

func baseRoot(t *testing.T) string {
	root := t.TempDir()
	writeFile(t, root, "/etc/resolv.conf", goodResolv)
	return root
}

func TestDaemonAppliesAtStartAndUndoesAForeignWrite(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(t testing.TB, root, p, data string)
	}{
		{"atomic rename", replaceFile},
		{"truncate and write in place", writeFile},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			writeFile(t, root, "/etc/resolv.conf", badResolv)
			r := startDaemon(t, root, config.Default(), nil)
			if got := readFile(root, "/etc/resolv.conf"); strings.Contains(got, "169.254.25.10") {
				t.Fatalf("start pass left the loop address:\n%s", got)
			}
			if got := readFile(root, config.DefaultKubeletResolvConf); !strings.Contains(got, "nameserver 10.0.0.2") {
				t.Fatalf("kubelet resolv.conf after start:\n%s", got)
			}
			passes := r.d.Status().Passes
			tc.write(t, root, "/etc/resolv.conf", badResolv)
			waitFor(t, "the foreign write undone", func() bool {
				got := readFile(root, "/etc/resolv.conf")
				return strings.Contains(got, "nameserver 10.0.0.2") && !strings.Contains(got, "169.254.25.10") && r.d.Status().Passes > passes
			})
			// Our own write came back as an event and cost no pass of its own.
			waitFor(t, "nodedns's own write recognised", func() bool { return r.d.Status().Own > 0 })
		})
	}
}

func TestDaemonIgnoresUnrelatedFiles(t *testing.T) {
	root := baseRoot(t)
	if err := os.MkdirAll(filepath.Join(root, "var/lib/dhcp"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := startDaemon(t, root, config.Default(), nil)
	before := r.d.Status()
	for i := range 200 {
		writeFile(t, root, fmt.Sprintf("/etc/unrelated-%d.conf", i), "x\n")
		// Temp files next to a target, and a target's name in a directory that is not the target's.
		writeFile(t, root, fmt.Sprintf("/etc/.resolv.conf.tmp%d", i), "nameserver 169.254.25.10\n")
	}
	writeFile(t, root, "/var/lib/dhcp/notalease.txt", "lease {")
	waitFor(t, "the events to arrive", func() bool { return r.d.Status().Ignored >= 401 })
	if after := r.d.Status(); after.Passes != before.Passes {
		t.Errorf("unrelated files caused %d passes", after.Passes-before.Passes)
	}
}

func TestDaemonWaitsForIncompleteContentOnly(t *testing.T) {
	root := baseRoot(t)
	r := startDaemon(t, root, config.Default(), func(d *Daemon) { d.Settle = 3 * time.Second })
	before := r.d.Status().Passes

	// dhclient-script: rm, then write. Missing and empty are incomplete: no pass yet.
	if err := os.Remove(filepath.Join(root, "/etc/resolv.conf")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, root, "/etc/resolv.conf", "")
	waitFor(t, "the incomplete events", func() bool { return strings.Contains(r.log.String(), "state=empty") })
	if p := r.d.Status().Passes; p != before {
		t.Fatalf("a missing or empty resolv.conf caused %d passes before settling", p-before)
	}
	// Half-written (no final newline) is incomplete too.
	writeFile(t, root, "/etc/resolv.conf", "nameserver 169.254.")
	waitFor(t, "the half-written event", func() bool { return strings.Contains(r.log.String(), "half-written") })
	if p := r.d.Status().Passes; p != before {
		t.Fatalf("a half-written resolv.conf caused a pass before settling")
	}
	// Complete content is acted on at once, long before the 3 s settle time.
	start := time.Now()
	writeFile(t, root, "/etc/resolv.conf", badResolv)
	waitFor(t, "the complete content fixed", func() bool {
		got := readFile(root, "/etc/resolv.conf")
		return strings.Contains(got, "10.0.0.2") && !strings.Contains(got, "169.254.25.10") && r.d.Status().Passes > before
	})
	if took := time.Since(start); took >= 3*time.Second {
		t.Errorf("complete content waited %v: it must not wait for the settle time", took)
	}

	// A file that stays missing is reconciled once it settles.
	before = r.d.Status().Passes
	if err := os.Remove(filepath.Join(root, "/etc/resolv.conf")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a pass after the missing file settled", func() bool { return r.d.Status().Passes > before })
	if st := r.d.Status(); st.Trigger != "settled" {
		t.Errorf("trigger = %q, want settled", st.Trigger)
	}
}

func TestDaemonCoalescesABurst(t *testing.T) {
	root := baseRoot(t)
	r := startDaemon(t, root, config.Default(), nil)
	if err := os.MkdirAll(filepath.Join(root, "var/lib/dhcp"), 0o755); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new lease directory watched", func() bool {
		return slices.Contains(r.d.Status().Watched, filepath.Join(root, "var/lib/dhcp"))
	})
	before := r.d.Status().Passes
	// 100 lease renewals written back to back: far fewer passes than events.
	for i := range 100 {
		replaceFile(t, root, "/var/lib/dhcp/dhclient.eth0.leases", fmt.Sprintf(`lease {
  interface "eth0";
  fixed-address 192.0.2.%d;
  option domain-name-servers 10.0.0.2;
  option domain-search "example.org.";
}
`, i+1))
	}
	waitFor(t, "the last lease seen", func() bool {
		return strings.Contains(r.log.String(), "dhclient.eth0.leases")
	})
	waitFor(t, "the burst handled", func() bool {
		s := r.d.Status()
		return s.Passes > before && time.Since(s.Last) > 300*time.Millisecond
	})
	if n := r.d.Status().Passes - before; n >= 100 {
		t.Errorf("100 writes caused %d passes: bursts are not coalesced", n)
	} else {
		t.Logf("100 lease writes -> %d passes", n)
	}
}

func TestDaemonFollowsALeaseRenewal(t *testing.T) {
	root := t.TempDir()
	exp := time.Now().Add(24 * time.Hour).UTC().Format("2006/01/02 15:04:05")
	lease := func(dns string) string {
		return `lease {
  interface "eth0";
  fixed-address 192.0.2.10;
  option subnet-mask 255.255.255.0;
  option routers 192.0.2.1;
  option domain-name-servers ` + dns + `;
  option domain-search "example.org.";
  option domain-name "example.org";
  expire 1 ` + exp + `;
}
`
	}
	writeFile(t, root, "/var/lib/dhcp/dhclient.eth0.leases", lease("10.0.0.2"))
	writeFile(t, root, "/etc/resolv.conf", "search example.org corp.internal\nnameserver 10.0.0.2\n")
	startDaemon(t, root, config.Default(), nil)
	got := readFile(root, "/etc/resolv.conf")
	if strings.Contains(got, "example.org") || !strings.Contains(got, "corp.internal") {
		t.Fatalf("start pass: want example.org stripped and corp.internal kept:\n%s", got)
	}
	replaceFile(t, root, "/var/lib/dhcp/dhclient.eth0.leases", lease("10.0.0.9"))
	waitFor(t, "the kubelet file to follow the renewal", func() bool {
		return strings.Contains(readFile(root, config.DefaultKubeletResolvConf), "nameserver 10.0.0.9")
	})
	if k := readFile(root, config.DefaultKubeletResolvConf); strings.Contains(k, "10.0.0.2") || strings.Contains(k, "example.org") {
		t.Errorf("kubelet file keeps the old server or the DHCP domain:\n%s", k)
	}
}

func TestDaemonBacksOffFromAnotherWriterAndResumes(t *testing.T) {
	root := baseRoot(t)
	cfg := config.Default()
	cfg.Writers.BackoffAfter, cfg.Writers.Window = 5, 1500*time.Millisecond
	r := startDaemon(t, root, cfg, nil)

	// 50 rewrites in 5 s, like a misconfigured template loop.
	for range 50 {
		replaceFile(t, root, "/etc/resolv.conf", badResolv)
		time.Sleep(100 * time.Millisecond)
		if len(r.d.Status().Backoffs) > 0 {
			break
		}
	}
	waitFor(t, "the backoff", func() bool { return len(r.d.Status().Backoffs) > 0 })
	st := r.d.Status()
	if st.Backoffs[0].Path != "/etc/resolv.conf" || st.Backoffs[0].Rewrites <= 5 {
		t.Errorf("backoffs = %+v", st.Backoffs)
	}
	if !strings.Contains(st.Line(), "not fighting over /etc/resolv.conf") {
		t.Errorf("STATUS line does not say so: %q", st.Line())
	}
	state, err := node.ParseWritersState("writers.json", []byte(readFile(root, node.WritersStatePath)))
	if err != nil || len(state.Backoffs) != 1 || state.PID != os.Getpid() {
		t.Fatalf("writers state = %+v, %v", state, err)
	}
	// While backed off the writer keeps writing the same content: one warning for it, not one per write.
	mark := len(r.log.String())
	for range 10 {
		replaceFile(t, root, "/etc/resolv.conf", badResolv)
		time.Sleep(50 * time.Millisecond)
	}
	// Nor an info line per event: no "re-applying" (nothing is), no pass that did nothing.
	during := r.log.String()[mark:]
	if n := strings.Count(during, "re-applying"); n != 0 {
		t.Errorf("%d 're-applying' lines while backed off, want 0:\n%s", n, during)
	}
	if n := strings.Count(during, "level=INFO msg=reconciled"); n != 0 {
		t.Errorf("%d info lines for passes that changed nothing while backed off, want 0:\n%s", n, during)
	}
	if got := readFile(root, "/etc/resolv.conf"); got != badResolv {
		t.Errorf("nodedns kept fighting while backed off:\n%s", got)
	}
	if n := strings.Count(r.log.String(), "stops fighting"); n != 1 {
		t.Errorf("%d 'stops fighting' lines, want 1", n)
	}
	if n := strings.Count(r.log.String(), "content left as it is"); n != 0 {
		t.Errorf("the same foreign content was logged again %d times", n)
	}
	// A distinct foreign content is logged once.
	other := "nameserver 169.254.25.10\nnameserver 10.0.0.3\n"
	replaceFile(t, root, "/etc/resolv.conf", other)
	waitFor(t, "the new content logged", func() bool { return strings.Count(r.log.String(), "content left as it is") == 1 })

	// The writer stops: one quiet window later nodedns converges and clears the state.
	waitFor(t, "convergence after the writer stopped", func() bool {
		got := readFile(root, "/etc/resolv.conf")
		return !strings.Contains(got, "169.254.25.10") && len(r.d.Status().Backoffs) == 0
	})
	if _, err := os.Stat(filepath.Join(root, node.WritersStatePath)); !os.IsNotExist(err) {
		t.Errorf("writers state still there after resuming: %v", err)
	}
	if !strings.Contains(r.log.String(), "other writer settled") {
		t.Errorf("no log line for resuming")
	}
}

func TestDaemonAcceptsAGoodForeignContent(t *testing.T) {
	root := baseRoot(t)
	cfg := config.Default()
	cfg.Writers.BackoffAfter = 2
	r := startDaemon(t, root, cfg, nil)
	// A DHCP renewal through dhclient-script: a new, loop-free server. It is input, not a fight.
	for i := range 10 {
		replaceFile(t, root, "/etc/resolv.conf", fmt.Sprintf("nameserver 10.0.1.%d\n", i+1))
		waitFor(t, "the kubelet file to follow", func() bool {
			return strings.Contains(readFile(root, config.DefaultKubeletResolvConf), fmt.Sprintf("nameserver 10.0.1.%d\n", i+1))
		})
	}
	if bo := r.d.Status().Backoffs; len(bo) != 0 {
		t.Errorf("good foreign content counted as a fight: %+v", bo)
	}
	if got := readFile(root, "/etc/resolv.conf"); got != "nameserver 10.0.1.10\n" {
		t.Errorf("a good foreign resolv.conf was rewritten:\n%s", got)
	}
}

func TestDaemonWatchesDirectoriesThatAppearLater(t *testing.T) {
	root := t.TempDir()
	// /etc/resolv.conf points at resolved's stub, whose directory does not exist yet (resolved not
	// started); kubespray's drop-in arrives later.
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/run/systemd/resolve/stub-resolv.conf", filepath.Join(root, "etc/resolv.conf")); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Upstreams = nil
	r := startDaemon(t, root, cfg, nil)
	before := r.d.Status().Passes
	writeFile(t, root, "/run/systemd/resolve/resolv.conf", "nameserver 10.0.0.7\n")
	writeFile(t, root, "/run/systemd/resolve/stub-resolv.conf", "nameserver 127.0.0.53\n")
	waitFor(t, "the kubelet file from resolved's uplinks", func() bool {
		return strings.Contains(readFile(root, config.DefaultKubeletResolvConf), "nameserver 10.0.0.7")
	})
	writeFile(t, root, "/etc/systemd/resolved.conf.d/kubespray.conf", "[Resolve]\nDNS=169.254.25.10\n")
	waitFor(t, "nodedns's drop-in", func() bool {
		return strings.Contains(readFile(root, "/etc/systemd/resolved.conf.d/zz-nodedns.conf"), "DNS=")
	})
	if r.d.Status().Passes <= before {
		t.Error("no pass")
	}
	// The pass that wrote the drop-in re-aims the watches and reports them after its writes: wait
	// for its report rather than racing it.
	waitFor(t, "run/systemd/resolve watched after it appeared", func() bool {
		return slices.Contains(r.d.Status().Watched, filepath.Join(root, "run/systemd/resolve"))
	})
}

// chanSource is a live event source (what the resolved D-Bus client provides).
type chanSource chan string

func (c chanSource) Events() <-chan string { return c }

func TestDaemonReactsToLiveEvents(t *testing.T) {
	root := baseRoot(t)
	src := make(chanSource)
	r := startDaemon(t, root, config.Default(), func(d *Daemon) { d.Events = []EventSource{src} })
	before := r.d.Status().Passes
	src <- "resolved: NameOwnerChanged (restarted)"
	waitFor(t, "a pass for the live event", func() bool { return r.d.Status().Passes > before })
	if tr := r.d.Status().Trigger; !strings.Contains(tr, "NameOwnerChanged") {
		t.Errorf("trigger = %q", tr)
	}
	close(src) // a source that stops does not stop the daemon
	replaceFile(t, root, "/etc/resolv.conf", badResolv)
	waitFor(t, "still working", func() bool { return !strings.Contains(readFile(root, "/etc/resolv.conf"), "169.254.25.10") })
}

func TestDaemonReload(t *testing.T) {
	root := baseRoot(t)
	next := make(chan func() (config.Config, error), 1)
	reloads := make(chan struct{})
	r := startDaemon(t, root, config.Default(), func(d *Daemon) {
		d.Reloads = reloads
		d.Reload = func() (config.Config, error) { return (<-next)() }
	})

	next <- func() (config.Config, error) { return config.Config{}, errors.New("config key upstreams: bad") }
	reloads <- struct{}{}
	waitFor(t, "the failed reload reported", func() bool { return r.d.Status().ConfigError != "" })
	if !strings.Contains(r.d.Status().Line(), "config reload failed, old config kept") {
		t.Errorf("STATUS line: %q", r.d.Status().Line())
	}
	if k := readFile(root, config.DefaultKubeletResolvConf); !strings.Contains(k, "10.0.0.2") {
		t.Errorf("old config not kept:\n%s", k)
	}

	next <- func() (config.Config, error) {
		c := config.Default()
		c.Upstreams = parseAddrs("10.9.9.9")
		return c, nil
	}
	reloads <- struct{}{}
	waitFor(t, "the new config applied", func() bool {
		return strings.Contains(readFile(root, config.DefaultKubeletResolvConf), "nameserver 10.9.9.9")
	})
	if e := r.d.Status().ConfigError; e != "" {
		t.Errorf("ConfigError after a good reload: %q", e)
	}
}

func TestDaemonNotifiesAndPingsTheWatchdog(t *testing.T) {
	root := baseRoot(t)
	r := startDaemon(t, root, config.Default(), func(d *Daemon) { d.Watchdog = 20 * time.Millisecond })
	waitFor(t, "watchdog pings", func() bool { return r.note.count("WATCHDOG=1") >= 3 })
	all := r.note.all()
	ready := slices.Index(all, "READY=1")
	if !strings.HasPrefix(all[0], "STATUS=ok: pass 1 (start) wrote 1") || ready < 1 || slices.Index(all, "WATCHDOG=1") < ready {
		t.Errorf("notify sequence: want STATUS of the start pass, then READY=1, then WATCHDOG=1; got %q", all[:min(len(all), 5)])
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if last := r.note.all(); last[len(last)-1] != "STOPPING=1" {
		t.Errorf("last notify %q, want STOPPING=1", last[len(last)-1])
	}
}

func TestDaemonResyncsWithoutEvents(t *testing.T) {
	root := baseRoot(t)
	r := startDaemon(t, root, config.Default(), func(d *Daemon) { d.Resync = 100 * time.Millisecond })
	waitFor(t, "resync passes", func() bool { return r.d.Status().Passes >= 3 })
	if tr := r.d.Status().Trigger; tr != "resync" {
		t.Errorf("trigger = %q", tr)
	}
}

// TestDaemonLeavesNoGoroutines counts goroutines before a daemon starts and after it stops.
func TestDaemonLeavesNoGoroutines(t *testing.T) {
	root := baseRoot(t)
	before := runtime.NumGoroutine()
	srcs := []EventSource{make(chanSource), make(chanSource)}
	r := startDaemon(t, root, config.Default(), func(d *Daemon) {
		d.Events = srcs
		d.Watchdog = 10 * time.Millisecond
		d.Resync = 50 * time.Millisecond
	})
	replaceFile(t, root, "/etc/resolv.conf", badResolv)
	waitFor(t, "the fix", func() bool { return !strings.Contains(readFile(root, "/etc/resolv.conf"), "169.254.25.10") })
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	end := time.Now().Add(deadline)
	for runtime.NumGoroutine() > before && time.Now().Before(end) {
		time.Sleep(10 * time.Millisecond)
	}
	if after := runtime.NumGoroutine(); after > before {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines before, %d after the daemon stopped:\n%s", before, after, buf[:runtime.Stack(buf, true)])
	}
}

func parseAddrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

// TestDaemonLetsALineByLineWriterFinish: dhclient-script's make_resolv_conf removes resolv.conf and
// writes it line by line from a shell. After its first line the file already parses; replacing it
// then would send the script's remaining lines to the unlinked inode and lose the new server.
func TestDaemonLetsALineByLineWriterFinish(t *testing.T) {
	root := t.TempDir()
	// The lease's server differs from the script's line only so that a lost line shows.
	writeFile(t, root, "/var/lib/dhcp/dhclient.eth0.leases", "lease {\n  interface \"eth0\";\n  option domain-name-servers 10.0.0.8;\n  option domain-search \"example.org.\";\n}\n")
	writeFile(t, root, "/etc/resolv.conf", "nameserver 10.0.0.2\n")
	r := startDaemon(t, root, config.Default(), nil)
	before := r.d.Status().Passes
	full := filepath.Join(root, "etc/resolv.conf")
	if err := os.Remove(full); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(full)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"search example.org.\n", "nameserver 10.0.0.9\n"} {
		if _, err := f.WriteString(line); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the DHCP domain stripped", func() bool {
		return !strings.Contains(readFile(root, "/etc/resolv.conf"), "example.org") && r.d.Status().Passes > before
	})
	if got := readFile(root, "/etc/resolv.conf"); !strings.Contains(got, "nameserver 10.0.0.9") {
		t.Errorf("the writer's second line was lost:\n%s", got)
	}
}

// TestDaemonRereadsOnlyWhatChanged: a foreign write of /etc/resolv.conf re-reads the sources built
// on it, not the rest of the node (netplan, leases, the unit), and is still undone; a write to
// another watched file re-reads that file's source; a live event, which names no file, reads
// everything.
func TestDaemonRereadsOnlyWhatChanged(t *testing.T) {
	root := baseRoot(t)
	writeFile(t, root, "/etc/netplan/50-cloud-init.yaml", "network:\n  version: 2\n  ethernets:\n    eth0:\n      dhcp4: true\n")
	live := make(chanSource)
	r := startDaemon(t, root, config.Default(), func(d *Daemon) { d.Events = []EventSource{live} })
	lastRead := func() string {
		lines := strings.Split(r.log.String(), "\n")
		for i := len(lines) - 1; i >= 0; i-- {
			if strings.Contains(lines[i], "msg=read ") {
				return lines[i]
			}
		}
		return ""
	}
	if l := lastRead(); !strings.Contains(l, "full=true") {
		t.Fatalf("the start pass did not read in full: %q", l)
	}

	// The first pass after start also re-reads what the start passes wrote (their own events came
	// in after): the second foreign write is the one measured.
	var passes int
	for range 2 {
		passes = r.d.Status().Passes
		replaceFile(t, root, "/etc/resolv.conf", badResolv)
		waitFor(t, "the foreign write undone", func() bool {
			return !strings.Contains(readFile(root, "/etc/resolv.conf"), "169.254.25.10") && r.d.Status().Passes > passes
		})
	}
	l := lastRead()
	if !strings.Contains(l, "full=false") || !strings.Contains(l, `sources="resolv.conf`) || strings.Contains(l, "netplan") || strings.Contains(l, "leases") {
		t.Errorf("a write of /etc/resolv.conf: %q, want an incremental read of the resolv.conf sources only", l)
	}

	passes = r.d.Status().Passes
	replaceFile(t, root, "/etc/netplan/50-cloud-init.yaml", "network:\n  version: 2\n  ethernets:\n    eth0:\n      dhcp4: true\n      dhcp6: true\n")
	waitFor(t, "a pass for the netplan change", func() bool { return r.d.Status().Passes > passes })
	if l := lastRead(); !strings.Contains(l, "full=false") || !strings.Contains(l, "netplan") {
		t.Errorf("a write of a netplan file: %q, want an incremental read of netplan", l)
	}

	passes = r.d.Status().Passes
	live <- "resolved: PropertiesChanged"
	waitFor(t, "a pass for the live event", func() bool { return r.d.Status().Passes > passes })
	if l := lastRead(); !strings.Contains(l, "full=true") {
		t.Errorf("a live event: %q, want a full read", l)
	}
}
