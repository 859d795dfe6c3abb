// Package noopenat2 is test-only: it hides openat2(2) from a test process with a seccomp filter, as
// Linux before 5.6 does (ENOSYS) or a container's seccomp profile (ENOSYS, or EPERM in older
// Docker profiles). nodefs's confined opens fall back from openat2 to a component walk when the
// kernel answers so; their tests take the walk that way, by the kernel's answer, with no switch in
// the code under test.
//
// A seccomp filter cannot be taken off again, so the process that hides openat2 is a child of the
// test binary: Run starts it for one test, and this package's init installs the filter in it (the
// environment variable Env says so) before any test runs. A benchmark binary can be started with
// Env set by hand (make bench does, for nodefs's walk figures).
package noopenat2

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/sys/unix"

	"github.com/nodedns/nodedns/internal/testutil/tied"
)

// Env names the environment variable that makes a test process hide openat2: "ENOSYS" or "EPERM",
// the errno the call then fails with.
const Env = "NODEDNS_TEST_HIDE_OPENAT2"

var errnos = map[string]syscall.Errno{"ENOSYS": unix.ENOSYS, "EPERM": unix.EPERM}

// hidden is the errno openat2 fails with in this process, 0 when it is not hidden.
var hidden syscall.Errno

func init() {
	v := os.Getenv(Env)
	if v == "" {
		return
	}
	errno, ok := errnos[v]
	if !ok {
		panic(fmt.Sprintf("%s=%q: want ENOSYS or EPERM", Env, v))
	}
	// TSYNC puts the filter on every thread of the process, the runtime's too; no_new_privs is what
	// an unprivileged process needs to install one (seccomp(2)).
	err := seccomp.LoadFilter(seccomp.Filter{
		NoNewPrivs: true,
		Flag:       seccomp.FilterFlagTSync,
		Policy: seccomp.Policy{
			DefaultAction: seccomp.ActionAllow,
			Syscalls:      []seccomp.SyscallGroup{{Names: []string{"openat2"}, Action: seccomp.ActionErrno | seccomp.Action(errno)}},
		},
	})
	if err != nil {
		panic(fmt.Sprintf("%s=%s: hide openat2: %v", Env, v, err))
	}
	hidden = errno
}

// Hidden returns the errno openat2 fails with in this process, 0 when it is not hidden.
func Hidden() syscall.Errno { return hidden }

// Available reports whether openat2 answers in this process: Linux 5.6 or later, not hidden.
func Available() bool {
	fd, err := unix.Openat2(unix.AT_FDCWD, "/", &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC})
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// Run runs the test t is (a subtest too) in a child process of the test binary in which openat2
// fails with errno, unless this is that child: then it returns true, and the caller runs the test's
// body here. In the parent it waits for the child, logs its output, fails t when the child failed
// or did not run the test, and returns false.
func Run(t *testing.T, errno syscall.Errno) bool {
	t.Helper()
	if hidden != 0 {
		if hidden != errno {
			t.Fatalf("openat2 is hidden behind %v here, the test wants %v", hidden, errno)
		}
		return true
	}
	name := ""
	for v, e := range errnos {
		if e == errno {
			name = v
		}
	}
	if name == "" {
		t.Fatalf("cannot hide openat2 behind %v: only ENOSYS or EPERM", errno)
	}
	parts := strings.Split(t.Name(), "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	cmd := exec.Command(os.Args[0], "-test.run="+strings.Join(parts, "/"), "-test.count=1", "-test.v=true")
	cmd.Env = append(os.Environ(), Env+"="+name)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := tied.Start(cmd); err != nil {
		t.Fatalf("start the test again with openat2 hidden: %v", err)
	}
	err := cmd.Wait()
	t.Logf("with openat2 hidden behind %s (%s=%s):\n%s", name, Env, name, out.String())
	if err != nil {
		t.Fatalf("the test with openat2 hidden: %v", err)
	}
	if !strings.Contains(out.String(), "--- PASS: "+t.Name()+" ") {
		t.Fatalf("the child process did not run %s", t.Name())
	}
	return false
}
