package metrics

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nodedns/nodedns/internal/store"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/protobuf/testing/protocmp"
)

func fixedRecorder(source string) *Recorder {
	r := NewRecorder(source, "1.2.3")
	r.now = func() time.Time { return time.Unix(1700000000, 500e6) }
	r.ObserveChecks([]Check{
		{ID: "resolvconf.loop", Status: "problem"},
		{ID: "dns.loop", Status: "skipped"},
		{ID: "boot.persistence", Status: "ok"},
	})
	r.Reconciled(3, false)
	r.Reconciled(0, true)
	r.WriterBackoff("/etc/resolv.conf")
	r.WriterBackoff("/etc/resolv.conf")
	r.WriterBackoff(`/odd "path"\with` + "\nnewline")
	return r
}

func parseText(t *testing.T, data []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("the text format does not parse: %v\n%s", err, data)
	}
	for name, f := range fams {
		if len(f.Metric) == 0 {
			delete(fams, name) // a family with no sample is legal text but never gathered
		}
	}
	return fams
}

// TestTextfileMatchesListener proves the hand-written textfile and the client_golang listener export
// the same families, samples and values: both are parsed by Prometheus's own text parser.
func TestTextfileMatchesListener(t *testing.T) {
	for _, source := range []string{SourceRun, SourceCheck} {
		t.Run(source, func(t *testing.T) {
			r := fixedRecorder(source)
			var text bytes.Buffer
			if err := r.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			fromFile := parseText(t, text.Bytes())

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			addr, err := Serve(ctx, "127.0.0.1:0", r, nil)
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr.String()+"/metrics", nil)
			req.Header.Set("Accept", "text/plain; version=0.0.4")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /metrics: %s\n%s", resp.Status, body)
			}
			fromListener := parseText(t, body)
			if diff := cmp.Diff(fromFile, fromListener, protocmp.Transform()); diff != "" {
				t.Errorf("textfile and listener differ (-file +listener):\n%s", diff)
			}
		})
	}
}

func TestFamilies(t *testing.T) {
	r := fixedRecorder(SourceRun)
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	fams := parseText(t, text.Bytes())
	value := func(name string, labels map[string]string) float64 {
		t.Helper()
		f, ok := fams[name]
		if !ok {
			t.Fatalf("no family %s in:\n%s", name, text.String())
		}
	next:
		for _, m := range f.Metric {
			got := map[string]string{}
			for _, l := range m.Label {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue next
				}
			}
			switch {
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Counter != nil:
				return m.Counter.GetValue()
			}
		}
		t.Fatalf("no sample %s%v in:\n%s", name, labels, text.String())
		return 0
	}
	tests := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"nodedns_check_status", map[string]string{"source": "run", "check": "resolvconf.loop", "status": "problem"}, 1},
		{"nodedns_check_status", map[string]string{"source": "run", "check": "resolvconf.loop", "status": "ok"}, 0},
		{"nodedns_check_status", map[string]string{"source": "run", "check": "dns.loop", "status": "skipped"}, 1},
		{"nodedns_check_status", map[string]string{"source": "run", "check": "boot.persistence", "status": "ok"}, 1},
		{"nodedns_checks_timestamp_seconds", map[string]string{"source": "run"}, 1700000000.5},
		{"nodedns_reconciles_total", map[string]string{"result": "ok"}, 1},
		{"nodedns_reconciles_total", map[string]string{"result": "failed"}, 1},
		{"nodedns_changes_applied_total", nil, 3},
		{"nodedns_writer_backoffs_total", map[string]string{"target": "/etc/resolv.conf"}, 2},
		{"nodedns_writer_backoffs_total", map[string]string{"target": `/odd "path"\with` + "\nnewline"}, 1},
		{"nodedns_build_info", map[string]string{"source": "run", "version": "1.2.3"}, 1},
		{"nodedns_last_reconcile_timestamp_seconds", nil, 1700000000.5},
	}
	for _, tt := range tests {
		if got := value(tt.name, tt.labels); got != tt.want {
			t.Errorf("%s%v = %v, want %v", tt.name, tt.labels, got, tt.want)
		}
	}
	// Every check has exactly one status set: a one-hot gauge, so sum by (check) is always 1.
	sums := map[string]float64{}
	for _, m := range fams["nodedns_check_status"].Metric {
		for _, l := range m.Label {
			if l.GetName() == "check" {
				sums[l.GetValue()] += m.Gauge.GetValue()
			}
		}
	}
	if diff := cmp.Diff(map[string]float64{"resolvconf.loop": 1, "dns.loop": 1, "boot.persistence": 1}, sums); diff != "" {
		t.Errorf("per-check sums (-want +got):\n%s", diff)
	}
}

