package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"reflect"
	"slices"
	"syscall"

	sddaemon "github.com/coreos/go-systemd/v22/daemon"
	"github.com/spf13/cobra"

	"github.com/nodedns/nodedns/config"
	"github.com/nodedns/nodedns/reconcile"
)

// eventSourceFactories are live change notices the daemon reacts to besides inotify (the resolved
// D-Bus client's signals). Integrations register them from an init() in a file of their own, like the
// factories in live.go. A registered Source or Actor that also implements reconcile.EventSource is
// used as one without registering it here. Live only: under --root none is used.
var eventSourceFactories []func(g *globals) reconcile.EventSource

func newRunCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "run",
		Short: "Run the daemon: apply, then watch and re-apply",
		Long: `Runs nodedns as a daemon (systemd Type=notify). It applies once at start, tells systemd it is ready
(READY=1, with a one-line STATUS= of the last pass), then watches the directories of every file it
reads or writes (/etc/resolv.conf and its symlink target, /run/systemd/resolve, the DHCP lease
directories, netplan, resolved's drop-in directories, the kubelet config and resolv.conf) and
re-applies when one of them changes: at once when the new content is complete, after it settles when
a file is missing, empty or half-written. A full pass also runs every daemon.resyncInterval (5m).

Another writer's content is new input. If another writer keeps replacing what nodedns wrote (more
than writers.backoffAfter times within writers.window), nodedns stops fighting over that file, says so
in the log, in STATUS= and in ` + "`nodedns check`" + `, and resumes once the other writer has left the file
alone for one window.

Signals: SIGTERM or SIGINT finish the write in progress and exit 0; SIGHUP reloads the config (an
invalid config is reported and the old one kept). WATCHDOG=1 is sent at half of WatchdogSec.
With --root DIR it watches and writes only files under DIR (how tests and benchmarks drive it).`,
		Example: `  nodedns run                                   # as the systemd service does
  nodedns --log-level debug run                 # log every event it judges
  systemctl reload nodedns                      # SIGHUP: re-read /etc/nodedns/config.yaml
  nodedns --root /tmp/node-copy run             # keep a copy of a node's files right`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDaemon(cmd, g)
		},
	}
}

func runDaemon(cmd *cobra.Command, g *globals) error {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	n := g.node()
	defer closeLive(g, n)

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	reloads := make(chan struct{}, 1)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case <-done:
				return
			case s := <-sigs:
				if s == syscall.SIGHUP {
					select {
					case reloads <- struct{}{}:
					default: // a reload is already queued
					}
					continue
				}
				cancel(errors.New("signal " + s.String()))
			}
		}
	}()

	d := &reconcile.Daemon{
		Node:    n,
		Events:  eventSources(g, n),
		Reloads: reloads,
		Reload: func() (config.Config, error) {
			if err := g.load(cmd); err != nil {
				return config.Config{}, err
			}
			n.Log = g.log
			return g.cfg, nil
		},
		Notify: func(state string) error {
			// unsetEnvironment false: every later STATUS= and WATCHDOG=1 needs NOTIFY_SOCKET.
			_, err := sddaemon.SdNotify(false, state)
			return err
		},
	}
	d.AfterPass = daemonMetrics(ctx, g)
	if iv, err := sddaemon.SdWatchdogEnabled(false); err != nil {
		g.log.Warn("watchdog settings unreadable; not sending WATCHDOG=1", "err", err)
	} else if iv > 0 {
		// systemd.service(5): ping at least every WatchdogSec; half of it leaves room for a slow pass.
		d.Watchdog = iv / 2
	}
	if err := d.Run(ctx); err != nil {
		return &exitError{1, err}
	}
	return nil
}

// eventSources collects the live event sources: the registered ones, and every Source or Actor that
// also emits events. Under --root there are none (no D-Bus).
func eventSources(g *globals, n *reconcile.Node) []reconcile.EventSource {
	if !n.Live() {
		return nil
	}
	var out []reconcile.EventSource
	var seen []any
	add := func(x any) {
		es, ok := x.(reconcile.EventSource)
		if !ok {
			return
		}
		// One client registered as Source, Actor and EventSource is one source of events.
		if t := reflect.TypeOf(x); t.Comparable() {
			if slices.Contains(seen, x) {
				return
			}
			seen = append(seen, x)
		}
		out = append(out, es)
	}
	for _, f := range eventSourceFactories {
		if es := f(g); es != nil {
			add(es)
		}
	}
	for _, s := range n.Sources {
		add(s)
	}
	for _, a := range n.Actors {
		add(a)
	}
	return out
}
