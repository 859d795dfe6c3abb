// Package bus is nodedns's D-Bus client of NetworkManager (org.freedesktop.NetworkManager, NM
// 1.42): devices and their DHCP options, the global DNS configuration, the DNS manager's view,
// Reload, connection settings, Reapply, and change notices. One private system-bus connection is
// owned by one goroutine, as systemd's resolved client does it; every call has a timeout; D-Bus
// errors are matched by name. The data types are networkmanager's (the file side), so what is read
// over the bus and what is read from files under --root compare directly.
package bus

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"github.com/nodedns/nodedns/internal/busconn"

	"github.com/godbus/dbus/v5"

	"github.com/nodedns/nodedns/internal/networkmanager"
)

// NetworkManager's D-Bus names (NM 1.42 D-Bus API reference).
const (
	// BusName is the well-known name NetworkManager owns on the system bus.
	BusName = "org.freedesktop.NetworkManager"

	nmPath         = dbus.ObjectPath("/org/freedesktop/NetworkManager")
	dnsManagerPath = dbus.ObjectPath("/org/freedesktop/NetworkManager/DnsManager")
	settingsPath   = dbus.ObjectPath("/org/freedesktop/NetworkManager/Settings")

	nmIface         = "org.freedesktop.NetworkManager"
	deviceIface     = "org.freedesktop.NetworkManager.Device"
	dhcp4Iface      = "org.freedesktop.NetworkManager.DHCP4Config"
	dhcp6Iface      = "org.freedesktop.NetworkManager.DHCP6Config"
	dnsManagerIface = "org.freedesktop.NetworkManager.DnsManager"
	settingsIface   = "org.freedesktop.NetworkManager.Settings"
	connectionIface = "org.freedesktop.NetworkManager.Settings.Connection"
	propsIface      = "org.freedesktop.DBus.Properties"
)

// D-Bus error names the client tells apart, by name, never by message text.
const (
	ErrNameServiceUnknown = busconn.ErrNameServiceUnknown
	ErrNameNameHasNoOwner = busconn.ErrNameNameHasNoOwner
	ErrNameUnknownObject  = busconn.ErrNameUnknownObject
	ErrNameUnknownMethod  = busconn.ErrNameUnknownMethod
	// ErrNameInvalidConnection: Settings.GetConnectionByUuid for a UUID NM does not know.
	ErrNameInvalidConnection = "org.freedesktop.NetworkManager.Settings.InvalidConnection"
	// ErrNamePermissionDenied is NM_MANAGER_ERROR_PERMISSION_DENIED. NM 1.42.4 answers it to a
	// write of GlobalDnsConfiguration while a config file sets global DNS ("Global DNS
	// configuration already set via configuration file"; measured), and to a caller it cannot
	// authorize.
	ErrNamePermissionDenied = "org.freedesktop.NetworkManager.PermissionDenied"
	// ErrNameNotActive: Device.Reapply on a device without an active connection.
	ErrNameNotActive = "org.freedesktop.NetworkManager.Device.NotActive"
)

// Errors the client returns; test them with errors.Is. Each stands for the D-Bus error names
// given, matched by name (busconn.Reply).
var (
	// ErrNotRunning: nobody owns org.freedesktop.NetworkManager.
	ErrNotRunning = busconn.Sentinel(errors.New("NetworkManager is not on the system bus"), ErrNameServiceUnknown, ErrNameNameHasNoOwner)
	// ErrGone: the object (a device, a DHCP config, a connection) went away.
	ErrGone = busconn.Sentinel(errors.New("NetworkManager object gone"), ErrNameUnknownObject, ErrNameInvalidConnection)
	// ErrDisconnected: no bus connection at the moment (the client keeps reconnecting).
	ErrDisconnected = busconn.ErrDisconnected
	// ErrClosed: the client was closed.
	ErrClosed = busconn.ErrClosed
)

// BusError is a D-Bus error reply kept by name; errors.Is matches ErrNotRunning and ErrGone.
type BusError = busconn.Reply

var busError = busconn.AsReply

// EventKind says what an Event is about.
type EventKind int

