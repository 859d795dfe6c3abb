package nodefs

import (
	"testing"

	"github.com/nodedns/nodedns/internal/testutil/noopenat2"
)

// BenchmarkConfinedRead reads node files under a --root the way every pass does (ReadFile), with
// confined opens through openat2 and through the fallback walk, and reports the system calls the
// confined lookup costs per read (counted in the lookup code itself: the root's open and close,
// then openat2, or every openat, fstat, readlinkat and close of the walk; the read's own fstat,
// read and close come on top, the same for both).
//
// The walk is measured in a process that has openat2 hidden (the kernel answers ENOSYS, as before
// Linux 5.6), which make bench runs as well:
//
//	NODEDNS_TEST_HIDE_OPENAT2=ENOSYS go test -run='^$' -bench=ConfinedRead/walk ./internal/nodefs
//
// Cross-check with strace:
//
//	go test -c -o /tmp/nodefs.test ./internal/nodefs
//	NODEDNS_TEST_HIDE_OPENAT2=ENOSYS strace -f -c -e trace=openat,openat2,newfstatat,fstat,readlinkat,close \
//	  /tmp/nodefs.test -test.run='^$' -test.bench=ConfinedRead/walk -test.benchtime=1000x
func BenchmarkConfinedRead(b *testing.B) {
	paths := map[string]string{
		"etc-resolv.conf":     "/etc/resolv.conf",
		"var-run-stub-linked": "/var/run/systemd/resolve/stub-resolv.conf",
		"resolv.conf-symlink": "/etc/resolv.link",
	}
	for _, mode := range []string{"openat2", "walk"} {
		for name, p := range paths {
			b.Run(mode+"/"+name, func(b *testing.B) {
				switch {
				case mode == "openat2" && !noopenat2.Available():
					b.Skip("no openat2 here")
				case mode == "walk" && noopenat2.Hidden() == 0:
					b.Skip("the walk is measured with openat2 hidden: " + noopenat2.Env + "=ENOSYS (make bench)")
				}
				s := &Tree{Root: b.TempDir()}
				mkfile(b, s, "/etc/resolv.conf", "nameserver 10.0.0.1\n", 0o644)
				mkfile(b, s, "/run/systemd/resolve/stub-resolv.conf", "nameserver 127.0.0.53\n", 0o644)
				mklink(b, s, "/var/run", "/run")
				mklink(b, s, "/etc/resolv.link", "../run/systemd/resolve/stub-resolv.conf")
				if _, err := s.ReadFile(p, Config); err != nil {
					b.Fatal(err)
				}
				start := lookupCalls.Load()
				b.ResetTimer()
				for b.Loop() {
					if _, err := s.ReadFile(p, Config); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(lookupCalls.Load()-start)/float64(b.N), "lookup-syscalls/op")
			})
		}
	}
}
