package systemd

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/nodefs"
)

// manyDropIns is the node of the quadratic-input report: 20,000 resolved.conf drop-ins, each adding a
// server, a fallback server, a search domain and an extra stub listener, so every list resolved keeps
// grows with the number of files.
const manyDropIns = 20000

// writeManyResolvedDropIns writes n drop-ins under root's /etc/systemd/resolved.conf.d.
func writeManyResolvedDropIns(tb testing.TB, root string, n int) {
	tb.Helper()
	dir := filepath.Join(root, "etc/systemd/resolved.conf.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	for i := 0; i < n; i++ {
		a, b := i/250+1, i%250+1
		data := fmt.Sprintf("[Resolve]\nDNS=10.%d.%d.1\nFallbackDNS=10.%d.%d.2\nDomains=d%d.example ~r%d.example\nDNSStubListenerExtra=127.1.%d.%d\n",
			a, b, a, b, i, i, a, b)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%05d.conf", i)), []byte(data), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkLoadResolvedConfigDropIns: reading 20,000 drop-ins is linear (the target is well under a
// second per load; the daemon's pass must stay inside the unit's WatchdogSec=30).
func BenchmarkLoadResolvedConfigDropIns(b *testing.B) {
	root := b.TempDir()
	writeManyResolvedDropIns(b, root, manyDropIns)
	r := nodefs.NewReader(root)
	b.ResetTimer()
	start, cpu := time.Now(), cpuTime()
	var cfg *ResolvedConfig
	for i := 0; i < b.N; i++ {
		cfg = LoadResolvedConfig(r)
	}
	per := time.Since(start) / time.Duration(b.N)
	perCPU := (cpuTime() - cpu) / time.Duration(b.N)
	b.StopTimer()
	if len(cfg.DNS) != manyDropIns || len(cfg.Domains) != 2*manyDropIns || len(cfg.DNSStubListenerExtra) != manyDropIns {
		b.Fatalf("read %d servers, %d domains, %d extra listeners from %d drop-ins", len(cfg.DNS), len(cfg.Domains), len(cfg.DNSStubListenerExtra), manyDropIns)
	}
	b.ReportMetric(perCPU.Seconds(), "cpu-s/load")
	b.Logf("%d resolved.conf drop-ins loaded in %v (%v CPU)", manyDropIns, per, perCPU)
}

// cpuTime is the process's user and system time: the figure to read on a shared machine, where
// the wall time also counts other processes.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
