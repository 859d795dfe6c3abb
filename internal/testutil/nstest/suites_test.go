package nstest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSuites proves what a live test run per suite relies on: the sandbox runs the suite's own
// programs (os-release and systemd-resolved's version are the suite's), the host's temporary
// directory (the nodedns binary, the sandbox's Dir) is seen at its own path, /etc/resolv.conf starts
// empty and the host's stays as it was, and the suite's resolved answers on the sandbox's bus.
func TestSuites(t *testing.T) {
	hostResolv, _ := os.ReadFile("/etc/resolv.conf")
	Suites(t, func(t *testing.T, s Suite) {
		sb := NewWith(t, Options{Suite: s})
		if got := sb.Run(t, ". /etc/os-release; echo $VERSION_CODENAME"); strings.TrimSpace(got) != s.String() {
			t.Errorf("the sandbox runs %q, want %s", got, s)
		}
		marker := filepath.Join(sb.Dir(), "marker")
		if err := os.WriteFile(marker, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := sb.Run(t, "cat "+Quote(marker)); got != "x" {
			t.Errorf("the sandbox's Dir is not seen inside: %q", got)
		}
		if got := sb.Run(t, "cat /etc/resolv.conf"); got != "" {
			t.Errorf("/etc/resolv.conf in the sandbox = %q, want empty", got)
		}
		sb.Isolate(t)
		sb.Run(t, "echo 'nameserver 10.77.0.2' > /etc/resolv.conf")
		if after, _ := os.ReadFile("/etc/resolv.conf"); string(after) != string(hostResolv) {
			t.Fatal("writing the sandbox's /etc/resolv.conf changed the host's")
		}
		sb.SystemBus(t)
		r := sb.StartResolved(t)
		want := map[string]string{Bookworm: "systemd 252 ", Forky: "systemd 262 "}[s.String()]
		if v := r.Version(t); !strings.HasPrefix(v, want) {
			t.Errorf("resolved is %q, want %s", v, want)
		}
	})
}
