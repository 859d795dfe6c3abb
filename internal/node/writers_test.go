package node

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestWritersStateRoundTrip(t *testing.T) {
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	in := WritersState{PID: 42, Backoffs: []Backoff{{Path: "/etc/resolv.conf", Since: since, Rewrites: 11, Window: Duration(time.Minute), LastForeign: since, Content: "ab"}}}
	data, err := MarshalWritersState(in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"window": "1m0s"`) {
		t.Errorf("window not human-readable:\n%s", data)
	}
	out, err := ParseWritersState("writers.json", data)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, out); diff != "" {
		t.Errorf("round trip (-in +out):\n%s", diff)
	}
	for _, bad := range []string{`{"pid":1,"backoffs":[{"path":"etc/resolv.conf"}]}`, `{"pid":1,"extra":true}`, `{"backoffs":[{"window":"soon"}]}`, `[`, `{"pid":1} {"pid":2}`} {
		if _, err := ParseWritersState("writers.json", []byte(bad)); err == nil || !strings.Contains(err.Error(), "writers.json") {
			t.Errorf("ParseWritersState(%s) = %v, want an error naming the file", bad, err)
		}
	}
}

func FuzzParseWritersState(f *testing.F) {
	f.Add([]byte(`{"pid":1,"backoffs":[{"path":"/etc/resolv.conf","since":"2026-01-02T03:04:05Z","rewrites":11,"window":"1m0s","lastForeign":"2026-01-02T03:04:05Z","content":"ab"}]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := ParseWritersState("writers.json", data)
		if err != nil {
			return
		}
		out, err := MarshalWritersState(st)
		if err != nil {
			t.Fatalf("marshal what parsed: %v", err)
		}
		if _, err := ParseWritersState("writers.json", out); err != nil {
			t.Fatalf("reparse: %v\n%s", err, out)
		}
	})
}