// Event kinds. Any event means "read again": the channel drops events when full.
const (
	// EventDHCPChanged: a DHCP4Config or DHCP6Config's Options changed (a renewal with new
	// options, a new lease), or a device got or lost one. Path names the object.
	EventDHCPChanged EventKind = iota + 1
	// EventDeviceState: a device changed state (Device.StateChanged). State is the new one.
	EventDeviceState
	// EventGlobalDNSChanged: Manager.GlobalDnsConfiguration changed (a Reload with a new conf.d,
	// or a write over D-Bus).
	EventGlobalDNSChanged
	// EventDNSChanged: DnsManager.Configuration changed (NM rewrote its DNS; resolv.conf may
	// have changed).
	EventDNSChanged
	// EventNMStarted and EventNMStopped: org.freedesktop.NetworkManager got or lost its owner.
	EventNMStarted
	EventNMStopped
	// EventBusLost and EventBusReconnected: the bus connection broke, and is back.
	EventBusLost
	EventBusReconnected
)

func (k EventKind) String() string {
	switch k {
	case EventDHCPChanged:
		return "dhcp-changed"
	case EventDeviceState:
		return "device-state"
	case EventGlobalDNSChanged:
		return "global-dns-changed"
	case EventDNSChanged:
		return "dns-changed"
	case EventNMStarted:
		return "nm-started"
	case EventNMStopped:
		return "nm-stopped"
	case EventBusLost:
		return "bus-lost"
	case EventBusReconnected:
		return "bus-reconnected"
	}
	return "unknown"
}

// Event is something that happened to NetworkManager or the bus.
type Event struct {
	Kind  EventKind
	Path  string
	State DeviceState // EventDeviceState
	Owner string      // EventNMStarted
	Err   error       // EventBusLost
}

// Options configure a Client: the bus address, the call timeout and the reconnect backoff
// (busconn.Options).
type Options = busconn.Options

// Client is a NetworkManager client on one private system-bus connection owned by one goroutine
// (busconn), which serves calls, turns signals into Events and reconnects with capped backoff when
// the bus goes away. Events, Close and NameOwner are busconn.Client's. Methods are safe for
// concurrent use.
type Client struct {
	*busconn.Client[Event]
	conn *busconn.Conn
}

// Dial connects to the system bus and starts the client's goroutine. The first connection must
// succeed; later losses are retried until Close.
func Dial(ctx context.Context, opts Options) (*Client, error) {
	shell, conn, err := busconn.DialClient(ctx, opts, busconn.Service[Event]{
		Name: BusName,
		Matches: [][]dbus.MatchOption{
			{dbus.WithMatchSender(BusName), dbus.WithMatchInterface(propsIface), dbus.WithMatchMember("PropertiesChanged"),
				dbus.WithMatchPathNamespace(nmPath)},
			{dbus.WithMatchSender(BusName), dbus.WithMatchInterface(deviceIface), dbus.WithMatchMember("StateChanged")},
		},
		Signal:  eventOf,
		Started: func(owner string) Event { return Event{Kind: EventNMStarted, Owner: owner} },
		Stopped: func() Event { return Event{Kind: EventNMStopped} },
		Lost:    func(err error) Event { return Event{Kind: EventBusLost, Err: err} },
		Back:    func() Event { return Event{Kind: EventBusReconnected} },
	})
	if err != nil {
		return nil, err
	}
	return &Client{Client: shell, conn: conn}, nil
}

// eventOf turns one of NetworkManager's signals into an event; signals nodedns does not act on
// give none (busconn.Client makes the owner changes events).
func eventOf(s *dbus.Signal) (Event, bool) {
	switch s.Name {
	case deviceIface + ".StateChanged":
		ev := Event{Kind: EventDeviceState, Path: string(s.Path)}
		if len(s.Body) > 0 {
			if st, ok := s.Body[0].(uint32); ok {
				ev.State = DeviceState(st)
			}
		}
		return ev, true
	case propsIface + ".PropertiesChanged":
		if len(s.Body) < 2 {
			return Event{}, false
		}
		iface, _ := s.Body[0].(string)
		changed, _ := s.Body[1].(map[string]dbus.Variant)
		var inval []string
		if len(s.Body) > 2 {
			inval, _ = s.Body[2].([]string)
		}
		has := func(p string) bool {
			_, ok := changed[p]
			for _, x := range inval {
				ok = ok || x == p
			}
			return ok
		}
		switch {
		case (iface == dhcp4Iface || iface == dhcp6Iface) && has("Options"):
			return Event{Kind: EventDHCPChanged, Path: string(s.Path)}, true
		case iface == deviceIface && (has("Dhcp4Config") || has("Dhcp6Config")):
			return Event{Kind: EventDHCPChanged, Path: string(s.Path)}, true
		case iface == nmIface && has("GlobalDnsConfiguration"):
			return Event{Kind: EventGlobalDNSChanged, Path: string(s.Path)}, true
		case iface == dnsManagerIface && has("Configuration"):
			return Event{Kind: EventDNSChanged, Path: string(s.Path)}, true
		}
	}
	return Event{}, false
}

