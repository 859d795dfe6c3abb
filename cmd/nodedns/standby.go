package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/nodedns/nodedns/internal/cachenet"
	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/kubelet"
	"github.com/nodedns/nodedns/internal/live"
	"github.com/nodedns/nodedns/internal/metrics"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/internal/policy"
	"github.com/nodedns/nodedns/internal/standby"
	"github.com/nodedns/nodedns/internal/store"
)

// startStandby runs the standby beside the daemon when nodeLocalDNS.standby is on, on a live node
// (docs/contract.md "Standby"); the returned function stops it and waits for its sockets to close.
// It reads the node's files on its own (node.Observe through the run's store, no live source), so it
// never shares the daemon's D-Bus clients.
func startStandby(ctx context.Context, g *globals, rec *metrics.Recorder, st *store.Store) func() {
	cfg := g.cfg
	if !cfg.NodeLocalDNS.Standby || (g.root != "" && g.root != "/") {
		return func() {}
	}
	r := st // the run's node store (edges.New): reads for the facts, writes for the state
	facts := func() (*node.Snapshot, policy.Facts) {
		s := node.Observe(r, cfg, time.Now())
		return s, policy.Derive(s, cfg)
	}
	s, f := facts()
	_, ifaceErr := net.InterfaceByName(cfg.NodeLocalDNS.Interface)
	mode := policy.ResolveCacheMode(cfg, s, ifaceErr == nil)
	sb := &standby.Standby{
		Addrs: cacheAddrs(cfg, f),
		Inputs: func() (standby.Inputs, error) {
			_, f := facts()
			return standby.Inputs{CacheAddrs: f.CacheAddrs, ClusterDomain: f.ClusterDomain, ClusterDNS: cfg.ClusterDNS, Upstreams: f.Upstreams}, nil
		},
		// The cache is the process that holds the cache address's socket (sock_diag's inode, in
		// this namespace, owned by its user), never one that is only named like a cache; where the
		// kernel hides which process holds it (the unit has no ptrace access), the likely holders
		// (live.FindCacheHolders), whose Corefile is not readable either.
		FindCache: func(addrs []netip.Addr) *standby.Cache {
			cp, holders := live.FindCacheHolders("/proc", addrs)
			if len(holders) == 0 {
				return nil
			}
			if cp == nil {
				return &standby.Cache{PID: holders[0], PIDs: holders, Likely: true}
			}
			c := &standby.Cache{PID: cp.PID, PIDs: holders}
			for _, fw := range cp.Forwards {
				c.Forwards = append(c.Forwards, standby.Forward{Zones: fw.Zones, From: fw.From, To: fw.To})
			}
			return c
		},
		Resync: cfg.Daemon.ResyncInterval,
		// Trusted state only: the file carries the cluster DNS the cache's Corefile named, where the
		// standby forwards the cluster's zones.
		LoadState: func() ([]byte, error) { return st.ReadState(standby.StatePath, nodefs.State) },
		SaveState: func(data []byte) error { _, err := st.Write(standby.StatePath, data, 0o644); return err },
		Log:       g.log.With("component", "standby"),
		// node-cache's teardown covered (docs/contract.md "Standby"): its interface, addresses and
		// rules put back while kubelet hands the address to pods, recorded for restore.
		Interface:  cfg.NodeLocalDNS.Interface,
		HandsOut:   func() ([]netip.Addr, error) { return kubeletClusterDNS(r, cfg) },
		LoadRecord: func() ([]byte, error) { return r.ReadState(cachenet.RecordPath, nodefs.State) },
		SaveRecord: func(data []byte) error {
			if data == nil {
				return st.Remove(cachenet.RecordPath)
			}
			_, err := st.Write(cachenet.RecordPath, data, 0o644)
			return err
		},
	}
	if rec != nil {
		rec.StandbyEnabled()
		sb.Metrics = rec
	}
	if !mode.Interface() {
		g.log.Warn("nodeLocalDNS.standby is on, but the cache does not run on an interface of its own; standby off", "mode", mode.String())
		sb.NotInterfaceMode(mode.String())
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { sb.Run(ctx, os.Getpid()) })
	g.log.Info("standby watching the node-local cache", "addrs", sb.Addrs)
	return func() { cancel(); wg.Wait() }
}

// kubeletClusterDNS is kubelet's clusterDNS as the node's other readers have it (docs/contract.md
// "Kubelet's config"): the running kubelet's --config first, else the files; read at the moment the
// cache's interface goes, since it decides whether the address is put back.
func kubeletClusterDNS(r *store.Store, cfg config.Config) ([]netip.Addr, error) {
	found, _, _ := kubelet.Find(r, cfg)
	if cfg.Kubelet.Config == "" || cfg.Kubelet.Config == config.KubeletConfigAuto {
		// Only a kubelet the kernel says is root's counts (kubelet.FindProcess); without systemd's
		// MainPIDs at hand the newest of root's kubelets is taken, as the daemon's own pass does.
		if scan, err := kubelet.FindProcess("/proc", nil); err == nil && scan.OK {
			found = kubelet.Complete(r, scan.Found)
		}
	}
	k := kubelet.Load(r, found)
	if k.Err != nil {
		return nil, k.Err
	}
	if k.Path == "" {
		return nil, fmt.Errorf("no kubelet config found (%s)", found.How)
	}
	return k.ClusterDNS, nil
}

// cacheAddrs are the addresses the standby covers: config nodeLocalDNS.addresses, else the cache
// interface's own (IPv6 link-local left out: docs/contract.md "Cache addresses"), else what policy
// derived.
func cacheAddrs(cfg config.Config, f policy.Facts) []netip.Addr {
	if len(cfg.NodeLocalDNS.Addresses) > 0 {
		return cfg.NodeLocalDNS.Addresses
	}
	var out []netip.Addr
	if ifc, err := net.InterfaceByName(cfg.NodeLocalDNS.Interface); err == nil {
		as, _ := ifc.Addrs()
		for _, a := range as {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok && !policy.KernelMade(ip.Unmap()) && !slices.Contains(out, ip.Unmap()) {
					out = append(out, ip.Unmap())
				}
			}
		}
	}
	if len(out) > 0 {
		return out
	}
	return f.CacheAddrs
}
