package nstest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStartIsTheProgram: the command Start returns is the program itself, in the sandbox's PID
// namespace: killing it and waiting for it leaves it gone. StartPID's program is reaped without a
// Wait.
func TestStartIsTheProgram(t *testing.T) {
	sb := New(t)
	cmd := sb.Start(t, "sleep", "300")
	pid := cmd.Process.Pid
	// nsenter, joining the namespaces, then execs the program in place.
	WaitFor(t, 10*time.Second, "Start's process to be the program", func() bool { return procComm(pid) == "sleep" })
	requireInSandbox(t, sb, pid)
	_, pid2 := sb.StartPID(t, "sleep", "301")
	WaitFor(t, 10*time.Second, "StartPID's program to run", func() bool { return procComm(pid2) == "sleep" })
	// StartPID reaps its program: once killed, it leaves no zombie behind.
	_ = syscall.Kill(pid2, syscall.SIGTERM)
	WaitFor(t, 10*time.Second, "StartPID's program to be reaped", func() bool {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", pid2))
		return err != nil
	})
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
		t.Errorf("process %d still there after Kill and Wait", pid)
	}
}

// TestCmdStandsInForTheProgram: the command Cmd returns is the enter helper; the program is its
// child in the sandbox's PID namespace, gets the signals sent to the command, ends the command as it
// ended itself, and dies when the command is killed.
func TestCmdStandsInForTheProgram(t *testing.T) {
	sb := New(t)
	ctx := context.Background()

	cmd := sb.Cmd(ctx, "sh", "-c", "trap 'exit 7' TERM; echo ready; while :; do sleep 0.05; done")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("the program said %q, %v", line, err)
	}
	prog, err := ChildPID(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	requireInSandbox(t, sb, prog)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); exitCode(err) != 7 {
		t.Errorf("after SIGTERM to the command: %v, want the program's trap's exit 7", err)
	}

	if err := sb.Cmd(ctx, "sh", "-c", "exit 3").Run(); exitCode(err) != 3 {
		t.Errorf("exit 3 in the sandbox: %v", err)
	}
	err = sb.Cmd(ctx, "sh", "-c", "kill -TERM $$").Run()
	if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || !ee.Sys().(syscall.WaitStatus).Signaled() || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Errorf("a program killed by SIGTERM: the command ended %v, want killed by SIGTERM", err)
	}

	killed := sb.Cmd(ctx, "sleep", "300")
	if err := killed.Start(); err != nil {
		t.Fatal(err)
	}
	var sleeper int
	WaitFor(t, 10*time.Second, "the program under the enter helper", func() bool {
		sleeper, err = ChildPID(killed.Process.Pid)
		return err == nil && procComm(sleeper) == "sleep"
	})
	_ = killed.Process.Kill()
	_ = killed.Wait()
	WaitFor(t, 10*time.Second, "the program of a killed command to die", func() bool { return procComm(sleeper) != "sleep" })
}

func requireInSandbox(t *testing.T, sb *Sandbox, pid int) {
	t.Helper()
	want, err := nsInode(fmt.Sprint(sb.PID), "pid")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := nsInode(fmt.Sprint(pid), "pid"); err != nil || got != want {
		t.Errorf("process %d is in PID namespace %d (%v), want the sandbox's %d", pid, got, err, want)
	}
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err == nil {
		return 0
	}
	return -1
}

// procComm is a process's name, "" once it is gone (a zombie still has one: it is not reaped).
func procComm(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// pid (comm) state ...
	s := string(data)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open || end+2 >= len(s) || s[end+2] == 'Z' {
		return ""
	}
	return s[open+1 : end]
}
