package main

import (
	"context"
	"fmt"

	"github.com/nodedns/nodedns/node"
	"github.com/nodedns/nodedns/probes"
	"github.com/nodedns/nodedns/reconcile"
)

// The addresses on the nodelocaldns interface are cache addresses (design.md "Words"): a node whose
// cache listens on an address nobody configured must still keep that address out of every upstream.
func init() {
	sourceFactories = append(sourceFactories, func(g *globals) reconcile.Source {
		return cacheIfaceSource{ifname: g.cfg.NodeLocalDNS.Interface, net: probes.NewNetlinkReader()}
	})
}

// cacheIfaceSource fills Snapshot.CacheInterfaceAddrs from netlink (live node only).
type cacheIfaceSource struct {
	ifname string
	net    probes.NetReader
}

func (c cacheIfaceSource) Name() string { return "netlink " + c.ifname }

func (c cacheIfaceSource) Observe(_ context.Context, s *node.Snapshot) error {
	l, err := c.net.Link(c.ifname)
	if err != nil {
		return fmt.Errorf("read %s: %w", c.ifname, err)
	}
	if l == nil {
		return nil // no cache interface (yet): the config and kubelet's clusterDNS still name the cache
	}
	for _, p := range l.Addrs {
		s.CacheInterfaceAddrs = append(s.CacheInterfaceAddrs, p.Addr())
	}
	return nil
}
