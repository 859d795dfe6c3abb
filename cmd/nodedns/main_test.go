package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// rusageWrapperEnv makes the test binary a wrapper that runs its arguments and prints the child's
// peak RSS. A process forked straight from a large test binary (with -race it holds a few hundred
// MB) reports that binary's peak as its own, because Linux carries ru_maxrss across fork and exec;
// a child of this small, freshly exec'ed wrapper reports only its own.
const rusageWrapperEnv = "NODEDNS_TEST_RUSAGE_WRAPPER"

// mainEnv makes the test binary run nodedns's main with its arguments (the real process: signals,
// exit code, stdio).
const mainEnv = "NODEDNS_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(rusageWrapperEnv) == "1" {
		os.Exit(rusageWrapper(os.Args[1:]))
	}
	if os.Getenv(mainEnv) == "1" {
		main()
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

// TestApplyIntoClosedPipe: `nodedns apply | head -1`: the reader is gone before nodedns writes its
// first line. apply still does its work and exits 0, not 141 (killed by SIGPIPE).
func TestApplyIntoClosedPipe(t *testing.T) {
	root := copyTree(t, "testdata/kubespray/networkmanager")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close() // the reader left: every write to w fails with EPIPE
	defer w.Close()
	for _, args := range [][]string{{"--root", root, "apply"}, {"--root", root, "plan"}, {"--root", root, "check"}} {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), mainEnv+"=1")
		cmd.Stdout = w
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				t.Fatalf("%v into a closed pipe: killed by %v\n%s", args, ws.Signal(), stderr.String())
			}
		} else if err != nil {
			t.Fatal(err)
		}
		// check exits 1 on this node (its problems); apply and plan 0.
		if want := map[string]int{"apply": 0, "plan": 0, "check": 1}[args[2]]; code != want {
			t.Errorf("%v into a closed pipe: exit %d, want %d\n%s", args, code, want, stderr.String())
		}
	}
	if _, err := os.Stat(filepath.Join(root, "etc/NetworkManager/conf.d/zz-nodedns.conf")); err != nil {
		t.Errorf("apply did not do its work: %v", err)
	}
}
