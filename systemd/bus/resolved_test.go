package bus

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"

	"github.com/godbus/dbus/v5"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/nodedns/nodedns/systemd"
)

// TestBusErrorMatchesByName: D-Bus error replies are told apart by their name alone, whatever the
// message says, also when wrapped.
func TestBusErrorMatchesByName(t *testing.T) {
	sentinels := []error{ErrLinkBusy, ErrLinkGone, ErrUnknownMethod, ErrNotRunning}
	tests := []struct {
		name string
		want error // nil: matches none
	}{
		{ErrNameLinkBusy, ErrLinkBusy},
		{ErrNameNoSuchLink, ErrLinkGone},
		{ErrNameUnknownObject, ErrLinkGone},
		{ErrNameUnknownMethod, ErrUnknownMethod},
		{ErrNameServiceUnknown, ErrNotRunning},
		{ErrNameNameHasNoOwner, ErrNotRunning},
		{"org.freedesktop.DBus.Error.AccessDenied", nil},
		{"org.freedesktop.resolve1.LinkBusyX", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The message is deliberately misleading: only the name counts.
			raw := dbus.Error{Name: tt.name, Body: []any{"Link busy: UnknownMethod NoSuchLink"}}
			for _, err := range []error{raw, &raw} {
				wrapped := fmt.Errorf("set domains on link 3: %w", busError(err))
				for _, s := range sentinels {
					if got := errors.Is(wrapped, s); got != (s == tt.want) {
						t.Errorf("errors.Is(%v, %v) = %v", wrapped, s, got)
					}
				}
				var be *BusError
				if !errors.As(wrapped, &be) || be.Name != tt.name || be.Message == "" {
					t.Errorf("errors.As BusError: %+v", be)
				}
			}
		})
	}
	if err := busError(errors.New("connection closed")); errors.As(err, new(*BusError)) {
		t.Errorf("a transport error became a BusError: %v", err)
	}
	if busError(nil) != nil {
		t.Error("busError(nil) != nil")
	}
}

