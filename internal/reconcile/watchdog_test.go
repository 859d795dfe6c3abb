package reconcile

import (
	"os"
	"regexp"
	"testing"
	"time"
)

// TestPassFitsTheWatchdog: the shipped unit's WatchdogSec is pinged every half period between
// passes, so every bound a pass runs under (its live calls and external commands, and the wait for
// the state lock) must end well within that half period.
func TestPassFitsTheWatchdog(t *testing.T) {
	unit, err := os.ReadFile("../../packaging/systemd/nodedns.service")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^WatchdogSec=(\S+)$`).FindSubmatch(unit)
	if m == nil {
		t.Fatal("nodedns.service sets no WatchdogSec=")
	}
	wd, err := time.ParseDuration(string(m[1]))
	if err != nil {
		t.Fatalf("WatchdogSec=%s: %v", m[1], err)
	}
	if half := wd / 2; passTimeout >= half || passLockWait >= half {
		t.Errorf("a pass may run %v (and wait %v for the lock), but the watchdog (WatchdogSec=%v) is pinged only every %v between passes", passTimeout, passLockWait, wd, half)
	}
}
