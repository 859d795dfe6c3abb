package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/internal/testutil/nstest"
	"github.com/nodedns/nodedns/internal/testutil/tied"
)

// The crash and race tests run the real binary under --root, as many times as it takes to hit every
// point of a change: no namespace is needed, so they run everywhere. Their figures are printed.

// crashShape is a node shape of the crash and race tests.
type crashShape struct {
	name string
	seed string // under testdata/seeds
}

var crashShapes = []crashShape{
	{"file mode with dhclient", "002"},
	{"resolved symlink with netplan", "001"},
}

const (
	crashApplyKills = 200 // in all, half on each shape
	crashRunKills   = 100 // in all, half on each shape
	raceRuns        = 200 // in all, shapes alternating
)

// nodeState describes every file (bytes, mode, owner), symlink and directory under root except
// nodedns's state directory (checked apart), by node path: what "old or new bytes" compares.
func nodeState(t *testing.T, root string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		if rel == "var/lib/nodedns" {
			return filepath.SkipDir
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		own := fmt.Sprintf("%d:%d %s", st.Uid, st.Gid, fi.Mode())
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			m["/"+rel] = "symlink " + target + " " + own
		case fi.IsDir():
			m["/"+rel] = "dir " + own
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(data)
			m["/"+rel] = hex.EncodeToString(sum[:8]) + " " + own
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// leftovers lists what a killed nodedns may leave anywhere under root: its temp files, and anything
// in its work directory.
func leftovers(root string) []string {
	var out []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case nodefs.IsTemp(d.Name()), strings.HasPrefix(rel, "var/lib/nodedns/tmp/"):
			out = append(out, "/"+rel)
			if d.IsDir() {
				return filepath.SkipDir
			}
		}
		return nil
	})
	return out
}

// copySeed copies a seed's tree into a new directory under base.
func copySeed(t *testing.T, base, seed string) string {
	t.Helper()
	dst, err := os.MkdirTemp(base, "node-")
	if err != nil {
		t.Fatal(err)
	}
	copyDir(t, filepath.Join("testdata/seeds", seed), dst)
	return dst
}

// binRun runs the binary to the end with TMPDIR set, returning its exit code and output.
func binRun(bin, tmp string, args ...string) (int, string) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		return -1, err.Error()
	}
	return 0, string(out)
}

// crashSeed is the random seed of the kill points: NODEDNS_CRASH_SEED replays a run.
func crashSeed(t *testing.T) uint64 {
	if s := os.Getenv("NODEDNS_CRASH_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("NODEDNS_CRASH_SEED=%q: %v", s, err)
		}
		return n
	}
	return uint64(time.Now().UnixNano())
}

// failures collects the first few failures of parallel iterations (one line each is enough to
// replay a run with its seed).
type failures struct {
	mu   sync.Mutex
	n    int
	logs []string
}

func (f *failures) add(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	if len(f.logs) < 5 {
		f.logs = append(f.logs, fmt.Sprintf(format, args...))
	}
}

func (f *failures) report(t *testing.T, hint string) {
	t.Helper()
	for _, l := range f.logs {
		t.Error(l)
	}
	if f.n > 0 {
		t.Errorf("%d failure(s)%s", f.n, hint)
	}
}

