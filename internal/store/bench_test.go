package store

import (
	"bytes"
	"testing"
)

// BenchmarkWrite measures one atomic replace of a 1 KiB file (temp file, fsync, rename, directory
// fsync), the backup having been taken by the first iteration as in a long-running daemon.
func BenchmarkWrite(b *testing.B) {
	s := &Store{Root: b.TempDir()}
	// Two contents in turn, so no iteration is skipped as unchanged.
	data := [2][]byte{bytes.Repeat([]byte("a"), 1023), bytes.Repeat([]byte("b"), 1023)}
	for i := range data {
		data[i] = append(data[i], '\n')
	}
	b.SetBytes(1024)
	for i := 0; b.Loop(); i++ {
		if _, err := s.Write("/etc/resolv.conf", data[i%2], 0o644); err != nil {
			b.Fatal(err)
		}
	}
}
