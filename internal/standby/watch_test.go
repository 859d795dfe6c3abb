package standby

import (
	"os/exec"
	"testing"
	"time"
)

// TestWatchExitWakesOnTheFirstExit: the pidfd watch stays asleep while the processes run and wakes
// when one of them exits; Close ends a watch that never fired.
func TestWatchExitWakesOnTheFirstExit(t *testing.T) {
	var cmds []*exec.Cmd
	for range 2 {
		c := exec.Command("sleep", "30")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
		cmds = append(cmds, c)
	}
	w, err := watchExit(cmds[0].Process.Pid, cmds[1].Process.Pid)
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

	w2, err := watchExit(cmds[0].Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	w2.Close()
	w2.Close() // twice is harmless
	if _, err := watchExit(99999999); err == nil {
		t.Error("a watch of no live process succeeded")
	}
}
