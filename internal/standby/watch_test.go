package standby

import (
	"io"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/testutil/tied"
)

// TestWatchExitWakesOnTheFirstExit: the pidfd watch stays asleep while the processes run and wakes
// when one of them exits; Close ends a watch that never fired.
func TestWatchExitWakesOnTheFirstExit(t *testing.T) {
	var cmds []*exec.Cmd
	for range 2 {
		c := exec.Command("sleep", "30")
		if err := tied.Start(c); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
		cmds = append(cmds, c)
	}
	w, err := watchExit(nil, nil, cmds[0].Process.Pid, cmds[1].Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	select {
	case <-w.Exited:
		t.Fatal("the watch fired while both processes run")
	case <-time.After(200 * time.Millisecond):
	}
	killed := time.Now()
	_ = cmds[1].Process.Kill()
	_ = cmds[1].Wait()
	select {
	case <-w.Exited:
		t.Logf("exit seen %v after the kill", time.Since(killed))
	case <-time.After(2 * time.Second):
		t.Fatal("the watch did not see the exit")
	}

	w2, err := watchExit(nil, nil, cmds[0].Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	w2.Close()
	w2.Close() // twice is harmless
	if _, err := watchExit(nil, nil, 99999999); err == nil {
		t.Error("a watch of no live process succeeded")
	}
}

// TestHelperProcess is not a test: the child of TestWatchExitEarly (a Go program, so several
// threads, holding a few megabytes), which waits to be killed.
func TestHelperProcess(t *testing.T) {
	if os.Getenv("NODEDNS_STANDBY_HELPER") != "1" {
		t.Skip("the child of TestWatchExitEarly")
	}
	mem := make([]byte, 64<<20)
	for i := range mem {
		mem[i] = byte(i)
	}
	os.Stdout.WriteString("ready\n")
	time.Sleep(time.Minute)
	_ = mem[len(mem)-1]
}

// TestWatchExitEarly: a SIGKILLed Go process loses a thread before the process is gone (its memory
// is freed between the two), and the watch says so first, then the exit, also when it watches
// another process first (the threads of every process are watched: where the kernel hides which
// process holds the cache's sockets, each that may); a watch closed before either takes nothing
// away.
func TestWatchExitEarly(t *testing.T) {
	other := exec.Command("sleep", "30")
	if err := tied.Start(other); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })
	for i := range 6 {
		c := exec.Command(os.Args[0], "-test.run", "^TestHelperProcess$")
		c.Env = append(os.Environ(), "NODEDNS_STANDBY_HELPER=1")
		out, err := c.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := tied.Start(c); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 6)
		if _, err := io.ReadFull(out, b); err != nil {
			t.Fatal(err)
		}
		var thread, exit atomic.Int64
		pids := []int{c.Process.Pid}
		if i%2 == 1 {
			pids = []int{other.Process.Pid, c.Process.Pid}
		}
		w, err := watchExit(func() { exit.Store(time.Now().UnixNano()) }, func() { thread.Store(time.Now().UnixNano()) }, pids...)
		if err != nil {
			t.Fatal(err)
		}
		if len(w.threadfds) == 0 {
			_ = c.Process.Kill()
			_ = c.Wait()
			w.Close()
			t.Skip("no thread pidfd: the kernel has no PIDFD_THREAD (Linux 6.9+), and the standby binds at the process's exit")
		}
		if len(w.threadfds) < 1+len(pids) {
			t.Fatalf("watching %d threads of %d processes, one a Go program, want several", len(w.threadfds), len(pids))
		}
		killed := time.Now()
		_ = c.Process.Kill()
		<-w.Exited
		_ = c.Wait()
		w.Close()
		if thread.Load() == 0 || thread.Load() > exit.Load() {
			t.Errorf("a thread's exit told at %d, the process's at %d: want the thread's first", thread.Load(), exit.Load())
		}
		t.Logf("after SIGKILL (watching %d processes): a thread gone %v, the process %v", len(pids), time.Duration(thread.Load()-killed.UnixNano()), time.Duration(exit.Load()-killed.UnixNano()))
	}
}
