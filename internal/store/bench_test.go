package store

import (
	"bytes"
	"testing"

	"github.com/nodedns/nodedns/internal/testutil/labels"
)

// BenchmarkWrite measures one atomic replace of a 1 KiB file (temp file, fsync, rename, directory
// fsync), the backup having been taken by the first iteration as in a long-running daemon; over a
// file without a label, and over one with an SELinux label, which the replace reads and sets on
// the temp file (skipped where the filesystem keeps none).
func BenchmarkWrite(b *testing.B) {
	for _, labelled := range []bool{false, true} {
		name := "unlabelled"
		if labelled {
			name = "labelled"
		}
		b.Run(name, func(b *testing.B) {
			s := &Store{Root: b.TempDir()}
			// Two contents in turn, so no iteration is skipped as unchanged.
			data := [2][]byte{bytes.Repeat([]byte("a"), 1023), bytes.Repeat([]byte("b"), 1023)}
			for i := range data {
				data[i] = append(data[i], '\n')
			}
			if labelled {
				labels.Need(b, s.Root)
				if _, err := s.Write("/etc/resolv.conf", data[1], 0o644); err != nil {
					b.Fatal(err)
				}
				labels.Set(b, s.host("/etc/resolv.conf"), "system_u:object_r:net_conf_t:s0\x00")
			}
			b.SetBytes(1024)
			for i := 0; b.Loop(); i++ {
				if _, err := s.Write("/etc/resolv.conf", data[i%2], 0o644); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
