package probes

import "testing"

func FuzzParseBaseline(f *testing.F) {
	f.Add([]byte(`{"version":1,"bootID":"b","interface":"nodelocaldns","addresses":["169.254.25.10/32"]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if b, err := ParseBaseline(data); err == nil && b.BootID == "" {
			t.Fatal("a baseline without boot id parsed")
		}
	})
}
