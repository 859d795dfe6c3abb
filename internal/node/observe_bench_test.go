package node_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/nodefs"
)

// dropInsPerDir is the size of the quadratic-input report: 20,000 files in each drop-in directory.
const dropInsPerDir = 20000

// manyDropInsTree is kubespray's resolved node with dropInsPerDir files in every drop-in directory
// Observe walks: resolved.conf.d, NetworkManager's conf.d, networkd's .network directory, netplan,
// and the kubelet and nodedns units' .d directories. Each file adds to what the readers merge (a
// server, a domain, a group, a plugin, an interface), so every merged list grows with the count.
func manyDropInsTree(tb testing.TB) string {
	tb.Helper()
	root := tb.TempDir()
	src := "../../cmd/nodedns/testdata/kubespray/resolved"
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		dst := filepath.Join(root, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
	if err != nil {
		tb.Fatal(err)
	}
	files := map[string]func(i, a, b int) string{
		"etc/systemd/resolved.conf.d/%05d.conf": func(i, a, b int) string {
			return fmt.Sprintf("[Resolve]\nDNS=10.%d.%d.1\nDomains=d%d.example\n", a, b, i)
		},
		"etc/NetworkManager/conf.d/%05d.conf": func(i, a, b int) string {
			// No `key+=` here: a chain of 20,000 files extending one list is still quadratic (each
			// extension re-splits and re-joins the merged list, as NetworkManager's own merge does).
			return fmt.Sprintf("[main]\nno-auto-default=e%d\n[device-%d]\nmatch-device=interface-name:e%d\n", i, i, i)
		},
		"usr/lib/NetworkManager/conf.d/%05d.conf": func(i, a, b int) string {
			return fmt.Sprintf("[connection-%d]\nipv4.dns-priority=%d\n", i, i)
		},
		"etc/systemd/network/%05d.network": func(i, a, b int) string {
			return fmt.Sprintf("[Match]\nName=e%d\n[Network]\nDHCP=no\n", i)
		},
		"etc/netplan/%05d.yaml": func(i, a, b int) string {
			return fmt.Sprintf("network:\n  version: 2\n  ethernets:\n    e%d:\n      addresses: [10.%d.%d.2/24]\n", i, a, b)
		},
		"etc/systemd/system/kubelet.service.d/%05d.conf": func(i, a, b int) string {
			return fmt.Sprintf("[Service]\nEnvironment=V%d=%d\n", i, i)
		},
		"etc/systemd/system/nodedns.service.d/%05d.conf": func(i, a, b int) string {
			return fmt.Sprintf("[Unit]\nBefore=u%d.service\n", i)
		},
	}
	for pattern, content := range files {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(pattern)), 0o755); err != nil {
			tb.Fatal(err)
		}
		for i := 0; i < dropInsPerDir; i++ {
			p := filepath.Join(root, fmt.Sprintf(pattern, i))
			if err := os.WriteFile(p, []byte(content(i, i/250+1, i%250+1)), 0o644); err != nil {
				tb.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(root, "etc/systemd/system/nodedns.service"), []byte("[Unit]\nDescription=nodedns\n"), 0o644); err != nil {
		tb.Fatal(err)
	}
	return root
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

// BenchmarkObserveManyDropIns: one observation of a node with 20,000 files in every drop-in
// directory stays linear, well under a second (docs/contract.md: the daemon's pass must finish
// inside the unit's WatchdogSec=30).
func BenchmarkObserveManyDropIns(b *testing.B) {
	root := manyDropInsTree(b)
	r := nodefs.NewReader(root)
	cfg := config.Default()
	b.ResetTimer()
	wall, cpu := time.Now(), cpuTime()
	var s *node.Snapshot
	for i := 0; i < b.N; i++ {
		s = node.Observe(r, cfg, time.Now())
	}
	perWall := time.Since(wall) / time.Duration(b.N)
	perCPU := (cpuTime() - cpu) / time.Duration(b.N)
	b.StopTimer()
	if s.Resolved == nil || len(s.Resolved.DNS) < dropInsPerDir {
		b.Fatalf("resolved: read %v servers from %d drop-ins", s.Resolved, dropInsPerDir)
	}
	b.ReportMetric(perCPU.Seconds(), "cpu-s/observe")
	b.Logf("Observe over %d drop-ins in each of 7 directories: %v wall, %v CPU", dropInsPerDir, perWall, perCPU)
}
