package reconcile

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"syscall"
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

// TestInotifyLimitNamed: the inotify errors name the kernel limit and its current value, not
// "no space left on device".
func TestInotifyLimitNamed(t *testing.T) {
	watches, err := os.ReadFile("/proc/sys/fs/inotify/max_user_watches")
	if err != nil {
		t.Skip("no /proc/sys/fs/inotify on this machine")
	}
	got := inotifyLimit(fmt.Errorf("add /etc/netplan: %w", syscall.ENOSPC)).Error()
	want := "fs.inotify.max_user_watches (now " + strings.TrimSpace(string(watches)) + ")"
	if !strings.Contains(got, want) {
		t.Errorf("ENOSPC: %q does not name %q", got, want)
	}
	if got := inotifyLimit(syscall.EMFILE).Error(); !strings.Contains(got, "fs.inotify.max_user_instances") {
		t.Errorf("EMFILE: %q does not name fs.inotify.max_user_instances", got)
	}
	if err := inotifyLimit(syscall.ENOENT); err != syscall.ENOENT {
		t.Errorf("ENOENT changed: %v", err)
	}
}
