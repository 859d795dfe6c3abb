package main

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/testutil/nstest"
	"github.com/nodedns/nodedns/internal/testutil/tied"
)

// These tests run the real binary as `nodedns --root DIR run`: real inotify, real signals, real
// writes. No namespace is needed, so they run everywhere.

const (
	runGood = "nameserver 10.0.0.2\n"
	runBad  = "# a foreign template\nnameserver 169.254.25.10\nnameserver 10.0.0.2\n"
	// runDeadline is generous: figures belong to `make bench`, these tests prove behaviour.
	runDeadline = 15 * time.Second
)

// syncBuf is a goroutine-safe buffer for a child's stderr.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type daemonProc struct {
	cmd  *exec.Cmd
	log  *syncBuf
	done chan error
}

// startRun starts `nodedns --root root run` and waits until it has applied once.
func startRun(t *testing.T, root string, extra ...string) *daemonProc {
	t.Helper()
	bin := nstest.Build(t)
	args := append([]string{"--root", root, "--log-level", "debug"}, extra...)
	cmd := exec.Command(bin, append(args, "run")...)
	lb := &syncBuf{}
	cmd.Stderr, cmd.Stdout = lb, lb
	if err := tied.Start(cmd); err != nil {
		t.Fatal(err)
	}
	p := &daemonProc{cmd: cmd, log: lb, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("nodedns run log:\n%s", lb.String())
		}
	})
	waitUntil(t, "the daemon ready", func() bool { return strings.Contains(lb.String(), "daemon ready") })
	return p
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(runDeadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out after %v waiting for %s", runDeadline, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (p *daemonProc) stop(t *testing.T, sig syscall.Signal) int {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		p.done <- err // for Cleanup
		if err == nil {
			return 0
		}
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		t.Fatalf("wait: %v", err)
	case <-time.After(runDeadline):
		t.Fatalf("nodedns run did not exit within %v of %v", runDeadline, sig)
	}
	return -1
}

func putFile(t *testing.T, root, p, data string) {
	t.Helper()
	full := filepath.Join(root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := full + ".writer"
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, full); err != nil {
		t.Fatal(err)
	}
}

func getFile(root, p string) string {
	b, _ := os.ReadFile(filepath.Join(root, p))
	return string(b)
}

func tempFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".nodedns-") && strings.HasSuffix(d.Name(), ".tmp") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// TestRunSIGTERMMidRun stops the daemon while a writer keeps it busy: it must exit 0 and leave no
// temp file, whatever it was doing.
func TestRunSIGTERMMidRun(t *testing.T) {
	for i := range 5 {
		root := t.TempDir()
		putFile(t, root, "/etc/resolv.conf", runBad)
		putFile(t, root, "/etc/nodedns/config.yaml", "writers:\n  backoffAfter: 1000\n")
		p := startRun(t, root)
		stopWriter := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stopWriter:
					return
				default:
				}
				putFile(t, root, "/etc/resolv.conf", runBad)
				putFile(t, root, "/var/lib/dhcp/dhclient.eth0.leases", "lease {\n  interface \"eth0\";\n  option domain-name-servers 10.0.0.9;\n}\n")
				time.Sleep(time.Duration(n%3) * time.Millisecond)
			}
		}()
		// A different moment in the daemon's work each round.
		time.Sleep(time.Duration(50+i*37) * time.Millisecond)
		code := p.stop(t, syscall.SIGTERM)
		close(stopWriter)
		wg.Wait()
		if code != 0 {
			t.Fatalf("round %d: exit code %d after SIGTERM, want 0", i, code)
		}
		if tmp := tempFiles(t, root); len(tmp) > 0 {
			t.Fatalf("round %d: temp files left: %v", i, tmp)
		}
		if !strings.Contains(p.log.String(), "daemon stopped") {
			t.Fatalf("round %d: no shutdown log line", i)
		}
	}
}

