// Package metrics is nodedns's reporting to Prometheus: per-check status, reconciles, changes
// applied and other-writer backoffs, held by a Recorder and exported two ways:
//
//   - a node_exporter textfile (the default): the exposition text format written atomically through
//     store.Store into the textfile collector's directory, only when that directory exists;
//   - optionally a /metrics listener (config metrics.listen) served by client_golang, from the same
//     Recorder. No socket is opened unless it is configured.
//
// The package sits beside reconcile, not under it: cmd (the one-shot check) and the daemon both feed a
// Recorder, and nothing in the pure core depends on it.
package metrics

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Statuses a check can have (probes.Status values), in the order they are exported.
var Statuses = []string{"ok", "problem", "unknown", "skipped"}

// Sources name who ran the checks: the `source` label keeps the one-shot check's file and the
// daemon's file from ever exporting the same series (node_exporter rejects a scrape that has a
// series twice).
const (
	SourceCheck = "check"
	SourceRun   = "run"
)

// Check is one check's result as the metrics see it.
type Check struct {
	ID     string
	Status string
}

// Recorder holds the metrics of one nodedns process. It is safe for concurrent use: the daemon's
// loop records while the listener reads.
type Recorder struct {
	source  string
	version string
	now     func() time.Time

	mu              sync.Mutex
	checks          map[string]string
	checksAt        time.Time
	reconciles      map[string]uint64 // by result: ok, failed
	changes         uint64
	backoffs        map[string]uint64 // by target node path
	lastReconcileAt time.Time
	sb              standbyState // standby.go
}

// NewRecorder returns an empty Recorder for source (SourceCheck or SourceRun) of nodedns version.
func NewRecorder(source, version string) *Recorder {
	return &Recorder{
		source: source, version: version, now: time.Now,
		checks: map[string]string{}, reconciles: map[string]uint64{}, backoffs: map[string]uint64{},
	}
}

// ObserveChecks replaces the per-check status with one run's results.
func (r *Recorder) ObserveChecks(results []Check) {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.checks)
	for _, c := range results {
		r.checks[c.ID] = c.Status
	}
	r.checksAt = r.now()
}

// Reconciled counts one reconcile pass that applied changes changes (files written or removed,
// actions carried out); failed means it ended with an error or a blocked target.
func (r *Recorder) Reconciled(changes int, failed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := "ok"
	if failed {
		res = "failed"
	}
	r.reconciles[res]++
	if changes > 0 {
		r.changes += uint64(changes)
	}
	r.lastReconcileAt = r.now()
}

// WriterBackoff counts one time nodedns stopped fighting another writer of target (a node path).
func (r *Recorder) WriterBackoff(target string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.backoffs[target]++
}

// Sample is one exported value.
type Sample struct {
	Labels [][2]string // name, value; in export order
	Value  float64
}

// Family is one metric family: its name, help, type (gauge or counter) and samples.
type Family struct {
	Name, Help, Type string
	Samples          []Sample
}

