package demo

import (
	"os"
	"slices"
	"testing"
)

// TestSession checks the testing.TB stand-in the demo program runs the harness with: Fatal and Skip
// end the body where they are called, as in a test; cleanups run newest first, once, after the body
// however it ended; TempDir's directories are removed; a cleanup registered after cleanup began runs
// at once.
func TestSession(t *testing.T) {
	for _, tc := range []struct {
		name          string
		body          func(t testing.TB)
		failed, skip  bool
		msg           string
		reachedMarker bool
	}{
		{name: "returns", body: func(t testing.TB) {}, reachedMarker: true},
		{name: "fatal", body: func(t testing.TB) { t.Fatalf("boom %d", 1) }, failed: true, msg: "boom 1"},
		{name: "skip", body: func(t testing.TB) { t.Skipf("no %s", "tool") }, skip: true, msg: "no tool"},
		{name: "error goes on", body: func(t testing.TB) { t.Errorf("first"); t.Error("second") }, failed: true, msg: "first", reachedMarker: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Session{}
			var order []int
			reached := false
			var dir string
			failed, skipped, msg := s.Do(func(tb testing.TB) {
				tb.Cleanup(func() { order = append(order, 1) })
				tb.Cleanup(func() { order = append(order, 2) })
				dir = tb.TempDir()
				tc.body(tb)
				reached = true
			})
			if failed != tc.failed || skipped != tc.skip || msg != tc.msg || reached != tc.reachedMarker {
				t.Errorf("Do = failed %v skipped %v msg %q reached %v; want %v %v %q %v", failed, skipped, msg, reached, tc.failed, tc.skip, tc.msg, tc.reachedMarker)
			}
			if !slices.Equal(order, []int{2, 1}) {
				t.Errorf("cleanups ran in order %v, want [2 1]", order)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("TempDir %s still there after the cleanups (%v)", dir, err)
			}
			s.RunCleanups()
			if len(order) != 2 {
				t.Errorf("cleanups ran again: %v", order)
			}
			late := false
			s.Cleanup(func() { late = true })
			if !late {
				t.Error("a cleanup registered after RunCleanups did not run at once")
			}
		})
	}
}
