package config

import (
	"fmt"
	"net/netip"
	"slices"
)

// Well-known NodeLocal DNSCache listen addresses: kubespray's default and the Kubernetes docs' one.
// They are loop addresses whatever the config says (docs/contract.md "Upstreams").
var (
	KubesprayCache = netip.MustParseAddr("169.254.25.10")
	DocsCache      = netip.MustParseAddr("169.254.20.10")
)

// validateUpstreams refuses a configured upstream that the config itself shows to be a loop
// address: nodedns would drop it (docs/contract.md "Upstreams": always minus loop addresses), and an
// operator who wrote it should hear so at once rather than find it ignored. Loop addresses known
// only on the node (kubelet's clusterDNS, the cache interface's addresses) are reported by check.
func validateUpstreams(c Config) error {
	for _, a := range c.Upstreams {
		u := a.WithZone("").Unmap()
		var why string
		switch {
		case u.IsLoopback():
			why = "a loopback address: pods that inherit the node's resolv.conf (dnsPolicy Default) would ask themselves, and a local stub forwards back through the host"
		case u == KubesprayCache || u == DocsCache || slices.Contains(c.NodeLocalDNS.Addresses, u):
			why = "the node-local cache's address: the cache would forward to itself"
		case slices.Contains(c.ClusterDNS, u):
			why = "the cluster DNS service (clusterDNS): the cluster DNS forwards its external names to the node's upstreams, which would loop"
		case u.IsUnspecified():
			why = "the unspecified address"
		}
		if why != "" {
			return &Error{Key: "upstreams", Value: a.String(), Err: fmt.Errorf("%s; name a real resolver outside the cluster", why)}
		}
	}
	return nil
}