func TestParseLinkLabel(t *testing.T) {
	tests := []struct {
		in   string
		want int
		ok   bool
	}{
		{"_32", 2, true},
		{"_312", 12, true},
		{"_31_30_30", 100, true},
		{"7", 7, true}, // not escaped: a digit-only label after the first character
		{"_30", 0, false},
		{"_3", 0, false},
		{"_zz", 0, false},
		{"", 0, false},
		{"_2d1", 0, false},
		{"_3012", 0, false}, // "012": not canonical
	}
	for _, tt := range tests {
		got, ok := ParseLinkLabel(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParseLinkLabel(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestLinkIndexesFromIntrospection(t *testing.T) {
	// As resolved 252 answers Introspect on /org/freedesktop/resolve1/link (abridged).
	xml := `<!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
<node>
 <interface name="org.freedesktop.DBus.Peer"><method name="Ping"/></interface>
 <node name="_312"/>
 <node name="_31"/>
 <node name="_32"/>
 <node name="bogus"/>
</node>`
	got, err := linkIndexesFromIntrospection(xml)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{1, 2, 12}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := linkIndexesFromIntrospection("<node"); err == nil {
		t.Error("broken XML accepted")
	}
}

var addrCmp = cmp.Comparer(func(a, b netip.Addr) bool { return a == b })

// TestDecodeManager: DNSEx is used where present, plain DNS before systemd 246, and a resolved
// without ResolvConfMode (before 247) degrades to an empty mode instead of failing.
func TestDecodeManager(t *testing.T) {
	v4 := []byte{169, 254, 25, 10}
	v6 := netip.MustParseAddr("fd00::1").AsSlice()
	tests := []struct {
		name  string
		props map[string]dbus.Variant
		want  systemd.ManagerState
	}{
		{
			name: "systemd 252",
			props: map[string]dbus.Variant{
				"DNS":              dbus.MakeVariant([]wireServer{{0, afInet, v4}}),
				"DNSEx":            dbus.MakeVariant([]wireServerEx{{0, afInet, v4, 0, ""}, {3, afInet6, v6, 853, "dns.example"}}),
				"FallbackDNSEx":    dbus.MakeVariant([]wireServerEx{{0, afInet, []byte{1, 1, 1, 1}, 0, ""}}),
				"Domains":          dbus.MakeVariant([]wireDomain{{3, "example.org", false}, {0, "corp", true}}),
				"ResolvConfMode":   dbus.MakeVariant("stub"),
				"CurrentDNSServer": dbus.MakeVariant(wireServer{0, afInet, v4}),
			},
			want: systemd.ManagerState{
				DNS: []systemd.DNSServer{{Addr: netip.MustParseAddr("169.254.25.10")},
					{IfIndex: 3, Addr: netip.MustParseAddr("fd00::1"), Port: 853, Name: "dns.example"}},
				FallbackDNS:      []systemd.DNSServer{{Addr: netip.MustParseAddr("1.1.1.1")}},
				Domains:          []systemd.LinkDomain{{IfIndex: 3, Domain: systemd.Domain{Name: "example.org"}}, {IfIndex: 0, Domain: systemd.Domain{Name: "corp", RoutingOnly: true}}},
				ResolvConfMode:   "stub",
				CurrentDNSServer: &systemd.DNSServer{Addr: netip.MustParseAddr("169.254.25.10")},
				HasDNSEx:         true,
			},
		},
		{
			name: "systemd 245: no Ex properties, no ResolvConfMode",
			props: map[string]dbus.Variant{
				"DNS":         dbus.MakeVariant([]wireServer{{2, afInet, []byte{10, 0, 0, 2}}}),
				"FallbackDNS": dbus.MakeVariant([]wireServer{}),
				"Domains":     dbus.MakeVariant([]wireDomain{}),
			},
			want: systemd.ManagerState{DNS: []systemd.DNSServer{{IfIndex: 2, Addr: netip.MustParseAddr("10.0.0.2")}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeManager(tt.props)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, addrCmp); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	// A malformed entry is an error naming the problem, the good ones are kept.
	got, err := decodeManager(map[string]dbus.Variant{"DNSEx": dbus.MakeVariant([]wireServerEx{{0, afInet, []byte{1, 2, 3}, 0, ""}, {0, afInet, v4, 0, ""}})})
	if err == nil || len(got.DNS) != 1 {
		t.Errorf("bad address: %v, %+v", err, got.DNS)
	}
}

func TestDecodeLink(t *testing.T) {
	got, err := decodeLink(4, map[string]dbus.Variant{
		"DNS":          dbus.MakeVariant([]wireLinkSrv{{afInet, []byte{10, 0, 0, 1}}}),
		"Domains":      dbus.MakeVariant([]wireLinkDom{{"example.org", false}}),
		"DefaultRoute": dbus.MakeVariant(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := systemd.LinkInfo{IfIndex: 4, DNS: []systemd.DNSServer{{IfIndex: 4, Addr: netip.MustParseAddr("10.0.0.1")}},
		Domains: []systemd.Domain{{Name: "example.org"}}, DefaultRoute: true, HasDefaultRoute: true}
	if diff := cmp.Diff(want, got, addrCmp); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// Before systemd 240 there is no DefaultRoute.
	got, _ = decodeLink(4, map[string]dbus.Variant{})
	if got.HasDefaultRoute {
		t.Error("HasDefaultRoute without the property")
	}
}

func FuzzParseLinkLabel(f *testing.F) {
	for _, s := range []string{"_32", "_312", "_", "_3", "abc", "_31_30"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := ParseLinkLabel(s)
		if ok && n <= 0 {
			t.Fatalf("ParseLinkLabel(%q) = %d, true", s, n)
		}
	})
}

func FuzzLinkIndexesFromIntrospection(f *testing.F) {
	f.Add(`<node><node name="_32"/></node>`)
	f.Add(`<node><node name="_31_30"/><interface name="x"/></node>`)
	f.Fuzz(func(t *testing.T, s string) {
		idx, err := linkIndexesFromIntrospection(s)
		if err != nil {
			return
		}
		for _, i := range idx {
			if i <= 0 {
				t.Fatalf("index %d from %q", i, s)
			}
		}
	})
}

// TestEventOf: resolved's PropertiesChanged becomes an event naming the object and every property
// changed or invalidated, sorted; other signals give none (the owner changes are busconn.Client's).
func TestEventOf(t *testing.T) {
	changed := map[string]dbus.Variant{"DNS": dbus.MakeVariant(""), "CurrentDNSServer": dbus.MakeVariant("")}
	ev, ok := eventOf(&dbus.Signal{Path: resolvedPath, Name: propsIface + ".PropertiesChanged",
		Body: []any{managerIface, changed, []string{"Domains"}}})
	want := Event{Kind: EventPropertiesChanged, Path: string(resolvedPath), Properties: []string{"CurrentDNSServer", "DNS", "Domains"}}
	if !ok || cmp.Diff(want, ev, cmpopts.EquateErrors()) != "" {
		t.Errorf("PropertiesChanged: %+v %v, want %+v", ev, ok, want)
	}
	if ev, ok := eventOf(&dbus.Signal{Path: resolvedPath, Name: propsIface + ".PropertiesChanged"}); !ok || ev.Properties != nil {
		t.Errorf("PropertiesChanged without a body: %+v %v", ev, ok)
	}
	if ev, ok := eventOf(&dbus.Signal{Path: "/org/freedesktop/DBus", Name: "org.freedesktop.DBus.NameOwnerChanged",
		Body: []any{"org.freedesktop.resolve1", "", ":1.5"}}); ok {
		t.Errorf("NameOwnerChanged: %+v", ev)
	}
}