func (c *Client) do(ctx context.Context, op string, fn func(ctx context.Context, conn *dbus.Conn) error) error {
	return c.conn.Do(ctx, op, fn)
}

func obj(conn *dbus.Conn, p dbus.ObjectPath) dbus.BusObject { return conn.Object(BusName, p) }

func getProp(ctx context.Context, conn *dbus.Conn, p dbus.ObjectPath, iface, name string) (dbus.Variant, error) {
	var v dbus.Variant
	err := obj(conn, p).CallWithContext(ctx, propsIface+".Get", 0, iface, name).Store(&v)
	return v, err
}

// Version returns NetworkManager's version ("1.42.4").
func (c *Client) Version(ctx context.Context) (string, error) {
	var v string
	err := c.do(ctx, "read NetworkManager's version", func(ctx context.Context, conn *dbus.Conn) error {
		p, err := getProp(ctx, conn, nmPath, nmIface, "Version")
		if err != nil {
			return err
		}
		return p.Store(&v)
	})
	return v, err
}

// WaitReady waits until org.freedesktop.NetworkManager has an owner other than old ("": any) that
// answers (its Version), or ctx ends. After a restart it tells the new NM from the old one.
func (c *Client) WaitReady(ctx context.Context, old string) error {
	return c.conn.WaitOwner(ctx, BusName, old, "NetworkManager", func(ctx context.Context) error {
		_, err := c.Version(ctx)
		return err
	})
}

// DeviceState is NMDeviceState.
type DeviceState uint32

// Device states nodedns tells apart (NMDeviceState).
const (
	DeviceStateUnknown      DeviceState = 0
	DeviceStateUnmanaged    DeviceState = 10
	DeviceStateUnavailable  DeviceState = 20
	DeviceStateDisconnected DeviceState = 30
	DeviceStateIPConfig     DeviceState = 70
	DeviceStateActivated    DeviceState = 100
	DeviceStateDeactivating DeviceState = 110
	DeviceStateFailed       DeviceState = 120
)

// Device is one NM device and its DHCP options (nil without a lease).
type Device struct {
	Path string
	// Interface is the device's name; IPInterface the one that carries its IP (differs for PPP
	// and some modems).
	Interface, IPInterface string
	// IfIndex is the Ifindex property where NM has one; NM 1.42.4 and 1.58.1 have none (0 here): map IPInterface to
	// an ifindex with netlink.
	IfIndex int
	State   DeviceState
	Managed bool
	// DHCP4 and DHCP6 are the Options of the device's DHCP4Config and DHCP6Config, by NM's option
	// names (networkmanager.DHCP4DNS reads them); nil when the device has none.
	DHCP4, DHCP6 map[string]string
}

