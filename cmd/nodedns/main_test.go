package main

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// rusageWrapperEnv makes the test binary a wrapper that runs its arguments and prints the child's
// peak RSS. A process forked straight from a large test binary (with -race it holds a few hundred
// MB) reports that binary's peak as its own, because Linux carries ru_maxrss across fork and exec;
// a child of this small, freshly exec'ed wrapper reports only its own.
const rusageWrapperEnv = "NODEDNS_TEST_RUSAGE_WRAPPER"

func TestMain(m *testing.M) {
	if os.Getenv(rusageWrapperEnv) == "1" {
		os.Exit(rusageWrapper(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// rusageWrapper runs argv with the wrapper's stdout and stderr, then prints
// "maxrss-kib N" on stderr and exits with the child's code.
func rusageWrapper(argv []string) int {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.Env = os.Environ()
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		fmt.Fprintln(os.Stderr, "wrapper:", err)
		return 125
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		fmt.Fprintln(os.Stderr, "wrapper:", err)
		return 125
	}
	fmt.Fprintf(os.Stderr, "maxrss-kib %d\n", ru.Maxrss)
	return code
}
