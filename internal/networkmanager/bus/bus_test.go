package bus

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/google/go-cmp/cmp"

	"github.com/nodedns/nodedns/internal/networkmanager"
	"github.com/nodedns/nodedns/internal/testutil/nstest"
)

const kubesprayDNSConf = `[global-dns-domain-*]
servers = 169.254.25.10,10.66.0.53

[global-dns]
searches = default.svc.cluster.local,svc.cluster.local
options = ndots:2,timeout:2,attempts:2
`

func TestDecodeGlobalDNS(t *testing.T) {
	g := &networkmanager.GlobalDNS{Searches: []string{"a.example"}, Options: []string{"ndots:2"},
		Domains: []networkmanager.GlobalDNSDomain{{Name: "*", Servers: []string{"10.66.0.53"}}, {Name: "corp", Servers: []string{"10.0.0.1"}, Options: []string{"rotate"}}}}
	if sig := dbus.SignatureOf(EncodeGlobalDNS(g)); sig.String() != "a{sv}" {
		t.Errorf("encoded as %s, want a{sv}", sig)
	}
	back := DecodeGlobalDNS(EncodeGlobalDNS(g))
	if diff := cmp.Diff(g, back); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if DecodeGlobalDNS(map[string]dbus.Variant{"domains": dbus.MakeVariant(map[string]dbus.Variant{})}) != nil {
		t.Error("an empty configuration is not nil")
	}
	if len(EncodeGlobalDNS(nil)) != 0 {
		t.Error("nil does not encode as an empty a{sv}")
	}
}