// TestCheckSourceHasNoDaemonCounters: the one-shot check's file must not carry counters it cannot
// know (reconciles happen in the daemon), or the two files would export the same series.
func TestCheckSourceHasNoDaemonCounters(t *testing.T) {
	var text bytes.Buffer
	if err := fixedRecorder(SourceCheck).WriteText(&text); err != nil {
		t.Fatal(err)
	}
	fams := parseText(t, text.Bytes())
	var names []string
	for n := range fams {
		names = append(names, n)
	}
	want := []string{"nodedns_build_info", "nodedns_check_status", "nodedns_checks_timestamp_seconds"}
	if diff := cmp.Diff(want, names, cmpSorted); diff != "" {
		t.Errorf("families (-want +got):\n%s", diff)
	}
}

var cmpSorted = cmp.Transformer("sort", func(in []string) []string {
	out := append([]string(nil), in...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
})

func TestChecksTextfile(t *testing.T) {
	tests := map[string]string{
		"/var/lib/node_exporter/textfile_collector/nodedns.prom": "/var/lib/node_exporter/textfile_collector/nodedns_check.prom",
		"/srv/metrics/dns": "/srv/metrics/dns_check.prom",
		"":                 "",
	}
	for in, want := range tests {
		if got := ChecksTextfile(in); got != want {
			t.Errorf("ChecksTextfile(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestWriteTextfile(t *testing.T) {
	const path = "/var/lib/node_exporter/textfile_collector/nodedns.prom"
	t.Run("no collector directory: no file, no directory", func(t *testing.T) {
		root := t.TempDir()
		st := &store.Store{Root: root}
		err := WriteTextfile(st, path, fixedRecorder(SourceRun))
		if !errors.Is(err, ErrNoCollectorDir) {
			t.Fatalf("err = %v, want ErrNoCollectorDir", err)
		}
		if _, err := os.Stat(filepath.Join(root, "var/lib/node_exporter")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the collector directory was created (stat: %v)", err)
		}
	})
	t.Run("written atomically, world-readable, removed by restore", func(t *testing.T) {
		root := t.TempDir()
		dir := filepath.Join(root, "var/lib/node_exporter/textfile_collector")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		// Restore changes only the files nodedns manages: the textfile is one through the config.
		st := &store.Store{Root: root, Targets: store.DefaultTargets("/var/lib/nodedns").Add(path)}
		r := fixedRecorder(SourceRun)
		if err := WriteTextfile(st, path, r); err != nil {
			t.Fatal(err)
		}
		r.Reconciled(1, false)
		if err := WriteTextfile(st, path, r); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(filepath.Join(dir, "nodedns.prom"))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o644 {
			t.Errorf("mode %v, want 0644 (node_exporter runs as its own user)", fi.Mode().Perm())
		}
		data, _ := os.ReadFile(filepath.Join(dir, "nodedns.prom"))
		fams := parseText(t, data)
		if got := fams["nodedns_changes_applied_total"].Metric[0].Counter.GetValue(); got != 4 {
			t.Errorf("changes after the second write = %v, want 4", got)
		}
		ents, _ := os.ReadDir(dir)
		if len(ents) != 1 {
			t.Errorf("the directory holds %d entries, want only nodedns.prom (a temp file left behind?)", len(ents))
		}
		if _, err := st.Restore(nil); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, "nodedns.prom")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("restore kept the metrics file nodedns created (stat: %v)", err)
		}
	})
	t.Run("a symlinked collector directory is followed inside the root", func(t *testing.T) {
		root := t.TempDir()
		if err := os.MkdirAll(filepath.Join(root, "srv/prom"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(root, "var/lib/node_exporter"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/srv/prom", filepath.Join(root, "var/lib/node_exporter/textfile_collector")); err != nil {
			t.Fatal(err)
		}
		if err := WriteTextfile(&store.Store{Root: root}, path, fixedRecorder(SourceRun)); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(root, "srv/prom/nodedns.prom")); err != nil {
			t.Errorf("file not written through the link inside the root: %v", err)
		}
	})
}

func TestServe(t *testing.T) {
	t.Run("no address: no socket", func(t *testing.T) {
		addr, err := Serve(context.Background(), "", NewRecorder(SourceRun, "x"), nil)
		if err != nil || addr != nil {
			t.Fatalf("Serve(\"\") = %v, %v; want nil, nil", addr, err)
		}
	})
	t.Run("stops with its context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		addr, err := Serve(ctx, "127.0.0.1:0", NewRecorder(SourceRun, "x"), nil)
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		deadline := time.Now().Add(5 * time.Second)
		for {
			resp, err := http.Get("http://" + addr.String() + "/metrics")
			if err != nil {
				return // closed
			}
			resp.Body.Close()
			if time.Now().After(deadline) {
				t.Fatal("the listener still answers after its context ended")
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	t.Run("a busy port is an error naming the address", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		addr, err := Serve(ctx, "127.0.0.1:0", NewRecorder(SourceRun, "x"), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Serve(ctx, addr.String(), NewRecorder(SourceRun, "x"), nil)
		if err == nil || !strings.Contains(err.Error(), addr.String()) {
			t.Fatalf("second Serve on %s: err = %v, want an error naming the address", addr, err)
		}
	})
}

// TestPromtool validates the textfile with Prometheus's own linter when promtool is installed
// (.ci/run extracts it from Debian's prometheus package without installing the service).
func TestPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if p := os.Getenv("NODEDNS_PROMTOOL"); p != "" {
			promtool = p
		} else {
			t.Skip("promtool not installed (.ci/run provides it as NODEDNS_PROMTOOL)")
		}
	}
	for _, source := range []string{SourceRun, SourceCheck} {
		var text bytes.Buffer
		if err := fixedRecorder(source).WriteText(&text); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = &text
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool check metrics (%s): %v\n%s\ninput:\n%s", source, err, out, text.String())
		}
	}
}

func TestConcurrentRecording(t *testing.T) {
	r := NewRecorder(SourceRun, "x")
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 200 {
			r.Reconciled(1, false)
			r.WriterBackoff("/etc/resolv.conf")
			r.ObserveChecks([]Check{{ID: "dns.loop", Status: "ok"}})
		}
	}()
	for range 200 {
		_ = r.WriteText(io.Discard)
	}
	<-done
	var text bytes.Buffer
	_ = r.WriteText(&text)
	fams := parseText(t, text.Bytes())
	if got := fams["nodedns_changes_applied_total"].Metric[0].Counter.GetValue(); got != 200 {
		t.Errorf("changes = %v, want 200", got)
	}
}

// TestNoSeriesInBothTextfiles: node_exporter's textfile collector reads the daemon's file and the
// one-shot check's file into one scrape, and fails the scrape ("collected metric ... was collected
// before with the same name and label values") when a series is in both. The two files, merged as
// the collector merges them, must name every series once.
func TestNoSeriesInBothTextfiles(t *testing.T) {
	seen := map[string]string{}
	for _, source := range []string{SourceRun, SourceCheck} {
		var text bytes.Buffer
		if err := fixedRecorder(source).WriteText(&text); err != nil {
			t.Fatal(err)
		}
		for name, f := range parseText(t, text.Bytes()) {
			for _, m := range f.GetMetric() {
				key := name + "{"
				for _, l := range m.GetLabel() {
					key += l.GetName() + "=" + l.GetValue() + ","
				}
				if prev, ok := seen[key]; ok {
					t.Errorf("series %s} is in both the %s and the %s textfile", key, prev, source)
				}
				seen[key] = source
			}
		}
	}
	if len(seen) == 0 {
		t.Fatal("no series at all")
	}
}
