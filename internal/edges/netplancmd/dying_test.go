package netplancmd

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// TestDyingWithNodednsHoldsTheForkingThread: netplan's parent-death signal is tied to the thread
// that forks it (prctl(2), PR_SET_PDEATHSIG), so that thread must neither end nor run a goroutine
// that ends it until netplan is waited for. The fork and the wait happen on one thread, whose own
// children (the kernel's per-thread list) hold netplan's stand-in, and goroutines that end their
// threads meanwhile (as podnet's inNS does when a thread cannot go back) leave it running.
func TestDyingWithNodednsHoldsTheForkingThread(t *testing.T) {
	for range 20 {
		cmd := exec.Command("sleep", "0.05")
		var forked, waited int
		var listed bool
		_, err := dyingWithNodedns(cmd, func() ([]byte, error) {
			if err := cmd.Start(); err != nil {
				return nil, err
			}
			forked = unix.Gettid()
			kids, _ := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/children", forked))
			listed = slices.Contains(strings.Fields(string(kids)), strconv.Itoa(cmd.Process.Pid))
			var ended sync.WaitGroup
			for range 8 {
				ended.Go(func() {
					runtime.LockOSThread() // never unlocked: the runtime ends this thread
					runtime.Gosched()
				})
			}
			ended.Wait()
			err := cmd.Wait()
			waited = unix.Gettid()
			return nil, err
		})
		if err != nil {
			t.Fatalf("the stand-in for netplan ended with %v: killed by its parent-death signal while nodedns ran", err)
		}
		if !listed || forked != waited {
			t.Fatalf("forked on thread %d (among its children: %v), waited for on thread %d: the thread was not held", forked, listed, waited)
		}
	}
}
