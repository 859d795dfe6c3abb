package node

import (
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/nodedns/nodedns/internal/statefile"

	"github.com/nodedns/nodedns/internal/networkmanager"
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/internal/store/manifest"
)

// SourceNetworkManager is a NetworkManager file nodedns could not use: a configuration NM refuses,
// a keyfile or a device state file that does not parse.
const SourceNetworkManager Source = "NetworkManager"

// NetworkManager is what nodedns knows of NetworkManager on the node (docs/contract.md "What nodedns
// manages", NetworkManager): its configuration as NM 1.42 merges it, its connection profiles, and
// what DHCP handed its devices. Observe reads it from files; on the live node the edges'
// NetworkManager source adds NM's own view over D-Bus (Live, and Devices from DHCP4Config and
// DHCP6Config).
type NetworkManager struct {
	// OwnsResolvConf: NetworkManager writes /etc/resolv.conf (its header on the first line, or a
	// symlink into /run/NetworkManager); Why says how nodedns told, for the decision log.
	OwnsResolvConf bool
	Why            string
	// RunDir: /run/NetworkManager exists (NM runs, or ran since boot).
	RunDir bool

	// Config is NM's configuration with every file; Others without zz-nodedns.conf (what the rest
	// of the node asks for); Persistent without /run/NetworkManager/conf.d (what the next boot
	// reads). Each is nil when NM would refuse it, with the reason in its Err (a
	// *networkmanager.ParseError for a file GKeyFile cannot parse).
	Config, Others, Persistent          *networkmanager.Config
	ConfigErr, OthersErr, PersistentErr error
	// Override is nodedns's own zz-nodedns.conf.
	Override Managed

	// Connections are the keyfile profiles (nil when none could be listed).
	Connections *networkmanager.Connections
	// Devices are the devices DHCP configured, by ifindex: from /run/NetworkManager/devices/IFINDEX,
	// replaced by NM's answer over D-Bus on the live node.
	Devices []NMDevice

	// Live is NM's own view over D-Bus: nil under --root, when NM does not run, or when it could not
	// be asked.
	Live *NMLive
}

// NMDevice is what DHCP handed one NetworkManager device: read from its state file
// (networkmanager.Load), or over D-Bus on the live node.
type NMDevice = networkmanager.Device

// NMLive is what NetworkManager says over D-Bus.
type NMLive struct {
	Version string
	// GlobalDNS is Manager.GlobalDnsConfiguration: what NM uses now (from a config file or set
	// over D-Bus), nil when it has none. It can differ from the files until NM reloads them.
	GlobalDNS *networkmanager.GlobalDNS
	// DNSMode and RcManager are the DnsManager's Mode ("default", "dnsmasq", "systemd-resolved",
	// "none") and RcManager ("file", "symlink", "unmanaged", ...).
	DNSMode, RcManager string
}

// InUse reports whether NetworkManager is the node's network manager: it wrote /etc/resolv.conf,
// or it answers on the bus (live).
func (n *NetworkManager) InUse() bool { return n.OwnsResolvConf || n.Live != nil }

// DHCPDevices lists the devices whose DHCP handed out any DNS server or search domain.
func (n *NetworkManager) DHCPDevices() []NMDevice {
	var out []NMDevice
	for _, d := range n.Devices {
		if len(d.DHCP4.Servers)+len(d.DHCP6.Servers)+len(d.DHCP4.Domains())+len(d.DHCP6.Domains()) > 0 {
			out = append(out, d)
		}
	}
	return out
}

// NMOwnsResolvConf reports whether NetworkManager writes /etc/resolv.conf, so nodedns must never
// edit it (NM rewrites it on every reload or restart: a write war) and fixes NM instead: NM's
// header or symlink, or NM on the bus saying it writes the file itself (DNS mode default or
// dnsmasq, rc-manager file) while the file is not systemd-resolved's. With rc-manager symlink NM
// 1.42 leaves a regular /etc/resolv.conf alone (it writes only /run/NetworkManager/resolv.conf),
// and with resolvconf or netconfig another program writes the file: the symlink or the header
// tells those apart.
func (s *Snapshot) NMOwnsResolvConf() bool {
	n := &s.NetworkManager
	if n.OwnsResolvConf {
		return true
	}
	if n.Live == nil || s.ResolvConfManagedByResolved() {
		return false
	}
	return (n.Live.DNSMode == "default" || n.Live.DNSMode == "dnsmasq") && n.Live.RcManager == "file"
}

