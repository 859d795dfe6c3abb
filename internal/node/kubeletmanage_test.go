package node

import (
	"strings"
	"testing"
	"time"
)

func TestKubeletRestartRoundTrip(t *testing.T) {
	r := KubeletRestart{Unit: "k3s.service", File: "/etc/rancher/k3s/config.yaml", Changed: time.Date(2026, 11, 27, 4, 0, 0, 0, time.UTC)}
	got, err := ParseKubeletRestart(r.Render())
	if err != nil || *got != r {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	if strings.Contains(string(r.Render()), "restarted") {
		t.Errorf("a record of no restart says restarted:\n%s", r.Render())
	}
	r.Changed, r.Restarted = r.Changed.Add(230*time.Millisecond), r.Changed.Add(230*time.Millisecond)
	if got, err := ParseKubeletRestart(r.Render()); err != nil || !got.Changed.Equal(r.Changed) || !got.Restarted.Equal(r.Restarted) {
		t.Fatalf("round trip of a record to the tick, restarted: %+v, %v\n%s", got, err, r.Render())
	}
	for _, bad := range []string{"", "{}", "[]", `{"unit":"x","changed":"yesterday"}`,
		`{"unit":"x","changed":"2026-11-27T04:00:00Z","restarted":true}`, `{"unit":"x","changed":"2026-11-27T04:00:00Z"} {}`} {
		if _, err := ParseKubeletRestart([]byte(bad)); err == nil {
			t.Errorf("%q read as a record", bad)
		}
	}
}

func FuzzParseKubeletRestart(f *testing.F) {
	f.Add([]byte(`{"unit":"kubelet.service","file":"/var/lib/kubelet/config.yaml","changed":"2026-11-27T04:00:00Z"}`))
	f.Add([]byte(`{"unit":"kubelet.service","file":"/var/lib/kubelet/config.yaml","changed":"2026-11-27T04:00:00.23Z","restarted":"2026-11-27T04:00:00.23Z"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseKubeletRestart(data)
		if err != nil {
			return
		}
		if r.Changed.IsZero() {
			t.Fatal("a record without a time of change")
		}
		again, err := ParseKubeletRestart(r.Render())
		if err != nil || !again.Changed.Equal(r.Changed) || !again.Restarted.Equal(r.Restarted) || again.Unit != r.Unit || again.File != r.File {
			t.Fatalf("%q does not read back: %+v, %v", r.Render(), again, err)
		}
	})
}
