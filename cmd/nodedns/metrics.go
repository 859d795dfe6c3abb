package main

import (
	"context"
	"errors"
	"runtime/debug"

	"github.com/nodedns/nodedns/internal/metrics"
	"github.com/nodedns/nodedns/internal/reconcile"
	"github.com/nodedns/nodedns/internal/store"
	"github.com/nodedns/nodedns/probes"
)

// writeCheckMetrics exports one check run's per-check status to node_exporter's textfile collector
// (metrics.ChecksTextfile of metrics.textfile, under --root when given). node-problem-detector runs
// `nodedns check --npd` every minute, which keeps the file fresh. A node without the collector
// directory gets no file; a failed write is logged and never changes check's exit code (the check
// answered; only its report to Prometheus failed). st is the run's node store (edges.New).
func writeCheckMetrics(g *globals, st *store.Store, rep probes.Report) {
	path := metrics.ChecksTextfile(g.cfg.Metrics.Textfile)
	if path == "" {
		return
	}
	r := metrics.NewRecorder(metrics.SourceCheck, versionString())
	cs := make([]metrics.Check, 0, len(rep.Checks))
	for _, c := range rep.Checks {
		cs = append(cs, metrics.Check{ID: c.ID, Status: string(c.Status)})
	}
	r.ObserveChecks(cs)
	err := metrics.WriteTextfile(st, path, r)
	switch {
	case errors.Is(err, metrics.ErrNoCollectorDir):
		g.log.Debug("metrics textfile not written: no textfile collector directory", "path", path)
	case err != nil:
		g.log.Warn("metrics textfile not written", "path", path, "err", err)
	default:
		g.log.Debug("metrics textfile written", "path", path, "checks", len(cs))
	}
}

// versionString is the version `nodedns version` prints: the -X main.version stamp, else the module
// version of a `go install`ed binary.
func versionString() string {
	if version == "dev" {
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			return bi.Main.Version
		}
	}
	return version
}

// daemonMetrics sets up the daemon's reporting: one Recorder for the run, the optional /metrics
// listener (only when metrics.listen is set: no socket otherwise), and a textfile rewritten after
// every pass through st, the run's node store. It returns the hook the daemon calls after each pass,
// and the Recorder (the standby reports into it).
func daemonMetrics(ctx context.Context, g *globals, st *store.Store) (func(reconcile.Outcome, []string), *metrics.Recorder) {
	rec := metrics.NewRecorder(metrics.SourceRun, versionString())
	if addr, err := metrics.Serve(ctx, g.cfg.Metrics.Listen, rec, g.log); err != nil {
		g.log.Warn("metrics listener not started", "listen", g.cfg.Metrics.Listen, "err", err)
	} else if addr != nil {
		g.log.Info("metrics listener started", "addr", addr.String())
	}
	return func(o reconcile.Outcome, newBackoffs []string) {
		rec.Reconciled(len(o.Written)+len(o.Removed)+len(o.Done), o.Failed())
		for _, t := range newBackoffs {
			rec.WriterBackoff(t)
		}
		if path := g.cfg.Metrics.Textfile; path != "" {
			if err := metrics.WriteTextfile(st, path, rec); err != nil && !errors.Is(err, metrics.ErrNoCollectorDir) {
				g.log.Warn("metrics textfile not written", "path", path, "err", err)
			}
		}
	}, rec
}