// Families is the Recorder's state as metric families, in a stable order; both the textfile and
// the listener export exactly these.
func (r *Recorder) Families() []Family {
	r.mu.Lock()
	defer r.mu.Unlock()
	fams := []Family{{
		// source keeps the daemon's and the one-shot check's files apart: node_exporter merges every
		// textfile into one scrape and rejects a series that two files both carry.
		Name: "nodedns_build_info", Help: "nodedns version, by who wrote the series (run: the daemon, check: nodedns check); always 1.", Type: "gauge",
		Samples: []Sample{{Labels: [][2]string{{"source", r.source}, {"version", r.version}}, Value: 1}},
	}}
	if len(r.checks) > 0 {
		f := Family{Name: "nodedns_check_status", Type: "gauge",
			Help: "Status of each nodedns check: 1 for the check's current status, 0 for the others."}
		ids := sortedKeys(r.checks)
		for _, id := range ids {
			for _, st := range Statuses {
				v := 0.0
				if r.checks[id] == st {
					v = 1
				}
				f.Samples = append(f.Samples, Sample{Labels: [][2]string{{"source", r.source}, {"check", id}, {"status", st}}, Value: v})
			}
		}
		fams = append(fams, f, Family{
			Name: "nodedns_checks_timestamp_seconds", Type: "gauge",
			Help:    "When the checks last ran, in seconds since the epoch.",
			Samples: []Sample{{Labels: [][2]string{{"source", r.source}}, Value: unix(r.checksAt)}},
		})
	}
	if r.source == SourceRun {
		rec := Family{Name: "nodedns_reconciles_total", Type: "counter", Help: "Reconcile passes, by result (ok, failed)."}
		for _, res := range []string{"ok", "failed"} {
			rec.Samples = append(rec.Samples, Sample{Labels: [][2]string{{"result", res}}, Value: float64(r.reconciles[res])})
		}
		fams = append(fams, rec, Family{
			Name: "nodedns_changes_applied_total", Type: "counter", Help: "Files written or removed and actions carried out by reconciles.",
			Samples: []Sample{{Value: float64(r.changes)}},
		})
		bo := Family{Name: "nodedns_writer_backoffs_total", Type: "counter", Help: "Times nodedns stopped re-applying a target another writer kept rewriting, by target."}
		for _, t := range sortedKeys(r.backoffs) {
			bo.Samples = append(bo.Samples, Sample{Labels: [][2]string{{"target", t}}, Value: float64(r.backoffs[t])})
		}
		fams = append(fams, bo)
		fams = append(fams, r.standbyFamilies()...)
		if !r.lastReconcileAt.IsZero() {
			fams = append(fams, Family{
				Name: "nodedns_last_reconcile_timestamp_seconds", Type: "gauge", Help: "When the last reconcile pass ended, in seconds since the epoch.",
				Samples: []Sample{{Value: unix(r.lastReconcileAt)}},
			})
		}
	}
	for i := range fams {
		canonical(&fams[i])
	}
	return fams
}

// canonical orders a family as client_golang gathers it (labels by name, samples by label values),
// so the textfile and the listener print the same bytes in the same order.
func canonical(f *Family) {
	for _, s := range f.Samples {
		slices.SortFunc(s.Labels, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	}
	slices.SortStableFunc(f.Samples, func(a, b Sample) int {
		for i := range min(len(a.Labels), len(b.Labels)) {
			if c := strings.Compare(a.Labels[i][1], b.Labels[i][1]); c != 0 {
				return c
			}
		}
		return len(a.Labels) - len(b.Labels)
	})
}

// WriteText writes the Recorder's families in the Prometheus text exposition format (version
// 0.0.4), what node_exporter's textfile collector reads.
func (r *Recorder) WriteText(w io.Writer) error {
	var b strings.Builder
	for _, f := range r.Families() {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", f.Name, escapeHelp(f.Help), f.Name, f.Type)
		for _, s := range f.Samples {
			b.WriteString(f.Name)
			if len(s.Labels) > 0 {
				b.WriteByte('{')
				for i, l := range s.Labels {
					if i > 0 {
						b.WriteByte(',')
					}
					fmt.Fprintf(&b, "%s=\"%s\"", l[0], escapeLabel(l[1]))
				}
				b.WriteByte('}')
			}
			fmt.Fprintf(&b, " %s\n", formatValue(s.Value))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func unix(t time.Time) float64 { return float64(t.UnixMilli()) / 1000 }

func formatValue(v float64) string {
	if v == float64(int64(v)) && v < 1e15 && v > -1e15 {
		return fmt.Sprintf("%d", int64(v))
	}
	return fmt.Sprintf("%.3f", v)
}

// escapeLabel escapes a label value as the text format requires: backslash, double quote, newline.
func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

// escapeHelp escapes a HELP text: backslash and newline.
func escapeHelp(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(s)
}

// labelNames returns a family's label names (from its first sample; all samples share them).
func (f Family) labelNames() []string {
	if len(f.Samples) == 0 {
		return nil
	}
	var out []string
	for _, l := range f.Samples[0].Labels {
		out = append(out, l[0])
	}
	return slices.Clip(out)
}
