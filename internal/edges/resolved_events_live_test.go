package edges

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/testutil/nstest"
	"github.com/nodedns/nodedns/systemd/bus"
)

// TestResolvedEventsLive runs the glue between the D-Bus client and the daemon against a real
// systemd-resolved 252 and dbus-daemon in a sandbox: a resolved restart and a dbus-daemon restart
// (followed by a resolved restart, as resolved 252 does not follow a restarted bus) each reach
// Events as a notice, and closing the client leaves no goroutine behind (the client's, godbus's and
// the forwarder's all end) after three rounds of both.
func TestResolvedEventsLive(t *testing.T) { nstest.Suites(t, testResolvedEventsLive) }

func testResolvedEventsLive(t *testing.T, s nstest.Suite) {
	sb := nstest.NewWith(t, nstest.Options{Suite: s})
	sb.Isolate(t)
	sysbus := sb.SystemBus(t)
	res := sb.StartResolved(t)

	before := runtime.NumGoroutine()
	r := &Resolved{Options: bus.ResolvedOptions{Address: sb.BusAddress(), MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}}
	notices := r.Events()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := r.Client(ctx); err != nil {
		t.Fatal(err)
	}
	wait := func(want string) {
		t.Helper()
		deadline := time.After(15 * time.Second)
		var seen []string
		for {
			select {
			case n := <-notices:
				if strings.HasPrefix(n, want) {
					return
				}
				seen = append(seen, n)
			case <-deadline:
				t.Fatalf("no notice %q within 15s (saw %q)", want, seen)
			}
		}
	}
	for round := range 3 {
		res.Restart(t)
		wait("systemd-resolved started")

		// Only this sandbox's dbus-daemon, by its process (the command Start returns is the program itself).
		if err := sysbus.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = sysbus.Wait()
		sysbus = sb.SystemBus(t)
		wait("system bus reconnected")
		res.Restart(t)
		wait("systemd-resolved started")
		c, err := r.Client(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.WaitReady(ctx, ""); err != nil {
			t.Fatalf("round %d: resolved not ready through the shared client: %v", round, err)
		}
	}

	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	end := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(end) {
		time.Sleep(10 * time.Millisecond)
	}
	if after := runtime.NumGoroutine(); after > before {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines before the client, %d after Close:\n%s", before, after, buf[:runtime.Stack(buf, true)])
	}
}