// judgeNMResolvConf says whether /etc/resolv.conf is NetworkManager's, from the snapshot's
// ResolvConf alone (no read).
func (s *Snapshot) judgeNMResolvConf() {
	n := &s.NetworkManager
	rc := s.ResolvConf
	target := ""
	if rc.Symlink {
		target = rc.Target
	}
	n.OwnsResolvConf, n.Why = false, ""
	if rc.Exists || rc.Symlink {
		n.OwnsResolvConf, n.Why = networkmanager.ResolvConfByNM(target, rc.Data)
	} else {
		n.Why = "/etc/resolv.conf is missing"
	}
}

// readNetworkManagerFiles reads NetworkManager's files (networkmanager.Load, with the intern file as
// nodedns backed it up) and nodedns's own zz-nodedns.conf.
func (s *Snapshot) readNetworkManagerFiles(r nodefs.Reader) {
	f, ps := networkmanager.Load(r, func(p string) ([]byte, bool) { return readBackup(r, p) })
	problems(s, SourceNetworkManager, ps)
	n := &s.NetworkManager
	n.RunDir = f.RunDir
	n.Config, n.Others, n.Persistent = f.Config, f.Others, f.Persistent
	n.ConfigErr, n.OthersErr, n.PersistentErr = f.ConfigErr, f.OthersErr, f.PersistentErr
	n.Connections, n.Devices = f.Connections, f.Devices
	n.Override = s.readManagedKind(r, networkmanager.NodeDNSConfPath, networkmanager.FileKind)
}

// BackupDir is where nodedns keeps its one-time backups (internal/store: the manifest and one copy per
// content, named by its SHA-256).
const BackupDir = nodefs.DefaultStateDir + "/backup"

// readBackup returns the bytes nodedns backed up for node path p before its first change, when it
// backed up a file there.
func readBackup(r nodefs.Reader, p string) ([]byte, bool) {
	mp := path.Join(BackupDir, manifest.Name)
	data, err := r.ReadFile(mp, nodefs.State)
	if err != nil {
		return nil, false
	}
	entries, err := manifest.Parse(mp, data)
	if err != nil {
		return nil, false
	}
	for _, e := range entries {
		if e.Path == p && e.Kind == manifest.KindFile {
			data, err := r.ReadFile(path.Join(BackupDir, e.SHA256), networkmanager.FileKind)
			return data, err == nil
		}
	}
	return nil, false
}

// readStateRecord reads one of nodedns's own JSON records in its state directory, only when nobody
// else could have written it (nodefs.CheckState): an untrusted record is a problem, and read as not
// there (Err set).
func (s *Snapshot) readStateRecord(r nodefs.Reader, p string) Managed {
	if err := nodefs.CheckState(r, p); err != nil {
		s.problem(SourceManaged, p, 0, err.Error())
		return Managed{Path: p, Exists: true, Err: err}
	}
	return s.readManagedKind(r, p, statefile.Kind)
}

// readManagedKind is readManaged with the size bound of the file's own kind.
func (s *Snapshot) readManagedKind(r nodefs.Reader, p string, k nodefs.Kind) Managed {
	m := Managed{Path: p}
	data, err := r.ReadFile(p, k)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		m.Exists, m.Err = true, err
		s.problem(SourceManaged, p, 0, err.Error())
	default:
		m.Exists, m.Data = true, data
	}
	return m
}

// NMGlobalDNSSource names where the global DNS configuration NM uses comes from, for messages: the
// file and line of its "*" servers, or "set over D-Bus" (stored in NetworkManager-intern.conf).
func NMGlobalDNSSource(g *networkmanager.GlobalDNS) string {
	if g == nil {
		return ""
	}
	star, ok := g.Domain("*")
	switch {
	case g.Internal:
		return fmt.Sprintf("a global DNS configuration set over D-Bus (stored in %s)", networkmanager.InternConfPath)
	case ok && star.ServersFrom.Path != "":
		return fmt.Sprintf("[global-dns-domain-*] servers= in %s", star.ServersFrom)
	}
	return "NetworkManager's global DNS configuration"
}