// TestRunBacksOffFromAWriterAndCheckSaysSo: a writer rewrites /etc/resolv.conf 50 times in 5 s. The
// daemon stops fighting (logged, and `nodedns check` reports it on resolvconf.loop), then converges
// once the writer has stopped for one window. The window is 2 s here (default 60 s) to keep the test
// short; backoffAfter is the default 10.
func TestRunBacksOffFromAWriterAndCheckSaysSo(t *testing.T) {
	root := t.TempDir()
	putFile(t, root, "/etc/resolv.conf", runGood)
	putFile(t, root, "/etc/nodedns/config.yaml", "writers:\n  window: 2s\n")
	// node_exporter's textfile collector directory: the daemon reports its passes and backoffs there.
	if err := os.MkdirAll(filepath.Join(root, "/var/lib/node_exporter/textfile_collector"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := startRun(t, root)

	checked := false
	for i := range 50 {
		putFile(t, root, "/etc/resolv.conf", runBad)
		time.Sleep(100 * time.Millisecond)
		if i == 30 {
			// Mid-storm: the daemon has backed off, and check says so.
			waitUntil(t, "the backoff log line", func() bool { return strings.Contains(p.log.String(), "nodedns stops fighting over it") })
			r := nodedns(t, "--root", root, "check", "-o", "json")
			if r.code != 1 || !strings.Contains(r.stdout, "another writer rewrote /etc/resolv.conf") {
				t.Errorf("check during the storm: exit %d, output:\n%s", r.code, r.stdout)
			}
			checked = true
		}
	}
	if !checked {
		t.Fatal("never checked")
	}
	if n := strings.Count(p.log.String(), "nodedns stops fighting over it"); n != 1 {
		t.Errorf("%d backoff lines, want 1 (one per distinct content)", n)
	}
	prom := getFile(root, "/var/lib/node_exporter/textfile_collector/nodedns.prom")
	for _, want := range []string{`nodedns_writer_backoffs_total{target="/etc/resolv.conf"} 1`, "nodedns_reconciles_total{", "nodedns_changes_applied_total"} {
		if !strings.Contains(prom, want) {
			t.Errorf("daemon metrics textfile lacks %q:\n%s", want, prom)
		}
	}
	waitUntil(t, "convergence after the writer stopped", func() bool {
		return !strings.Contains(getFile(root, "/etc/resolv.conf"), "169.254.25.10") &&
			strings.Contains(p.log.String(), "other writer settled")
	})
	waitUntil(t, "the writers state cleared", func() bool {
		_, err := os.Stat(filepath.Join(root, "/var/lib/nodedns/writers.json"))
		return os.IsNotExist(err)
	})
	if r := nodedns(t, "--root", root, "check"); strings.Contains(r.stdout, "another writer") {
		t.Errorf("check after convergence still reports the backoff:\n%s", r.stdout)
	}
	if code := p.stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("exit %d", code)
	}
}

// TestRunSIGHUPReloadsConfig: an invalid config is reported and the old one kept; a valid one is
// applied.
func TestRunSIGHUPReloadsConfig(t *testing.T) {
	root := t.TempDir()
	putFile(t, root, "/etc/resolv.conf", runGood)
	p := startRun(t, root)

	putFile(t, root, "/etc/nodedns/config.yaml", "upstreams: [10.0.0.300]\n")
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the failed reload logged", func() bool { return strings.Contains(p.log.String(), "config reload failed") })
	if !strings.Contains(p.log.String(), "10.0.0.300") {
		t.Errorf("the reload error does not name the bad value")
	}

	putFile(t, root, "/etc/nodedns/config.yaml", "upstreams: [10.9.9.9]\n")
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the new upstream in the kubelet file", func() bool {
		return strings.Contains(getFile(root, "/var/lib/nodedns/resolv.conf"), "nameserver 10.9.9.9")
	})
	if code := p.stop(t, syscall.SIGINT); code != 0 {
		t.Errorf("exit %d after SIGINT", code)
	}
}

func TestRunHelp(t *testing.T) {
	r := nodedns(t, "run", "--help")
	for _, want := range []string{"Examples:", "nodedns --root /tmp/node-copy run", "SIGHUP", "writers.backoffAfter", "daemon.resyncInterval"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("run --help lacks %q:\n%s", want, r.stdout)
		}
	}
}

// TestRunSIGTERMWhileLocked: SIGTERM is honoured promptly whatever a pass waits on. Here the pass
// waits for nodedns's state lock, which another process (this test) holds: the daemon must stop
// well before the pass's lock wait (5 s) runs out.
func TestRunSIGTERMWhileLocked(t *testing.T) {
	root := t.TempDir()
	putFile(t, root, "/etc/resolv.conf", runBad)
	p := startRun(t, root)

	// The daemon's first pass made the lock file; take it as another apply or restore would.
	f, err := os.OpenFile(filepath.Join(root, "var/lib/nodedns/backup/.lock"), os.O_RDWR|syscall.O_NOFOLLOW, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN)

	// Another writer's content starts a pass, which now waits for the lock.
	before := strings.Count(p.log.String(), "file changed")
	putFile(t, root, "/etc/resolv.conf", runBad)
	waitUntil(t, "the daemon to see the change", func() bool { return strings.Count(p.log.String(), "file changed") > before })
	time.Sleep(300 * time.Millisecond) // well inside the pass's wait for the lock

	start := time.Now()
	code := p.stop(t, syscall.SIGTERM)
	took := time.Since(start)
	t.Logf("nodedns run exited %v after SIGTERM while another process held the state lock", took.Round(time.Millisecond))
	if code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
	if took > 2*time.Second {
		t.Errorf("nodedns run took %v to stop after SIGTERM while the state lock was held elsewhere, want under 1 s (the pass waits up to 5 s for the lock)", took)
	}
	if strings.Contains(p.log.String(), "pass postponed") {
		t.Errorf("a SIGTERM during the lock wait was logged as a postponed pass:\n%s", p.log.String())
	}
}
