package demo

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"testing"

	"github.com/nodedns/nodedns/internal/testutil/nstest"
)

// Session lets the demo program use the test harness (internal/testutil/nstest), whose helpers take
// a testing.TB, outside `go test`: Fatal and Skip end the scenario's goroutine as they end a test's,
// and Cleanup functions run last-in first-out when the scenario is over, however it ended. The
// embedded testing.TB is nil: a method the harness would call and Session does not define panics,
// which makes the gap plain rather than silent.
type Session struct {
	testing.TB

	// Out receives Logf lines (the harness logs a component's output there when something fails).
	Out io.Writer

	mu       sync.Mutex
	closed   bool // RunCleanups has begun: a later Cleanup runs at once
	cleanups []func()
	failed   bool
	skipped  bool
	msg      string
	tmp      []string
}

// Do runs f as a test body would run, then every cleanup; it returns the Fatal or Skip message, or
// "" when f returned normally.
func (s *Session) Do(f func(t testing.TB)) (failed, skipped bool, msg string) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(s)
	}()
	<-done
	s.RunCleanups()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed, s.skipped, s.msg
}

// RunCleanups runs the registered cleanups, newest first, once each. A cleanup registered after it
// began (by a scenario still running when an interrupt ends the demo) runs at once.
func (s *Session) RunCleanups() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	for {
		s.mu.Lock()
		n := len(s.cleanups)
		if n == 0 {
			s.mu.Unlock()
			break
		}
		f := s.cleanups[n-1]
		s.cleanups = s.cleanups[:n-1]
		s.mu.Unlock()
		f()
	}
	s.mu.Lock()
	tmp := s.tmp
	s.tmp = nil
	s.mu.Unlock()
	for _, d := range tmp {
		_ = os.RemoveAll(d)
	}
}

func (s *Session) Helper() {}

func (s *Session) Cleanup(f func()) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		f()
		return
	}
	defer s.mu.Unlock()
	s.cleanups = append(s.cleanups, f)
}

func (s *Session) TempDir() string {
	d, err := nstest.ProcessTempDir("nodedns-demo")
	if err != nil {
		s.Fatal(err)
	}
	s.mu.Lock()
	s.tmp = append(s.tmp, d)
	s.mu.Unlock()
	return d
}

func (s *Session) Failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

func (s *Session) Skipped() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.skipped
}

func (s *Session) Name() string { return "nodedns-demo" }

func (s *Session) Logf(format string, args ...any) {
	if s.Out != nil {
		fmt.Fprintf(s.Out, format+"\n", args...)
	}
}

func (s *Session) Log(args ...any) { s.Logf("%s", fmt.Sprint(args...)) }

func (s *Session) Errorf(format string, args ...any) {
	s.mu.Lock()
	s.failed = true
	if s.msg == "" {
		s.msg = fmt.Sprintf(format, args...)
	}
	s.mu.Unlock()
}

func (s *Session) Error(args ...any) { s.Errorf("%s", fmt.Sprint(args...)) }

func (s *Session) FailNow() {
	s.mu.Lock()
	s.failed = true
	s.mu.Unlock()
	runtime.Goexit()
}

func (s *Session) Fatalf(format string, args ...any) {
	s.Errorf(format, args...)
	runtime.Goexit()
}

func (s *Session) Fatal(args ...any) { s.Fatalf("%s", fmt.Sprint(args...)) }

func (s *Session) SkipNow() {
	s.mu.Lock()
	s.skipped = true
	s.mu.Unlock()
	runtime.Goexit()
}

func (s *Session) Skipf(format string, args ...any) {
	s.mu.Lock()
	s.skipped = true
	if s.msg == "" {
		s.msg = fmt.Sprintf(format, args...)
	}
	s.mu.Unlock()
	runtime.Goexit()
}

func (s *Session) Skip(args ...any) { s.Skipf("%s", fmt.Sprint(args...)) }
