// Command nodedns keeps a Kubernetes node's DNS configuration safe around NodeLocal DNSCache.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
)

func main() {
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

func run(args []string) int {
	cmd := newRootCmd(os.Stdout, os.Stderr)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(os.Stderr, "nodedns:", ee.err)
		}
		return ee.code
	}
	fmt.Fprintln(os.Stderr, "nodedns:", err)
	return 1
}