// Devices lists NM's devices (GetDevices: the realized ones) with their DHCP options. A device
// that goes away while being read is skipped.
func (c *Client) Devices(ctx context.Context) ([]Device, error) {
	var out []Device
	err := c.do(ctx, "list NetworkManager's devices", func(ctx context.Context, conn *dbus.Conn) error {
		var paths []dbus.ObjectPath
		if err := obj(conn, nmPath).CallWithContext(ctx, nmIface+".GetDevices", 0).Store(&paths); err != nil {
			return err
		}
		out = out[:0]
		for _, p := range paths {
			d, err := readDevice(ctx, conn, p)
			if errors.Is(busError(err), ErrGone) {
				continue
			}
			if err != nil {
				return fmt.Errorf("device %s: %w", p, err)
			}
			out = append(out, d)
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, err
}

func readDevice(ctx context.Context, conn *dbus.Conn, p dbus.ObjectPath) (Device, error) {
	props, err := busconn.GetAll(ctx, conn, BusName, p, deviceIface)
	if err != nil {
		return Device{}, err
	}
	d := Device{Path: string(p), Interface: propValue[string](props, "Interface"), IPInterface: propValue[string](props, "IpInterface"),
		IfIndex: int(propValue[uint32](props, "Ifindex")) + int(propValue[int32](props, "Ifindex")), State: DeviceState(propValue[uint32](props, "State")),
		Managed: propValue[bool](props, "Managed")}
	for _, f := range []struct {
		prop, iface string
		dst         *map[string]string
	}{{"Dhcp4Config", dhcp4Iface, &d.DHCP4}, {"Dhcp6Config", dhcp6Iface, &d.DHCP6}} {
		cp := propValue[dbus.ObjectPath](props, f.prop)
		if cp == "/" || cp == "" {
			continue
		}
		v, err := getProp(ctx, conn, cp, f.iface, "Options")
		if errors.Is(busError(err), ErrGone) {
			continue // the lease went between the two reads
		}
		if err != nil {
			return d, fmt.Errorf("%s options: %w", f.prop, err)
		}
		if opts := decodeOptions(v); len(opts) > 0 {
			*f.dst = opts
		}
	}
	return d, nil
}

// propValue returns a property's value when it is there with type T, else T's zero value (a
// property an older NM lacks reads as unset; godbus panics storing a zero Variant).
func propValue[T any](props map[string]dbus.Variant, name string) T {
	v, _ := props[name].Value().(T)
	return v
}

// decodeOptions reads DHCP4Config/DHCP6Config Options (a{sv}, each value a string in NM 1.42),
// without the "requested_*" entries (what the client asked for, not what it got), as NM leaves them
// out of /run/NetworkManager/devices/IFINDEX.
func decodeOptions(v dbus.Variant) map[string]string {
	var m map[string]dbus.Variant
	if v.Store(&m) != nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, val := range m {
		if s, ok := val.Value().(string); ok && !strings.HasPrefix(k, "requested_") {
			out[k] = s
		}
	}
	return out
}

// GlobalDNS reads Manager.GlobalDnsConfiguration: nil when NM has none (an empty a{sv}). NM 1.42
// shows there whatever it uses, from a config file or set over D-Bus (Internal is not on the bus:
// it is false here); Sources are empty.
func (c *Client) GlobalDNS(ctx context.Context) (*networkmanager.GlobalDNS, error) {
	var g *networkmanager.GlobalDNS
	err := c.do(ctx, "read NetworkManager's global DNS configuration", func(ctx context.Context, conn *dbus.Conn) error {
		v, err := getProp(ctx, conn, nmPath, nmIface, "GlobalDnsConfiguration")
		if err != nil {
			return err
		}
		var m map[string]dbus.Variant
		if err := v.Store(&m); err != nil {
			return fmt.Errorf("decode GlobalDnsConfiguration: %w", err)
		}
		g = DecodeGlobalDNS(m)
		return nil
	})
	return g, err
}

// DecodeGlobalDNS decodes GlobalDnsConfiguration's a{sv}: "searches" as, "options" as, "domains"
// a{sv} of NAME -> a{sv} {"servers" as, "options" as}. nil for an empty configuration.
func DecodeGlobalDNS(m map[string]dbus.Variant) *networkmanager.GlobalDNS {
	g := &networkmanager.GlobalDNS{}
	strs := func(v dbus.Variant) []string {
		s, _ := v.Value().([]string)
		return s
	}
	g.Searches = strs(m["searches"])
	g.Options = strs(m["options"])
	if doms, ok := m["domains"].Value().(map[string]dbus.Variant); ok {
		for name, dv := range doms {
			d := networkmanager.GlobalDNSDomain{Name: name}
			if dm, ok := dv.Value().(map[string]dbus.Variant); ok {
				d.Servers = strs(dm["servers"])
				d.Options = strs(dm["options"])
			}
			g.Domains = append(g.Domains, d)
		}
	}
	sort.Slice(g.Domains, func(i, j int) bool { return g.Domains[i].Name < g.Domains[j].Name })
	if len(g.Searches) == 0 && len(g.Options) == 0 && len(g.Domains) == 0 {
		return nil
	}
	return g
}

// EncodeGlobalDNS is the a{sv} SetGlobalDNS writes; nil clears the configuration.
func EncodeGlobalDNS(g *networkmanager.GlobalDNS) map[string]dbus.Variant {
	m := map[string]dbus.Variant{}
	if g == nil {
		return m
	}
	if len(g.Searches) > 0 {
		m["searches"] = dbus.MakeVariant(g.Searches)
	}
	if len(g.Options) > 0 {
		m["options"] = dbus.MakeVariant(g.Options)
	}
	doms := map[string]dbus.Variant{}
	for _, d := range g.Domains {
		dm := map[string]dbus.Variant{"servers": dbus.MakeVariant(d.Servers)}
		if len(d.Options) > 0 {
			dm["options"] = dbus.MakeVariant(d.Options)
		}
		doms[d.Name] = dbus.MakeVariant(dm)
	}
	m["domains"] = dbus.MakeVariant(doms)
	return m
}

// SetGlobalDNS writes Manager.GlobalDnsConfiguration: NM stores it in NetworkManager-intern.conf
// and applies it at once. NM 1.42 refuses it with ErrNamePermissionDenied while a config file sets
// global DNS.
func (c *Client) SetGlobalDNS(ctx context.Context, g *networkmanager.GlobalDNS) error {
	return c.do(ctx, "set NetworkManager's global DNS configuration", func(ctx context.Context, conn *dbus.Conn) error {
		return obj(conn, nmPath).CallWithContext(ctx, propsIface+".Set", 0, nmIface, "GlobalDnsConfiguration",
			dbus.MakeVariant(EncodeGlobalDNS(g))).Err
	})
}

// DNSEntry is one entry of DnsManager.Configuration: the servers and domains NM has for one
// interface (or the global configuration, Interface "").
type DNSEntry struct {
	Nameservers []string
	Domains     []string
	Interface   string
	Priority    int32
	VPN         bool
}

// DNSManager is the DnsManager object: Mode ("default", "dnsmasq", "systemd-resolved", "none"),
// RcManager ("file", "symlink", ...) and Configuration.
type DNSManager struct {
	Mode, RcManager string
	Configuration   []DNSEntry
}

// DNSManager reads the DnsManager object.
func (c *Client) DNSManager(ctx context.Context) (DNSManager, error) {
	var d DNSManager
	err := c.do(ctx, "read NetworkManager's DNS manager", func(ctx context.Context, conn *dbus.Conn) error {
		props, err := busconn.GetAll(ctx, conn, BusName, dnsManagerPath, dnsManagerIface)
		if err != nil {
			return err
		}
		d.Mode, d.RcManager = propValue[string](props, "Mode"), propValue[string](props, "RcManager")
		var entries []map[string]dbus.Variant
		if v, ok := props["Configuration"]; ok {
			if err := v.Store(&entries); err != nil {
				return fmt.Errorf("decode DnsManager.Configuration: %w", err)
			}
		}
		d.Configuration = decodeDNSEntries(entries)
		return nil
	})
	return d, err
}

func decodeDNSEntries(entries []map[string]dbus.Variant) []DNSEntry {
	var out []DNSEntry
	for _, e := range entries {
		var d DNSEntry
		d.Nameservers, _ = e["nameservers"].Value().([]string)
		d.Domains, _ = e["domains"].Value().([]string)
		d.Interface, _ = e["interface"].Value().(string)
		d.Priority, _ = e["priority"].Value().(int32)
		d.VPN, _ = e["vpn"].Value().(bool)
		out = append(out, d)
	}
	return out
}

// Reload flags (NMManagerReloadFlags). 0 reloads everything, as `nmcli general reload` does.
const (
	ReloadAll     uint32 = 0
	ReloadConf    uint32 = 0x1
	ReloadDNSRC   uint32 = 0x2
	ReloadDNSFull uint32 = 0x4
)

// Reload is Manager.Reload. NM 1.42 answers success even when a config file fails to parse: it
// logs the error and keeps the old configuration (measured); validate first
// (networkmanager.LoadConfig, NetworkManager --print-config) and read GlobalDNS back after.
func (c *Client) Reload(ctx context.Context, flags uint32) error {
	return c.do(ctx, "reload NetworkManager", func(ctx context.Context, conn *dbus.Conn) error {
		return obj(conn, nmPath).CallWithContext(ctx, nmIface+".Reload", 0, flags).Err
	})
}

// Reapply is Device.Reapply with the applied connection unchanged (empty settings, version 0, no
// flags): NM applies the connection's current settings again without reactivating it.
func (c *Client) Reapply(ctx context.Context, devicePath string) error {
	return c.do(ctx, "reapply the connection of "+devicePath, func(ctx context.Context, conn *dbus.Conn) error {
		return obj(conn, dbus.ObjectPath(devicePath)).CallWithContext(ctx, deviceIface+".Reapply", 0,
			map[string]map[string]dbus.Variant{}, uint64(0), uint32(0)).Err
	})
}

// Connection is a connection profile as Settings.Connection.GetSettings shows it.
type Connection struct {
	Path          string
	ID, UUID      string
	Type          string
	InterfaceName string
	IPv4, IPv6    networkmanager.IPSettings
}

// Connections lists every connection profile NM has (Settings.ListConnections + GetSettings).
func (c *Client) Connections(ctx context.Context) ([]Connection, error) {
	var out []Connection
	err := c.do(ctx, "list NetworkManager's connections", func(ctx context.Context, conn *dbus.Conn) error {
		var paths []dbus.ObjectPath
		if err := obj(conn, settingsPath).CallWithContext(ctx, settingsIface+".ListConnections", 0).Store(&paths); err != nil {
			return err
		}
		out = out[:0]
		for _, p := range paths {
			cn, err := readConnection(ctx, conn, p)
			if errors.Is(busError(err), ErrGone) {
				continue
			}
			if err != nil {
				return fmt.Errorf("connection %s: %w", p, err)
			}
			out = append(out, cn)
		}
		return nil
	})
	return out, err
}

// ConnectionByUUID reads one profile; ErrGone when NM has none with that UUID.
func (c *Client) ConnectionByUUID(ctx context.Context, uuid string) (Connection, error) {
	var cn Connection
	err := c.do(ctx, "read NetworkManager's connection "+uuid, func(ctx context.Context, conn *dbus.Conn) error {
		var p dbus.ObjectPath
		if err := obj(conn, settingsPath).CallWithContext(ctx, settingsIface+".GetConnectionByUuid", 0, uuid).Store(&p); err != nil {
			return err
		}
		var err error
		cn, err = readConnection(ctx, conn, p)
		return err
	})
	return cn, err
}

func readConnection(ctx context.Context, conn *dbus.Conn, p dbus.ObjectPath) (Connection, error) {
	var s map[string]map[string]dbus.Variant
	if err := obj(conn, p).CallWithContext(ctx, connectionIface+".GetSettings", 0).Store(&s); err != nil {
		return Connection{}, err
	}
	return DecodeConnection(string(p), s), nil
}

// DecodeConnection reads the settings nodedns needs from GetSettings' a{sa{sv}}. NM 1.42 sends
// ipv4.dns as "au" (addresses in network byte order) and ipv6.dns as "aay".
func DecodeConnection(p string, s map[string]map[string]dbus.Variant) Connection {
	str := func(group, key string) string {
		v, _ := s[group][key].Value().(string)
		return v
	}
	cn := Connection{Path: p, ID: str("connection", "id"), UUID: str("connection", "uuid"),
		Type: str("connection", "type"), InterfaceName: str("connection", "interface-name")}
	for _, f := range []struct {
		group string
		dst   *networkmanager.IPSettings
	}{{"ipv4", &cn.IPv4}, {"ipv6", &cn.IPv6}} {
		f.dst.Method = str(f.group, "method")
		f.dst.DNSSearch, _ = s[f.group]["dns-search"].Value().([]string)
		f.dst.IgnoreAutoDNS, _ = s[f.group]["ignore-auto-dns"].Value().(bool)
		switch v := s[f.group]["dns"].Value().(type) {
		case []uint32:
			for _, u := range v {
				var b [4]byte
				binary.NativeEndian.PutUint32(b[:], u)
				f.dst.DNS = append(f.dst.DNS, netip.AddrFrom4(b).String())
			}
		case [][]byte:
			for _, b := range v {
				if a, ok := netip.AddrFromSlice(b); ok {
					f.dst.DNS = append(f.dst.DNS, a.String())
				}
			}
		}
	}
	return cn
}
