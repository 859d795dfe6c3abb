// Command enter runs a program as a process of an nstest sandbox's PID namespace for a caller
// outside it, and stands in for the program towards that caller (Sandbox.Cmd runs it):
//
//	enter PIDNS_PATH PROGRAM [ARGS...]
//
// It joins the PID namespace at PIDNS_PATH (/proc/INIT/ns/pid) for its children only (setns(2)
// with CLONE_NEWPID: a process never changes its own PID namespace), and starts PROGRAM there under
// `setpriv --pdeathsig KILL`. So the program
//   - dies with the sandbox: the kernel kills every process of a PID namespace when its init dies,
//     and the init dies with the test that made the sandbox;
//   - dies with enter: a caller that kills enter (exec.CommandContext, cmd.Process.Kill) kills the
//     program (setpriv's parent-death signal: enter's main thread, locked, never exits first);
//   - gets every signal a caller sends enter but SIGKILL and SIGSTOP (SIGTERM, SIGINT, SIGHUP,
//     SIGQUIT, SIGUSR1, SIGUSR2 …), and enter exits as the program did: its exit code, or killed
//     by its signal.
//
// nsenter --pid does the first but forks and neither passes signals on nor dies with its caller;
// Go's SysProcAttr.Pdeathsig cannot be used here, since the child (in another PID namespace) sees
// no parent and kills itself (syscall.forkAndExecInChild1 compares getppid with the parent's PID).
package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// forwarded are the signals passed on to the program: every one a caller may send to stop, reload
// or dump it. SIGKILL and SIGSTOP cannot be caught: SIGKILL ends the program through its
// parent-death signal.
var forwarded = []os.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGUSR1,
	syscall.SIGUSR2, syscall.SIGALRM, syscall.SIGCONT, syscall.SIGWINCH, syscall.SIGTSTP}

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: enter PIDNS_PATH PROGRAM [ARGS...]")
		os.Exit(125)
	}
	// The child is forked from this thread: setns changes this thread's namespace for children,
	// and the child's parent-death signal fires when this thread exits. It never does before the
	// process: main keeps it locked to the end.
	runtime.LockOSThread()
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwarded...) // before the start: a signal sent meanwhile is passed on too
	if err := joinPIDNamespace(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "enter:", err)
		os.Exit(125)
	}
	cmd := exec.Command("setpriv", append([]string{"--pdeathsig", "KILL", "--"}, os.Args[2:]...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "enter:", err)
		os.Exit(125)
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				_ = cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	_ = cmd.Wait()
	close(done)
	exitAs(cmd.ProcessState)
}

func joinPIDNamespace(path string) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open the sandbox's PID namespace: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Setns(fd, unix.CLONE_NEWPID); err != nil {
		return fmt.Errorf("join the sandbox's PID namespace %s: %w", path, err)
	}
	return nil
}

// exitAs ends enter as the program ended: with its exit code, or killed by its signal.
func exitAs(st *os.ProcessState) {
	ws, ok := st.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		os.Exit(st.ExitCode())
	}
	switch sig := ws.Signal(); sig {
	case syscall.SIGKILL, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE:
		// With its handler reset, the Go runtime ends the process by these signals themselves
		// (runtime.dieFromSignal); SIGKILL needs no handler.
		signal.Reset(sig)
		_ = syscall.Kill(os.Getpid(), sig)
		time.Sleep(time.Second)
		os.Exit(128 + int(sig))
	default:
		// The runtime handles the others its own way (SIGQUIT: a dump of enter's goroutines):
		// 128+signal, as a shell reports a death by signal.
		os.Exit(128 + int(sig))
	}
}
