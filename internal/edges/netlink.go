package edges

import (
	"context"
	"fmt"

	"github.com/nodedns/nodedns/internal/hostnet"
	"github.com/nodedns/nodedns/internal/node"
)

// cacheInterface fills Snapshot.CacheInterfaceAddrs from netlink: the addresses on the nodelocaldns
// interface are cache addresses (docs/contract.md "Words"), so a cache listening on an address
// nobody configured is still kept out of every upstream.
type cacheInterface struct {
	ifname string
	net    hostnet.Reader
}

func (c cacheInterface) Name() string { return "netlink " + c.ifname }

func (c cacheInterface) Observe(_ context.Context, s *node.Snapshot) error {
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

// uplink reads the default-route interface and its IPv4 addresses, so a netplan pin takes the
// addressing the node really has (a lease file can be stale).
type uplink struct{ net hostnet.Reader }

func (uplink) Name() string { return "netlink uplink" }

func (u uplink) Observe(_ context.Context, s *node.Snapshot) error {
	up, err := u.net.Uplink()
	if err != nil || up == nil {
		return err
	}
	s.Uplink = &node.Uplink{IfName: up.IfName, IfIndex: up.IfIndex, Gateway: up.Gateway, Addrs: up.Addrs}
	return nil
}
