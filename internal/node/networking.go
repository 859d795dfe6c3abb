package node

import (
	"net/netip"
	"path"

	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/netplan"
	"github.com/nodedns/nodedns/systemd"
)

// NetworkdDropInName is the file nodedns puts in a .network file's drop-in directory
// (/etc/systemd/network/<name>.network.d/) on nodes that run systemd-networkd without netplan.
const NetworkdDropInName = "nodedns.conf"

// NetworkdNetwork is a systemd-networkd .network file that turns DHCP on (systemd.Network), with
// nodedns's drop-in for it.
type NetworkdNetwork struct {
	Path         string   // node path of the .network file
	MatchNames   []string // [Match] Name= values
	DHCP4, DHCP6 bool     // [Network] DHCP=
	// DropIn is nodedns's drop-in for it: /etc/systemd/network/<name>.d/nodedns.conf.
	DropIn Managed
}

// Uplink is the interface carrying the default route, as the live node (netlink) shows it.
type Uplink struct {
	IfName  string
	IfIndex int
	Gateway netip.Addr
	// Addrs are the link's IPv4 addresses with their prefix lengths.
	Addrs []netip.Prefix
}

// readNetworking fills the netplan and networkd parts of the snapshot that the netplan integration
// needs beyond Netplan: the configuration without nodedns's own file, that file, and the networkd
// DHCP networks.
func (s *Snapshot) readNetworking(r nodefs.Reader, others *netplan.Config, err error) {
	s.NetplanOwn = s.readManaged(r, netplan.NodednsFile)
	if err != nil {
		if s.Netplan != nil {
			// Only nodedns's own file is broken: the rest of the tree still decides.
			s.problem(SourceNetplan, netplan.NodednsFile, 0, err.Error())
		}
	} else {
		s.NetplanOthers = others
	}
	s.Networkd = s.readNetworkd(r)
}

// readNetworkd reads networkd's .network files that turn DHCP on (systemd.LoadNetworks: vendor files
// only when a link uses them) and nodedns's drop-in for each.
func (s *Snapshot) readNetworkd(r nodefs.Reader) []NetworkdNetwork {
	found, warns := systemd.LoadNetworks(r, s.Links)
	problems(s, SourceNetworkd, warns)
	var out []NetworkdNetwork
	for _, n := range found {
		out = append(out, NetworkdNetwork{Path: n.Path, MatchNames: n.MatchNames, DHCP4: n.DHCP4, DHCP6: n.DHCP6,
			DropIn: s.readManaged(r, NetworkdDropIn(n.Path))})
	}
	return out
}

// NetworkdDropIn is the node path of nodedns's drop-in for a .network file.
func NetworkdDropIn(networkFile string) string {
	return path.Join("/etc/systemd/network", path.Base(networkFile)+".d", NetworkdDropInName)
}
