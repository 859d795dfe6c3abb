// Command nodedns keeps a Kubernetes node's DNS configuration safe around NodeLocal DNSCache.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// A reader that leaves early (`nodedns apply | head -1`) is no failure of nodedns: without this,
	// the Go runtime dies of SIGPIPE (exit 141) at the next write to stdout, though the work is done.
	// With SIGPIPE notified, the write fails with EPIPE instead, and pipeSafe drops the output. A
	// notified (not ignored) signal is reset at exec, so the commands nodedns runs are unaffected.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	os.Exit(run(os.Args[1:]))
}

// exitError carries an exit code through cobra without printing anything more.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

// pipeSafe is stdout or stderr whose reader may have gone: a write that fails with EPIPE is
// dropped, not an error, so the command's exit code says what it did to the node.
type pipeSafe struct{ w io.Writer }

func (p pipeSafe) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	if errors.Is(err, syscall.EPIPE) {
		return len(b), nil
	}
	return n, err
}

func run(args []string) int {
	stdout, stderr := pipeSafe{os.Stdout}, pipeSafe{os.Stderr}
	cmd := newRootCmd(stdout, stderr)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(stderr, "nodedns:", ee.err)
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "nodedns:", err)
	return 1
}