func TestDecodeConnection(t *testing.T) {
	s := map[string]map[string]dbus.Variant{
		"connection": {"id": dbus.MakeVariant("eth0"), "uuid": dbus.MakeVariant("u"), "type": dbus.MakeVariant("802-3-ethernet"), "interface-name": dbus.MakeVariant("eth0")},
		// 10.66.0.53 in network byte order, as NM 1.42 sends it on a little-endian machine.
		"ipv4": {"method": dbus.MakeVariant("auto"), "dns": dbus.MakeVariant([]uint32{0x3500420a}), "dns-search": dbus.MakeVariant([]string{"corp"}), "ignore-auto-dns": dbus.MakeVariant(true)},
		"ipv6": {"method": dbus.MakeVariant("ignore"), "dns": dbus.MakeVariant([][]byte{netip.MustParseAddr("2001:db8::53").AsSlice()})},
	}
	got := DecodeConnection("/p", s)
	want := Connection{Path: "/p", ID: "eth0", UUID: "u", Type: "802-3-ethernet", InterfaceName: "eth0",
		IPv4: networkmanager.IPSettings{Method: "auto", DNS: []string{"10.66.0.53"}, DNSSearch: []string{"corp"}, IgnoreAutoDNS: true},
		IPv6: networkmanager.IPSettings{Method: "ignore", DNS: []string{"2001:db8::53"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestEventOf: NetworkManager's own signals become events (its owner changes are busconn.Client's:
// busconn's TestClientEvents, and TestClientLive's restart).
func TestEventOf(t *testing.T) {
	sig := func(path, name string, body ...any) *dbus.Signal {
		return &dbus.Signal{Path: dbus.ObjectPath(path), Name: name, Body: body}
	}
	props := func(iface string, names ...string) []any {
		m := map[string]dbus.Variant{}
		for _, n := range names {
			m[n] = dbus.MakeVariant("")
		}
		return []any{iface, m, []string{}}
	}
	tests := []struct {
		s    *dbus.Signal
		want EventKind
	}{
		{sig("/org/freedesktop/NetworkManager/DHCP4Config/3", propsIface+".PropertiesChanged", props(dhcp4Iface, "Options")...), EventDHCPChanged},
		{sig("/org/freedesktop/NetworkManager/Devices/2", propsIface+".PropertiesChanged", props(deviceIface, "Dhcp4Config")...), EventDHCPChanged},
		{sig("/org/freedesktop/NetworkManager", propsIface+".PropertiesChanged", props(nmIface, "GlobalDnsConfiguration")...), EventGlobalDNSChanged},
		{sig("/org/freedesktop/NetworkManager/DnsManager", propsIface+".PropertiesChanged", props(dnsManagerIface, "Configuration")...), EventDNSChanged},
		{sig("/org/freedesktop/NetworkManager/Devices/2", deviceIface+".StateChanged", uint32(100), uint32(70), uint32(0)), EventDeviceState},
		{sig("/org/freedesktop/NetworkManager", propsIface+".PropertiesChanged", props(nmIface, "Connectivity")...), 0},
		{sig("/x", propsIface+".PropertiesChanged"), 0},
	}
	for _, tt := range tests {
		ev, ok := eventOf(tt.s)
		if (tt.want == 0) == ok || (ok && ev.Kind != tt.want) {
			t.Errorf("eventOf(%s %v) = %v %v, want %v", tt.s.Name, tt.s.Body, ev.Kind, ok, tt.want)
		}
	}
}

// waitEvent waits for an event of kind, failing after timeout.
func waitEvent(t *testing.T, c *Client, kind EventKind, timeout time.Duration) Event {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-c.Events():
			if !ok {
				t.Fatal("events closed")
			}
			if ev.Kind == kind {
				return ev
			}
		case <-deadline:
			t.Fatalf("no %v event within %v", kind, timeout)
		}
	}
}

func drain(c *Client) {
	for {
		select {
		case <-c.Events():
		default:
			return
		}
	}
}

// TestClientLive runs the client against a real NetworkManager 1.42 with dnsmasq offering
// 10.66.0.53 and search example.org.
func TestClientLive(t *testing.T) { nstest.Suites(t, testClientLive) }

func testClientLive(t *testing.T, suite nstest.Suite) {
	offer := nstest.NMDefaultDHCP()
	offer.Options = []string{"option:T1,2", "option:T2,3"}
	nm := nstest.StartNetworkManager(t, nstest.NMOptions{Suite: suite, DHCP: offer})
	ctx := context.Background()
	c, err := Dial(ctx, Options{Address: nm.ClientBusAddress(t), CallTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	if v, err := c.Version(ctx); err != nil || v != nm.Version(t) {
		t.Fatalf("Version = %q, %v; NetworkManager --version says %s", v, err, nm.Version(t))
	}
	dev := findDevice(t, c, nm.Iface)
	// Neither NM 1.42.4 nor 1.58.1 has an Ifindex property (measured: 0 on both).
	if dev.IfIndex != 0 || dev.IPInterface != nm.Iface || dev.State != DeviceStateActivated || !dev.Managed {
		t.Errorf("device %+v", dev)
	}
	dns := networkmanager.DHCP4DNS(dev.DHCP4)
	if !cmp.Equal(addrStrings(dns.Servers), []string{"10.66.0.53"}) || !cmp.Equal(dns.Domains(), []string{"example.org"}) {
		t.Errorf("DHCP4 over D-Bus: %+v", dns)
	}
	// The device state file says the same.
	st, err := networkmanager.ParseDeviceState("f", nm.IfIndex(t), []byte(nm.DeviceState(t)))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(dev.DHCP4, st.DHCP4); diff != "" {
		t.Errorf("D-Bus options and /run/NetworkManager/devices differ (-bus +file):\n%s", diff)
	}
	if g, err := c.GlobalDNS(ctx); err != nil || g != nil {
		t.Errorf("GlobalDNS = %+v, %v; want none", g, err)
	}
	cn, err := c.ConnectionByUUID(ctx, nstest.NMConnUUID)
	if err != nil || cn.InterfaceName != nm.Iface || cn.IPv4.Method != "auto" || cn.IPv6.Method != "ignore" {
		t.Errorf("ConnectionByUUID = %+v, %v", cn, err)
	}
	if _, err := c.ConnectionByUUID(ctx, "00000000-0000-0000-0000-000000000000"); !errors.Is(err, ErrGone) {
		t.Errorf("unknown UUID: %v, want ErrGone", err)
	}
	if all, err := c.Connections(ctx); err != nil || len(all) != 1 {
		t.Errorf("Connections = %+v, %v", all, err)
	}

	// kubespray's dns.conf, then a reload: the global DNS shows, and a write over D-Bus is refused.
	drain(c)
	nm.WriteFile(t, networkmanager.EtcConfDir+"/dns.conf", kubesprayDNSConf, 0o600)
	if err := c.Reload(ctx, ReloadAll); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, c, EventGlobalDNSChanged, 10*time.Second)
	g, err := c.GlobalDNS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := &networkmanager.GlobalDNS{Searches: []string{"default.svc.cluster.local", "svc.cluster.local"}, Options: []string{"ndots:2", "timeout:2", "attempts:2"},
		Domains: []networkmanager.GlobalDNSDomain{{Name: "*", Servers: []string{"169.254.25.10", "10.66.0.53"}}}}
	if diff := cmp.Diff(want, g); diff != "" {
		t.Errorf("GlobalDNS (-want +got):\n%s", diff)
	}
	dm, err := c.DNSManager(ctx)
	if err != nil || dm.Mode != "default" || dm.RcManager != "file" || len(dm.Configuration) == 0 {
		t.Errorf("DNSManager = %+v, %v", dm, err)
	}
	err = c.SetGlobalDNS(ctx, &networkmanager.GlobalDNS{Domains: []networkmanager.GlobalDNSDomain{{Name: "*", Servers: []string{"10.0.0.1"}}}})
	var be *BusError
	if !errors.As(err, &be) || be.Name != ErrNamePermissionDenied {
		t.Errorf("SetGlobalDNS with a conf.d global DNS: %v, want %s", err, ErrNamePermissionDenied)
	}

	// A renewal with a changed offer is a change notice, and the options follow.
	drain(c)
	next := offer
	next.DNS = []string{"10.66.0.54"}
	nm.ChangeOffer(t, next)
	waitEvent(t, c, EventDHCPChanged, 15*time.Second)
	nstest.WaitFor(t, 10*time.Second, "10.66.0.54 in DHCP4 options over D-Bus", func() bool {
		d := findDevice(t, c, nm.Iface)
		return d.DHCP4["domain_name_servers"] == "10.66.0.54"
	})

	if err := c.Reapply(ctx, dev.Path); err != nil {
		t.Errorf("Reapply: %v", err)
	}

	// A restart: NameOwnerChanged both ways, and WaitReady tells the new NM from the old.
	old, err := c.NameOwner(ctx)
	if err != nil || old == "" {
		t.Fatalf("NameOwner = %q, %v", old, err)
	}
	drain(c)
	nm.Restart(t)
	waitEvent(t, c, EventNMStopped, 10*time.Second)
	waitEvent(t, c, EventNMStarted, 10*time.Second)
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := c.WaitReady(wctx, old); err != nil {
		t.Fatal(err)
	}
	nm.Stop(t)
	if _, err := c.Version(ctx); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Version with NM stopped: %v, want ErrNotRunning", err)
	}
}

func findDevice(t *testing.T, c *Client, iface string) Device {
	t.Helper()
	devs, err := c.Devices(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range devs {
		if d.Interface == iface {
			return d
		}
	}
	t.Fatalf("no device %s in %+v", iface, devs)
	return Device{}
}

func addrStrings(as []netip.Addr) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.String())
	}
	return out
}