// parallel runs n iterations on two workers (the CI machine has two cores).
func parallel(n int, iter func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				iter(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}

// crashCounts are a shape's figures.
type crashCounts struct {
	mu                           sync.Mutex
	killed, finished, leftBehind int
	changedWhenKilled            int
}

// TestCrashAnywhere kills `nodedns apply` and `nodedns run` with SIGKILL at random points on two node
// shapes. After every kill each file is its old or its new bytes; the next apply exits 0, reaches
// the same node as an uninterrupted apply and leaves no temp file anywhere under the root or in the
// system temp directory; restore then gives back the original tree byte for byte.
func TestCrashAnywhere(t *testing.T) {
	bin := nstest.Build(t)
	seed := crashSeed(t)
	for _, sh := range crashShapes {
		t.Run(sh.seed, func(t *testing.T) {
			if _, err := exec.LookPath("netplan"); err != nil && sh.seed == "001" {
				t.Skip("netplan is not installed (apt-get install --no-install-recommends netplan.io)")
			}
			base := t.TempDir()
			// What an uninterrupted apply does: the "new" of old-or-new, and how long it takes.
			root := copySeed(t, base, sh.seed)
			orig := nodeState(t, root)
			tmp := t.TempDir()
			start := time.Now()
			code, out := binRun(bin, tmp, "--log-level", "info", "--root", root, "apply")
			if code != 0 {
				t.Fatalf("apply: exit %d\n%s", code, out)
			}
			applyTook := time.Since(start)
			applyWrites := firstWrite(out, start, applyTook)
			want := nodeState(t, root)
			if cmp.Equal(orig, want) {
				t.Fatal("apply changed nothing: the test would prove nothing")
			}
			start = time.Now()
			d, log := startDaemon(t, bin, copySeed(t, base, sh.seed), tmp)
			runTook := time.Since(start)
			runWrites := firstWrite(log, start, runTook)
			d.stop()

			for _, mode := range []struct {
				cmd          string
				kills        int
				span, writes time.Duration
			}{
				{"apply", crashApplyKills / len(crashShapes), applyTook * 11 / 10, applyWrites},
				{"run", crashRunKills / len(crashShapes), runTook * 12 / 10, runWrites},
			} {
				var fails failures
				var c crashCounts
				rng := rand.New(rand.NewPCG(seed, uint64(len(mode.cmd))+uint64(sh.seed[2])))
				// Half the kills anywhere, half from just before the first write to the end: a netplan
				// node spends most of an apply in `netplan generate`, and writes in its last few ms.
				delays := make([]time.Duration, mode.kills)
				from := max(mode.writes-5*time.Millisecond, 0)
				for i := range delays {
					if i%2 == 0 || from >= mode.span {
						delays[i] = time.Duration(rng.Int64N(int64(mode.span)))
					} else {
						delays[i] = from + time.Duration(rng.Int64N(int64(mode.span-from)))
					}
				}
				began := time.Now()
				parallel(mode.kills, func(i int) {
					crashOnce(t, bin, base, sh.seed, mode.cmd, delays[i], orig, want, &c, &fails, i)
				})
				t.Logf("%s, %s: %d SIGKILLs at random points of the first %v, half after %v (its first write) (%d landed while it ran, %d after it had finished; %d left changed files, %d left temp files), every file old or new bytes, the next apply exit 0 to the same node with no leftover, restore byte-exact; took %v",
					sh.name, mode.cmd, mode.kills, mode.span.Round(time.Millisecond), mode.writes.Round(time.Millisecond), c.killed, c.finished, c.changedWhenKilled, c.leftBehind, time.Since(began).Round(100*time.Millisecond))
				fails.report(t, fmt.Sprintf("; replay with NODEDNS_CRASH_SEED=%d", seed))
			}
		})
	}
}

func crashOnce(t *testing.T, bin, base, seed, command string, delay time.Duration, orig, want map[string]string, c *crashCounts, fails *failures, i int) {
	root := copySeed(t, base, seed)
	defer os.RemoveAll(root)
	tmp, err := os.MkdirTemp(base, "tmp-")
	if err != nil {
		t.Error(err)
		return
	}
	defer os.RemoveAll(tmp)
	args := []string{"--root", root, command}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := tied.Start(cmd); err != nil {
		t.Error(err)
		return
	}
	time.Sleep(delay)
	killed := cmd.Process.Signal(syscall.SIGKILL) == nil
	err = cmd.Wait()
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	killed = killed && ws.Signaled()
	if !killed && command == "apply" && err != nil {
		fails.add("%s #%d: apply ran to its end but failed: %v\n%s", command, i, err, out.String())
		return
	}

	// Every file is its old or its new bytes; nothing else appeared but temp files.
	now := nodeState(t, root)
	changed := false
	for p, st := range now {
		if nodefs.IsTemp(filepath.Base(p)) {
			continue
		}
		o, n := orig[p], want[p]
		if st != o && st != n {
			fails.add("%s #%d killed after %v: %s is neither old nor new: %q (old %q, new %q)", command, i, delay, p, st, o, n)
		}
		changed = changed || st != o
	}
	for p := range orig {
		if _, ok := now[p]; !ok && want[p] != "" {
			fails.add("%s #%d killed after %v: %s is gone (old %q, new %q)", command, i, delay, p, orig[p], want[p])
		}
	}
	left := len(leftovers(root)) > 0

	code, aout := binRun(bin, tmp, "--root", root, "apply")
	if code != 0 {
		fails.add("%s #%d killed after %v: the next apply exit %d:\n%s", command, i, delay, code, aout)
		return
	}
	if diff := cmp.Diff(want, nodeState(t, root)); diff != "" {
		fails.add("%s #%d killed after %v: the next apply reached another node (-uninterrupted +now):\n%s", command, i, delay, diff)
	}
	if l := leftovers(root); len(l) > 0 {
		fails.add("%s #%d killed after %v: leftovers after the next apply: %q\napply said:\n%s", command, i, delay, l, aout)
	}
	if es, _ := os.ReadDir(tmp); len(es) > 0 {
		fails.add("%s #%d killed after %v: %d entries left in the system temp dir, e.g. %s", command, i, delay, len(es), es[0].Name())
	}
	if code, rout := binRun(bin, tmp, "--root", root, "restore"); code != 0 {
		fails.add("%s #%d killed after %v: restore exit %d:\n%s", command, i, delay, code, rout)
	} else if diff := cmp.Diff(orig, nodeState(t, root)); diff != "" {
		fails.add("%s #%d killed after %v: restore is not byte-exact (-orig +now):\n%s\nrestore said:\n%s", command, i, delay, diff, rout)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if killed {
		c.killed++
	} else {
		c.finished++
	}
	if left {
		c.leftBehind++
	}
	if changed {
		c.changedWhenKilled++
	}
}

// firstWrite is when, after start, a run's log says it wrote its first file; took when it says none.
func firstWrite(log string, start time.Time, took time.Duration) time.Duration {
	m := regexp.MustCompile(`time=(\S+) level=INFO msg=wrote`).FindStringSubmatch(log)
	if m == nil {
		return took
	}
	at, err := time.Parse(time.RFC3339Nano, m[1])
	if err != nil {
		return took
	}
	return min(max(at.Sub(start), 0), took)
}

type daemon struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// startDaemon starts `nodedns run` and returns once it is ready, with its log so far.
func startDaemon(t *testing.T, bin, root, tmp string) (*daemon, string) {
	t.Helper()
	cmd := exec.Command(bin, "--root", root, "run")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	lb := &syncBuf{}
	cmd.Stdout, cmd.Stderr = lb, lb
	if err := tied.Start(cmd); err != nil {
		t.Fatal(err)
	}
	d := &daemon{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(d.done) }()
	deadline := time.Now().Add(runDeadline)
	for !strings.Contains(lb.String(), "daemon ready") {
		select {
		case <-d.done:
			t.Fatalf("nodedns run exited before it was ready:\n%s", lb.String())
		default:
		}
		if time.Now().After(deadline) {
			d.stop()
			t.Fatalf("nodedns run not ready within %v:\n%s", runDeadline, lb.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
	return d, lb.String()
}

func (d *daemon) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	<-d.done
}

// TestApplyRestoreRace starts apply and restore together, then restores: the original comes back
// every time, whichever of the two took the state lock first.
func TestApplyRestoreRace(t *testing.T) {
	bin := nstest.Build(t)
	base := t.TempDir()
	type shapeRoot struct {
		shape crashShape
		roots [2]string // one per worker
		orig  map[string]string
	}
	var shapes []*shapeRoot
	for _, sh := range crashShapes {
		if _, err := exec.LookPath("netplan"); err != nil && sh.seed == "001" {
			t.Logf("shape %s skipped: netplan is not installed", sh.name)
			continue
		}
		s := &shapeRoot{shape: sh}
		for w := range s.roots {
			s.roots[w] = copySeed(t, base, sh.seed)
		}
		s.orig = nodeState(t, s.roots[0])
		shapes = append(shapes, s)
	}
	var fails failures
	var mu sync.Mutex
	restoredFirst, restoredAfter, lost := 0, 0, 0
	workers := make(chan int, 2)
	workers <- 0
	workers <- 1
	began := time.Now()
	parallel(raceRuns, func(i int) {
		w := <-workers
		defer func() { workers <- w }()
		s := shapes[i%len(shapes)]
		root := s.roots[w]
		tmp, err := os.MkdirTemp(base, "tmp-")
		if err != nil {
			t.Error(err)
			return
		}
		defer os.RemoveAll(tmp)
		var wg sync.WaitGroup
		var applyCode, restoreCode int
		var applyOut, restoreOut string
		wg.Add(2)
		go func() { defer wg.Done(); applyCode, applyOut = binRun(bin, tmp, "--root", root, "apply") }()
		go func() { defer wg.Done(); restoreCode, restoreOut = binRun(bin, tmp, "--root", root, "restore") }()
		wg.Wait()
		if applyCode != 0 || restoreCode != 0 {
			fails.add("run %d (%s): apply exit %d, restore exit %d:\n%s\n%s", i, s.shape.name, applyCode, restoreCode, applyOut, restoreOut)
		}
		code, out := binRun(bin, tmp, "--root", root, "restore")
		if code != 0 {
			fails.add("run %d (%s): the final restore exit %d:\n%s", i, s.shape.name, code, out)
		}
		diff := cmp.Diff(s.orig, nodeState(t, root))
		if diff != "" {
			fails.add("run %d (%s): the original did not come back (-orig +now):\n%s\napply said:\n%s\nrestore said:\n%s\nthe final restore said:\n%s", i, s.shape.name, diff, applyOut, restoreOut, out)
			// The next run on this worker starts from the original again.
			os.RemoveAll(root)
			s.roots[w] = copySeed(t, base, s.shape.seed)
		}
		mu.Lock()
		if diff != "" {
			lost++
		}
		if strings.Contains(restoreOut, "nothing to restore") {
			restoredFirst++
		} else {
			restoredAfter++
		}
		mu.Unlock()
	})
	t.Logf("%d runs of apply and restore started together on %d shape(s): restore took the lock first %d times, after apply %d times; then restore: the original lost %d times; took %v",
		raceRuns, len(shapes), restoredFirst, restoredAfter, lost, time.Since(began).Round(100*time.Millisecond))
	fails.report(t, "")
}
