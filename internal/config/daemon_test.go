package config

import (
	"strings"
	"testing"
	"time"
)

func TestDaemonResyncInterval(t *testing.T) {
	tests := []struct {
		value   any
		want    time.Duration
		wantErr string
	}{
		{"5m", 5 * time.Minute, ""},
		{"10s", 10 * time.Second, ""},
		{"1h", time.Hour, ""},
		{"9s", 0, "shorter than 10s"},
		{"0s", 0, "not a positive duration"},
		{"often", 0, `"often" is not a duration`},
	}
	for _, tc := range tests {
		c, err := FromSettings(map[string]any{"daemon.resyncinterval": tc.value})
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "daemon.resyncInterval") {
				t.Errorf("%v: err = %v, want one naming daemon.resyncInterval with %q", tc.value, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%v: %v", tc.value, err)
		case c.Daemon.ResyncInterval != tc.want:
			t.Errorf("%v: got %v, want %v", tc.value, c.Daemon.ResyncInterval, tc.want)
		}
	}
	if d := Default().Daemon.ResyncInterval; d != 5*time.Minute {
		t.Errorf("default resync %v, want 5m", d)
	}
}
