package tied

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const childEnv = "TIED_TEST_CHILD"

// TestChildDiesWithTheProcess: a child started with Start outlives the end of the thread that
// called Start (a goroutine that returns locked to its thread ends it), and dies when its parent is
// killed with SIGKILL, which runs no cleanup.
func TestChildDiesWithTheProcess(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		cmd := exec.Command("sleep", "300")
		type started struct {
			tid int
			err error
		}
		ch := make(chan started)
		var st started
		for st.tid == 0 {
			go func() {
				runtime.LockOSThread()
				if syscall.Gettid() == os.Getpid() {
					// The main thread: the runtime never ends it. Another goroutine tries.
					runtime.UnlockOSThread()
					ch <- started{}
					return
				}
				// The caller's thread ends with this goroutine, right after the start.
				ch <- started{syscall.Gettid(), Start(cmd)}
			}()
			st = <-ch
		}
		if st.err != nil {
			fmt.Println("error:", st.err)
			os.Exit(1)
		}
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", st.tid)); err != nil {
				break
			}
			if time.Now().After(deadline) {
				fmt.Println("error: the caller's thread did not end")
				os.Exit(1)
			}
		}
		fmt.Println(cmd.Process.Pid)
		time.Sleep(time.Hour) // until killed
	}
	parent := exec.Command(os.Args[0], "-test.run=^TestChildDiesWithTheProcess$", "-test.count=1")
	parent.Env = append(os.Environ(), childEnv+"=1")
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := Start(parent); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = parent.Process.Kill(); _ = parent.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the parent process said %q: %v", line, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("the parent process said %q", line)
	}
	// The thread that called Start has ended: the parent printed the PID after it did.
	if !alive(pid) {
		t.Fatal("the child died with a thread of its parent, not with its parent")
	}
	_ = parent.Process.Kill()
	_ = parent.Wait()
	for deadline := time.Now().Add(30 * time.Second); alive(pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs 30s after its parent was killed", pid)
		}
	}
}

// alive reports whether pid runs (a zombie, killed and not yet reaped, does not).
func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(data)
	end := strings.LastIndexByte(s, ')')
	return end > 0 && end+2 < len(s) && s[end+2] != 'Z' && strings.Contains(s[:end], "(sleep")
}
