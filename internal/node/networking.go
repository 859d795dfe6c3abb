package node

import (
	"bufio"
	"bytes"
	"net/netip"
	"path"
	"strings"

	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/netplan"
)

// NetworkdDropInName is the file nodedns puts in a .network file's drop-in directory
// (/etc/systemd/network/<name>.network.d/) on nodes that run systemd-networkd without netplan.
const NetworkdDropInName = "nodedns.conf"

// networkDirs are systemd-networkd's .network directories, highest priority first
// (systemd.network(5), 252): a file shadows same-named files in later directories.
var networkDirs = []string{"/etc/systemd/network", "/run/systemd/network", "/usr/local/lib/systemd/network", "/lib/systemd/network", "/usr/lib/systemd/network"}

// NetworkdNetwork is a systemd-networkd .network file that turns DHCP on.
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

func (s *Snapshot) readNetworkd(r nodefs.Reader) []NetworkdNetwork {
	inUse := map[string]bool{}
	for _, l := range s.Links {
		if l.NetworkFile != "" {
			inUse[path.Clean(l.NetworkFile)] = true
		}
	}
	found, errs := nodefs.DropIns(r, networkDirs, ".network")
	for _, err := range errs {
		s.problem(SourceNetworkd, "", 0, err.Error())
	}
	var out []NetworkdNetwork
	for _, d := range found {
		dir := path.Dir(d.Path)
		// netplan renders its own files into /run/systemd/network: those are changed through
		// netplan, never with a drop-in.
		if strings.HasPrefix(d.Name, "10-netplan-") && dir == "/run/systemd/network" {
			continue
		}
		// Vendor files (/lib: container host0, ...) count only when a link actually uses them.
		if !inUse[d.Path] && dir != "/etc/systemd/network" && dir != "/run/systemd/network" {
			continue
		}
		data, err := r.ReadFile(d.Path, nodefs.Config)
		if err != nil {
			s.problem(SourceNetworkd, d.Path, 0, err.Error())
			continue
		}
		n := ParseNetworkFile(d.Path, data)
		if !n.DHCP4 && !n.DHCP6 {
			continue
		}
		n.DropIn = s.readManaged(r, NetworkdDropIn(d.Path))
		out = append(out, n)
	}
	return out
}

// NetworkdDropIn is the node path of nodedns's drop-in for a .network file.
func NetworkdDropIn(networkFile string) string {
	return path.Join("/etc/systemd/network", path.Base(networkFile)+".d", NetworkdDropInName)
}

// ParseNetworkFile reads the keys nodedns needs from a .network file: [Match] Name= and
// [Network] DHCP=. systemd's unit-file syntax (systemd.syntax(7)): comments start with # or ;,
// a line ending in a backslash continues, later assignments win, an empty Name= resets the list.
// Anything it does not understand is ignored, as networkd ignores unknown keys with a warning.
func ParseNetworkFile(p string, data []byte) NetworkdNetwork {
	n := NetworkdNetwork{Path: p}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), maxConfigSize)
	var cont strings.Builder
	for sc.Scan() {
		line := sc.Text()
		if cont.Len() > 0 {
			line = cont.String() + " " + strings.TrimSpace(line)
			cont.Reset()
		}
		t := strings.TrimSpace(line)
		if strings.HasSuffix(t, "\\") {
			cont.WriteString(strings.TrimSuffix(t, "\\"))
			continue
		}
		if t == "" || t[0] == '#' || t[0] == ';' {
			continue
		}
		if t[0] == '[' && strings.HasSuffix(t, "]") {
			section = t[1 : len(t)-1]
			continue
		}
		k, v, ok := strings.Cut(t, "=")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case section == "Match" && k == "Name":
			if v == "" {
				n.MatchNames = nil
				continue
			}
			n.MatchNames = append(n.MatchNames, strings.Fields(v)...)
		case section == "Network" && k == "DHCP":
			// systemd 252 network-util.c: yes/true/both and the booleans, ipv4, ipv6.
			switch strings.ToLower(v) {
			case "yes", "true", "on", "1", "y", "t", "both":
				n.DHCP4, n.DHCP6 = true, true
			case "ipv4":
				n.DHCP4, n.DHCP6 = true, false
			case "ipv6":
				n.DHCP4, n.DHCP6 = false, true
			default:
				n.DHCP4, n.DHCP6 = false, false
			}
		}
	}
	return n
}
