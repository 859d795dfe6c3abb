// Package tied starts the child processes of tests so that the kernel kills them when the test
// process ends, however it ends: a SIGKILL from outside, a timeout's panic and a crash run no
// cleanup, and a process a test started would otherwise keep running (and a sandbox keep its
// namespaces) long after.
//
// Start sets PR_SET_PDEATHSIG (SIGKILL) on the child and forks it from one OS thread that lives as
// long as the process. The thread matters: the kernel sends the parent-death signal when the
// *thread* that forked the child exits, not the process (prctl(2), PR_SET_PDEATHSIG: "the parent"
// is the creating thread), and the Go runtime ends a thread when a goroutine locked to it returns
// without unlocking, which namespace code does on purpose (probes/podnet, nstest): a child forked
// from such a thread would be killed long before its test ends.
//
// Only the child itself is tied. What it starts must be tied to it in turn: a PID namespace whose
// init it is or forks with a parent-death signal (unshare --fork --kill-child), or setpriv
// --pdeathsig on each program.
package tied

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

var (
	keeperOnce sync.Once
	keeperRuns chan func()
)

// keeper returns the channel of the thread that forks tied children: a goroutine locked to its
// thread for good, so the thread lives until the process ends.
func keeper() chan<- func() {
	keeperOnce.Do(func() {
		keeperRuns = make(chan func())
		go func() {
			runtime.LockOSThread() // never unlocked: the thread must outlive every child it forks
			for f := range keeperRuns {
				f()
			}
		}()
	})
	return keeperRuns
}

// Start starts cmd as exec.Cmd.Start does, with the kernel sending it SIGKILL when this process
// ends. It sets cmd.SysProcAttr.Pdeathsig (keeping the rest of SysProcAttr).
func Start(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	errc := make(chan error, 1)
	keeper() <- func() { errc <- cmd.Start() }
	return <-errc
}
