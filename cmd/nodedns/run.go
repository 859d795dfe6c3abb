package main

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/signal"
	"syscall"
	"time"

	sddaemon "github.com/coreos/go-systemd/v22/daemon"
	"github.com/spf13/cobra"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/metrics"
	"github.com/nodedns/nodedns/internal/reconcile"
)

func newRunCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "run",
		Short: "Run the daemon: apply, then watch and re-apply",
		Long: `Runs nodedns as a daemon (systemd Type=notify). It applies once at start, tells systemd it is ready
(READY=1, with a one-line STATUS= of the last pass), then watches the directories of every file it
reads or writes (/etc/resolv.conf and its symlink target, /run/systemd/resolve, the DHCP lease
directories, netplan, resolved's drop-in directories, NetworkManager's conf.d, profiles and device
state, the kubelet config and resolv.conf) and re-applies when one of them changes: at once when the
new content is complete, after it settles when a file is missing, empty or half-written. It also
re-applies on systemd-resolved's and NetworkManager's D-Bus signals (a restart, a DHCP renewal with
new options). A full pass also runs every daemon.resyncInterval (5m).

Another writer's content is new input. If another writer keeps replacing what nodedns wrote (more
than writers.backoffAfter times within writers.window), nodedns stops fighting over that file, says so
in the log, in STATUS= and in ` + "`nodedns check`" + `, and resumes once the other writer has left the file
alone for one window.

With nodeLocalDNS.standby: on, it also stands in for the node-local cache while no cache listens on
a cache address (crashed, OOM-killed, between restarts) or the cache holds it and answers nothing
(hung): it answers there, forwarding the cluster domain and reverse zones to the cluster DNS and
everything else to the node's upstreams, and gives the address back once the cache answers again.
When node-cache's teardown (SIGTERM: a rolling update, an eviction) removes its interface while
kubelet still hands the address to pods, it puts back the interface, the address and node-cache's
rules as they were, for the replacement to find (nodedns check: nodelocaldns.standby; nodedns
restore removes what the replacement has not taken over).

Signals: SIGTERM or SIGINT finish the write in progress and exit 0 (a pass still waiting for the
state lock is dropped); SIGHUP reloads the config (an invalid config is reported and the old one kept). WATCHDOG=1 is sent at half of WatchdogSec.
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
	e := g.edges()
	n := e.Node
	defer func() {
		if err := e.Close(); err != nil {
			g.log.Warn("closing a live connection failed", "err", err)
		}
	}()
	if euid() != 0 {
		// A user other than root under --root (requireRoot): a state directory this user cannot
		// write would postpone every pass, waiting for a lock it can never take. Say so at once
		// (rootNeeded); a lock another nodedns holds is the daemon's to wait for.
		release, err := n.Hold(time.Second)
		if err == nil {
			release()
		} else if errors.Is(err, fs.ErrPermission) {
			return &exitError{1, err}
		}
	}

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
		Events:  e.Events,
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
	var rec *metrics.Recorder
	d.AfterPass, rec = daemonMetrics(ctx, g, e.Store)
	if iv, err := sddaemon.SdWatchdogEnabled(false); err != nil {
		g.log.Warn("watchdog settings unreadable; not sending WATCHDOG=1", "err", err)
	} else if iv > 0 {
		// systemd.service(5): ping at least every WatchdogSec; half of it leaves room for a slow pass.
		d.Watchdog = iv / 2
	}
	defer startStandby(ctx, g, rec, e.Store)()
	if err := d.Run(ctx); err != nil {
		return &exitError{1, err}
	}
	return nil
}
