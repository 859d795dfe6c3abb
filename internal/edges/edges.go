// Package edges builds nodedns's edges: the integrations through which it reads and changes a live
// node beyond plain files (systemd-resolved over D-Bus, netlink, netplan's own validator and
// commands). New is the one place that lists them, the way one constructor picks a resolver
// mechanism per OS elsewhere: a newcomer finds every OS integration from that function and this
// folder. cmd/ parses flags and config and calls New; the pure core (policy, node, the leaf parsers)
// never sees an edge.
package edges

import (
	"errors"
	"io"
	"log/slog"

	"github.com/nodedns/nodedns/internal/cachenet"
	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/hostnet"
	"github.com/nodedns/nodedns/internal/live"
	"github.com/nodedns/nodedns/internal/reconcile"
	"github.com/nodedns/nodedns/internal/store"
	"github.com/nodedns/nodedns/probes"
)

// Edges is one run's node with its integrations wired in, the store of its files, the live probes
// of the self-check and the live event sources the daemon listens to: everything live a command
// needs, so cmd/ builds none of it. Close it when the run ends: it holds the D-Bus connection.
type Edges struct {
	Node *reconcile.Node
	// Store is the node's files (reads, atomic writes, backups, the state lock): the one the node,
	// the integrations, the probes' state and the metrics textfile share.
	Store *store.Store
	// Probes is the live host the self-check probes (netlink, nf_tables, DNS, /proc, its state
	// file); nil under --root, where only the file checks run.
	Probes *probes.Host
	// Events are the live change notices (`nodedns run` only); none under --root.
	Events []reconcile.EventSource

	closers []io.Closer
}

// New builds the node nodedns works on. root is "" or "/" for the live node, else a directory that
// is the node's / (--root: files only; sources, actors and event sources are not used there, but
// validators are). The integrations, in the order a pass uses them:
//
//   - sources (live only): the running kubelet's --config (/proc), systemd-resolved's live view over
//     D-Bus (when resolved is in use), NetworkManager's over D-Bus (where NM writes /etc/resolv.conf
//     or runs), the nodelocaldns interface's addresses and the default-route uplink over netlink,
//     networkd's DHCP leases over varlink (for links without a lease file: networkd 262 writes none);
//   - validators (everywhere): `netplan generate` on every planned netplan file; nodedns's
//     NetworkManager loader on zz-nodedns.conf, and (live) `NetworkManager --print-config`;
//   - actors (live only): systemd-resolved (restart, per-link DNS and domains; also the reverter
//     that puts per-link settings back on restore), NetworkManager (reload, read back; the
//     reverter that reloads NM after restore), the commands that make netplan and networkd
//     changes live, and the reverter that removes what the standby put back after node-cache's
//     teardown (cachenet);
//   - event sources (live only): the systemd-resolved and NetworkManager clients' signals;
//   - the self-check's live probes (live only): netlink, nf_tables, DNS queries, /proc.
func New(root string, cfg config.Config, log *slog.Logger) *Edges {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	st := reconcile.NewStore(root, nil, cfg)
	n := &reconcile.Node{Root: root, Config: cfg, Store: st, Log: log}
	e := &Edges{Node: n, Store: st}

	// resolved's and NM's own files (the link record, NM's backups) are the live node's: they act
	// only there.
	resolved := &Resolved{RestartCommand: cfg.Resolved.RestartCommand, Store: st, Log: log}
	nm := &NetworkManager{Store: st, Log: log}
	netlink := hostnet.New()

	n.Sources = []reconcile.Source{
		kubeletProcess{cfg: cfg, proc: "/proc", files: st, units: unitProcesses},
		resolved,
		nm,
		cacheInterface{ifname: cfg.NodeLocalDNS.Interface, net: netlink},
		uplink{net: netlink},
		networkdLeases{root: "/"},
	}
	n.Validators = []reconcile.Validator{netplanValidator{store: st}, nm}
	n.Actors = []reconcile.Actor{resolved, nm, commands{}, KubeletRestarter{Log: log}, cachenet.Reverter{Store: st}}
	if n.Live() {
		e.Events = []reconcile.EventSource{resolved, nm}
		e.Probes = live.New(cfg.Probes.Timeout, live.FileState{Store: st})
	}
	e.closers = []io.Closer{resolved, nm}
	return e
}

// Close ends the live connections (the resolved D-Bus client), so its goroutines end with the run
// rather than with the process.
func (e *Edges) Close() error {
	var errs []error
	for _, c := range e.closers {
		if err := c.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
