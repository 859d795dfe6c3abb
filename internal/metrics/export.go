package metrics

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"path"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/store"
)

// ChecksTextfile is the file the one-shot `nodedns check` writes next to the daemon's textfile
// (nodedns.prom -> nodedns_check.prom): two processes never rewrite each other's file, and the
// `source` label keeps their series apart.
// It is config.ChecksTextfile: the config's path validation knows the file too.
func ChecksTextfile(textfile string) string { return config.ChecksTextfile(textfile) }

// ErrNoCollectorDir says the textfile's directory does not exist: node_exporter's textfile collector
// is not set up on this node, and nodedns does not create it.
var ErrNoCollectorDir = errors.New("textfile collector directory does not exist")

// WriteTextfile writes r to the node path textfile through st (atomic: temp file, fsync, rename; the
// first write is recorded so `nodedns restore` removes the file). Mode 0644: node_exporter usually
// runs as its own user. A missing directory is ErrNoCollectorDir and nothing is written.
func WriteTextfile(st *store.Store, textfile string, r *Recorder) error {
	if textfile == "" {
		return nil
	}
	// One lookup, resolved inside the root (confined under --root): the daemon asks after every pass.
	if fi, err := st.Stat(path.Dir(textfile)); err != nil || !fi.IsDir() {
		if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return fmt.Errorf("write metrics %s: %w", textfile, err)
		}
		return fmt.Errorf("write metrics %s: %w", textfile, ErrNoCollectorDir)
	}
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		return fmt.Errorf("write metrics %s: %w", textfile, err)
	}
	if _, err := st.Write(textfile, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write metrics: %w", err)
	}
	return nil
}

// Collector returns a client_golang collector that exports r's families as they are at each scrape.
func (r *Recorder) Collector() prometheus.Collector { return collector{r} }

type collector struct{ r *Recorder }

// Describe sends nothing: the collector is unchecked, because its label sets (checks, backoff
// targets) are only known at scrape time.
func (collector) Describe(chan<- *prometheus.Desc) {}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	for _, f := range c.r.Families() {
		desc := prometheus.NewDesc(f.Name, f.Help, f.labelNames(), nil)
		vt := prometheus.GaugeValue
		if f.Type == "counter" {
			vt = prometheus.CounterValue
		}
		for _, s := range f.Samples {
			vals := make([]string, len(s.Labels))
			for i, l := range s.Labels {
				vals[i] = l[1]
			}
			m, err := prometheus.NewConstMetric(desc, vt, s.Value, vals...)
			if err != nil {
				ch <- prometheus.NewInvalidMetric(desc, err)
				continue
			}
			ch <- m
		}
	}
}

// Handler serves r (and nothing else: no Go runtime metrics, so the listener shows nodedns's state
// only) in the format the scraper asks for.
func Handler(r *Recorder) http.Handler {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(r.Collector())
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Serve listens on addr (config metrics.listen; "" returns at once without opening a socket) and
// serves /metrics until ctx ends. It returns once listening has started or failed; the server stops
// when ctx is done.
func Serve(ctx context.Context, addr string, r *Recorder, log *slog.Logger) (net.Addr, error) {
	if addr == "" {
		return nil, nil
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", Handler(r))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && log != nil {
			log.Error("metrics listener stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
	if log != nil {
		log.Info("metrics listener", "addr", ln.Addr().String(), "path", "/metrics")
	}
	return ln.Addr(), nil
}
