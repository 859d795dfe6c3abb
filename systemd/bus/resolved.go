// Package bus is nodedns's client of systemd over D-Bus: systemd-resolved (org.freedesktop.resolve1)
// on one private connection, and restarting units through systemd's manager. The data it returns
// (servers, domains, link state) are the pure types of package systemd, so the readers and the
// policy never link a D-Bus library.
package bus

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/nodedns/nodedns/internal/busconn"

	"github.com/godbus/dbus/v5"
	"github.com/godbus/dbus/v5/introspect"
	"github.com/nodedns/nodedns/systemd"
)

// systemd-resolved's D-Bus names (org.freedesktop.resolve1(5), systemd 252).
const (
	resolvedPath     = dbus.ObjectPath("/org/freedesktop/resolve1")
	resolvedLinkPath = dbus.ObjectPath("/org/freedesktop/resolve1/link")
	managerIface     = "org.freedesktop.resolve1.Manager"
	linkIface        = "org.freedesktop.resolve1.Link"
	propsIface       = "org.freedesktop.DBus.Properties"
)

// D-Bus error names nodedns tells apart. They are matched by name, never by message text: the
// messages differ between systemd versions and locales.
const (
	// ErrNameLinkBusy: systemd-networkd manages the link, so resolved refuses SetLink* (252:
	// verify_unmanaged_link in resolved-link-bus.c).
	ErrNameLinkBusy = "org.freedesktop.resolve1.LinkBusy"
	// ErrNameNoSuchLink: GetLink/SetLink* for an ifindex resolved does not know (the link is gone).
	ErrNameNoSuchLink = "org.freedesktop.resolve1.NoSuchLink"
	// ErrNameUnknownMethod: an older resolved without the method (SetLinkDNSEx came with 246).
	ErrNameUnknownMethod = busconn.ErrNameUnknownMethod
	// ErrNameUnknownObject: the link object went away between listing and reading it.
	ErrNameUnknownObject = busconn.ErrNameUnknownObject
	// ErrNameServiceUnknown and ErrNameNameHasNoOwner: nobody owns org.freedesktop.resolve1.
	ErrNameServiceUnknown = busconn.ErrNameServiceUnknown
	ErrNameNameHasNoOwner = busconn.ErrNameNameHasNoOwner
)

// Errors the resolved client returns; test them with errors.Is. Each stands for the D-Bus error
// names given, matched by name (busconn.Reply).
var (
	// ErrLinkBusy: systemd-networkd manages the link; change it through netplan or networkd.
	ErrLinkBusy = busconn.Sentinel(errors.New("systemd-networkd manages the link (LinkBusy): change its DNS through netplan or a networkd .network file"), ErrNameLinkBusy)
	// ErrLinkGone: resolved does not know the link (UnknownObject or NoSuchLink).
	ErrLinkGone = busconn.Sentinel(errors.New("link not known to systemd-resolved"), ErrNameNoSuchLink, ErrNameUnknownObject)
	// ErrUnknownMethod: this resolved is too old for the call.
	ErrUnknownMethod = busconn.Sentinel(errors.New("method not known to this systemd-resolved"), ErrNameUnknownMethod)
	// ErrNotRunning: nobody owns org.freedesktop.resolve1 on the bus.
	ErrNotRunning = busconn.Sentinel(errors.New("systemd-resolved is not on the system bus"), ErrNameServiceUnknown, ErrNameNameHasNoOwner)
	// ErrDisconnected: the client has no bus connection at the moment (it keeps reconnecting).
	ErrDisconnected = busconn.ErrDisconnected
	// ErrClosed: the client was closed.
	ErrClosed = busconn.ErrClosed
)

// BusError is a D-Bus error reply, kept by name; errors.Is matches it against the errors above.
type BusError = busconn.Reply

// busError turns godbus's error replies into *BusError and leaves other errors as they are.
var busError = busconn.AsReply

// EventKind says what an Event is about.
type EventKind int

// Event kinds.
const (
	// EventPropertiesChanged: resolved emitted PropertiesChanged (252 does so only for the
	// Manager's DNS and CurrentDNSServer; never for Domains or any Link property, so watch
	// /run/systemd/resolve/ with inotify for those).
	EventPropertiesChanged EventKind = iota + 1
	// EventResolvedStarted: org.freedesktop.resolve1 got an owner (resolved (re)started).
	EventResolvedStarted
	// EventResolvedStopped: org.freedesktop.resolve1 lost its owner (resolved stopped or crashed).
	EventResolvedStopped
	// EventBusLost: the system bus connection broke (dbus-daemon restarted); the client reconnects.
	EventBusLost
	// EventBusReconnected: the client is connected again; resolved may have restarted meanwhile.
	EventBusReconnected
)

func (k EventKind) String() string {
	switch k {
	case EventPropertiesChanged:
		return "properties-changed"
	case EventResolvedStarted:
		return "resolved-started"
	case EventResolvedStopped:
		return "resolved-stopped"
	case EventBusLost:
		return "bus-lost"
	case EventBusReconnected:
		return "bus-reconnected"
	}
	return "unknown"
}

// Event is something that happened to resolved or to the bus.
type Event struct {
	Kind EventKind
	// Path and Properties name the object and the properties that changed
	// (EventPropertiesChanged).
	Path       string
	Properties []string
	// Owner is the new unique bus name (EventResolvedStarted).
	Owner string
	// Err is why the bus was lost (EventBusLost).
	Err error
}

// ResolvedOptions configure a resolved client: the bus address, the call timeout and the reconnect
// backoff (busconn.Options).
type ResolvedOptions = busconn.Options

// Resolved is a client of systemd-resolved on ONE private system-bus connection, owned by one
// goroutine: every call is handed to that goroutine, which also receives the signals and reconnects
// (with capped exponential backoff) when the bus goes away. Every call has a timeout. Methods are
// safe for concurrent use.
//
// Events: Events() delivers an Event when resolved emits PropertiesChanged (systemd 252 does so
// only for Manager.DNS and CurrentDNSServer), when org.freedesktop.resolve1 changes owner
// (NameOwnerChanged: resolved restarted or stopped), when the bus connection breaks and when it is
// back. The channel is buffered; when it is full further events are dropped rather than blocking
// the bus, so a consumer must treat any event as "look at the whole state again", never as a
// delta. It is closed by Close. A daemon re-applies on EventResolvedStarted and
// EventBusReconnected (a restarted resolved has forgotten nothing it reads from /run, but a
// restarted dbus-daemon may mean resolved was restarted too).
//
// Events, Close and NameOwner are busconn.Client's.
type Resolved struct {
	*busconn.Client[Event]
	conn *busconn.Conn
}

// DialResolved connects to the system bus and starts the client's goroutine. The first connection
// must succeed (a node without a system bus is an error to report, not to wait for); later losses
// are retried in the background until Close.
func DialResolved(ctx context.Context, opts ResolvedOptions) (*Resolved, error) {
	shell, conn, err := busconn.DialClient(ctx, opts, busconn.Service[Event]{
		Name: systemd.ResolvedBusName,
		Matches: [][]dbus.MatchOption{
			{dbus.WithMatchSender(systemd.ResolvedBusName), dbus.WithMatchInterface(propsIface),
				dbus.WithMatchMember("PropertiesChanged"), dbus.WithMatchPathNamespace(resolvedPath)},
		},
		Signal:  eventOf,
		Started: func(owner string) Event { return Event{Kind: EventResolvedStarted, Owner: owner} },
		Stopped: func() Event { return Event{Kind: EventResolvedStopped} },
		Lost:    func(err error) Event { return Event{Kind: EventBusLost, Err: err} },
		Back:    func() Event { return Event{Kind: EventBusReconnected} },
	})
	if err != nil {
		return nil, err
	}
	return &Resolved{Client: shell, conn: conn}, nil
}

// eventOf turns resolved's PropertiesChanged into an event naming the object and the properties
// that changed (busconn.Client makes the owner changes events).
func eventOf(s *dbus.Signal) (Event, bool) {
	if s.Name != propsIface+".PropertiesChanged" {
		return Event{}, false
	}
	ev := Event{Kind: EventPropertiesChanged, Path: string(s.Path)}
	if len(s.Body) >= 2 {
		if changed, ok := s.Body[1].(map[string]dbus.Variant); ok {
			for k := range changed {
				ev.Properties = append(ev.Properties, k)
			}
		}
	}
	if len(s.Body) >= 3 {
		if inval, ok := s.Body[2].([]string); ok {
			ev.Properties = append(ev.Properties, inval...)
		}
	}
	sort.Strings(ev.Properties)
	return ev, true
}

// do runs fn on the connection's goroutine with the call timeout.
func (c *Resolved) do(ctx context.Context, op string, fn func(ctx context.Context, conn *dbus.Conn) error) error {
	return c.conn.Do(ctx, op, fn)
}

func call(ctx context.Context, conn *dbus.Conn, path dbus.ObjectPath, method string, args ...any) *dbus.Call {
	return conn.Object(systemd.ResolvedBusName, path).CallWithContext(ctx, method, 0, args...)
}

// Ping checks that resolved answers on the bus (org.freedesktop.DBus.Peer.Ping).
func (c *Resolved) Ping(ctx context.Context) error {
	return c.do(ctx, "ping systemd-resolved", func(ctx context.Context, conn *dbus.Conn) error {
		return call(ctx, conn, resolvedPath, "org.freedesktop.DBus.Peer.Ping").Err
	})
}

// WaitReady waits until org.freedesktop.resolve1 has an owner other than old ("" : any owner) that
// answers a ping, or ctx ends. After a restart it tells the new resolved from the old one, which
// may still be on the bus when a restart command returns.
func (c *Resolved) WaitReady(ctx context.Context, old string) error {
	return c.conn.WaitOwner(ctx, systemd.ResolvedBusName, old, "systemd-resolved", c.Ping)
}

// Wire shapes of resolved's properties (org.freedesktop.resolve1(5)).
type (
	wireServer struct {
		IfIndex, Family int32
		Addr            []byte
	} // (iiay)
	wireServerEx struct {
		IfIndex, Family int32
		Addr            []byte
		Port            uint16
		Name            string
	} // (iiayqs)
	wireLinkSrv struct {
		Family int32
		Addr   []byte
	} // (iay)
	wireLinkEx struct {
		Family int32
		Addr   []byte
		Port   uint16
		Name   string
	} // (iayqs)
	wireDomain struct {
		IfIndex     int32
		Name        string
		RoutingOnly bool
	} // (isb)
	wireLinkDom struct {
		Name        string
		RoutingOnly bool
	} // (sb)
)

const (
	afInet  = 2
	afInet6 = 10
)

func addrFrom(family int32, b []byte) (netip.Addr, error) {
	a, ok := netip.AddrFromSlice(b)
	switch {
	case !ok:
		return netip.Addr{}, fmt.Errorf("address of %d bytes", len(b))
	case family == afInet && a.Is4(), family == afInet6 && a.Is6() && !a.Is4In6():
		return a, nil
	case family == afInet6 && a.Is4In6():
		return a, nil
	}
	return netip.Addr{}, fmt.Errorf("address family %d with %d bytes", family, len(b))
}

func family(a netip.Addr) int32 {
	if a.Is4() {
		return afInet
	}
	return afInet6
}

// decodeServers decodes a server list property, plain (iiay)/(iay) or Ex; a bad entry is skipped
// with an error the caller reports.
func decodeServers(v dbus.Variant, ex, perLink bool, ifindex int) ([]systemd.DNSServer, error) {
	var out []systemd.DNSServer
	var errs []error
	add := func(i, fam int32, b []byte, port uint16, name string) {
		a, err := addrFrom(fam, b)
		if err != nil {
			errs = append(errs, err)
			return
		}
		out = append(out, systemd.DNSServer{IfIndex: int(i), Addr: a, Port: port, Name: name})
	}
	switch {
	case ex && perLink:
		var w []wireLinkEx
		if err := v.Store(&w); err != nil {
			return nil, err
		}
		for _, s := range w {
			add(int32(ifindex), s.Family, s.Addr, s.Port, s.Name)
		}
	case ex:
		var w []wireServerEx
		if err := v.Store(&w); err != nil {
			return nil, err
		}
		for _, s := range w {
			add(s.IfIndex, s.Family, s.Addr, s.Port, s.Name)
		}
	case perLink:
		var w []wireLinkSrv
		if err := v.Store(&w); err != nil {
			return nil, err
		}
		for _, s := range w {
			add(int32(ifindex), s.Family, s.Addr, 0, "")
		}
	default:
		var w []wireServer
		if err := v.Store(&w); err != nil {
			return nil, err
		}
		for _, s := range w {
			add(s.IfIndex, s.Family, s.Addr, 0, "")
		}
	}
	return out, errors.Join(errs...)
}

// Manager reads the Manager object's DNS (DNSEx where present), FallbackDNS, Domains,
// ResolvConfMode and CurrentDNSServer with one GetAll. Properties an older resolved lacks are
// left empty.
func (c *Resolved) Manager(ctx context.Context) (systemd.ManagerState, error) {
	var m systemd.ManagerState
	err := c.do(ctx, "read systemd-resolved's manager properties", func(ctx context.Context, conn *dbus.Conn) error {
		props, err := busconn.GetAll(ctx, conn, systemd.ResolvedBusName, resolvedPath, managerIface)
		if err != nil {
			return err
		}
		m, err = decodeManager(props)
		return err
	})
	return m, err
}

func decodeManager(props map[string]dbus.Variant) (systemd.ManagerState, error) {
	var m systemd.ManagerState
	var errs []error
	if v, ok := props["DNSEx"]; ok {
		m.HasDNSEx = true
		s, err := decodeServers(v, true, false, 0)
		m.DNS = s
		errs = append(errs, err)
	} else if v, ok := props["DNS"]; ok {
		s, err := decodeServers(v, false, false, 0)
		m.DNS = s
		errs = append(errs, err)
	}
	if v, ok := props["FallbackDNSEx"]; ok {
		s, err := decodeServers(v, true, false, 0)
		m.FallbackDNS = s
		errs = append(errs, err)
	} else if v, ok := props["FallbackDNS"]; ok {
		s, err := decodeServers(v, false, false, 0)
		m.FallbackDNS = s
		errs = append(errs, err)
	}
	if v, ok := props["Domains"]; ok {
		var w []wireDomain
		if err := v.Store(&w); err != nil {
			errs = append(errs, fmt.Errorf("decode property Domains: %w", err))
		}
		for _, d := range w {
			m.Domains = append(m.Domains, systemd.LinkDomain{IfIndex: int(d.IfIndex), Domain: systemd.Domain{Name: d.Name, RoutingOnly: d.RoutingOnly}})
		}
	}
	if v, ok := props["ResolvConfMode"]; ok {
		_ = v.Store(&m.ResolvConfMode) // absent before 247: stays ""
	}
	if v, ok := props["CurrentDNSServer"]; ok {
		var w wireServer
		if err := v.Store(&w); err == nil && len(w.Addr) > 0 {
			if a, err := addrFrom(w.Family, w.Addr); err == nil {
				m.CurrentDNSServer = &systemd.DNSServer{IfIndex: int(w.IfIndex), Addr: a}
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return m, fmt.Errorf("decode manager properties: %w", err)
	}
	return m, nil
}

// LinkIndexes lists the ifindexes of the link objects resolved exports (it has no ListLinks: the
// objects under /org/freedesktop/resolve1/link are introspected).
func (c *Resolved) LinkIndexes(ctx context.Context) ([]int, error) {
	var out []int
	err := c.do(ctx, "list systemd-resolved's links", func(ctx context.Context, conn *dbus.Conn) error {
		var data string
		if err := call(ctx, conn, resolvedLinkPath, "org.freedesktop.DBus.Introspectable.Introspect").Store(&data); err != nil {
			return err
		}
		var err error
		out, err = linkIndexesFromIntrospection(data)
		return err
	})
	return out, err
}

func linkIndexesFromIntrospection(data string) ([]int, error) {
	var n introspect.Node
	if err := xml.Unmarshal([]byte(data), &n); err != nil {
		return nil, fmt.Errorf("parse introspection: %w", err)
	}
	var out []int
	for _, child := range n.Children {
		if i, ok := ParseLinkLabel(child.Name); ok {
			out = append(out, i)
		}
	}
	sort.Ints(out)
	return out, nil
}

// ParseLinkLabel decodes the last component of a link object path: resolved escapes the ifindex
// with sd-bus's bus_label_escape, so "2" is "_32" and "12" is "_312".
func ParseLinkLabel(label string) (int, bool) {
	var b strings.Builder
	for i := 0; i < len(label); i++ {
		ch := label[i]
		if ch != '_' {
			b.WriteByte(ch)
			continue
		}
		if i+2 >= len(label) {
			return 0, false
		}
		v, err := strconv.ParseUint(label[i+1:i+3], 16, 8)
		if err != nil {
			return 0, false
		}
		b.WriteByte(byte(v))
		i += 2
	}
	n, err := strconv.Atoi(b.String())
	if err != nil || n <= 0 || strconv.Itoa(n) != b.String() {
		return 0, false
	}
	return n, true
}

// Link reads one link's DNS (DNSEx where present), Domains and DefaultRoute.
func (c *Resolved) Link(ctx context.Context, ifindex int) (systemd.LinkInfo, error) {
	var li systemd.LinkInfo
	err := c.do(ctx, fmt.Sprintf("read systemd-resolved's link %d", ifindex), func(ctx context.Context, conn *dbus.Conn) error {
		var path dbus.ObjectPath
		if err := call(ctx, conn, resolvedPath, managerIface+".GetLink", int32(ifindex)).Store(&path); err != nil {
			return err
		}
		props, err := busconn.GetAll(ctx, conn, systemd.ResolvedBusName, path, linkIface)
		if err != nil {
			return err
		}
		li, err = decodeLink(ifindex, props)
		return err
	})
	return li, err
}

func decodeLink(ifindex int, props map[string]dbus.Variant) (systemd.LinkInfo, error) {
	li := systemd.LinkInfo{IfIndex: ifindex}
	var errs []error
	if v, ok := props["DNSEx"]; ok {
		s, err := decodeServers(v, true, true, ifindex)
		li.DNS = s
		errs = append(errs, err)
	} else if v, ok := props["DNS"]; ok {
		s, err := decodeServers(v, false, true, ifindex)
		li.DNS = s
		errs = append(errs, err)
	}
	if v, ok := props["Domains"]; ok {
		var err error
		li.Domains, err = decodeDomains(v)
		errs = append(errs, err)
	}
	if v, ok := props["DefaultRoute"]; ok {
		if err := v.Store(&li.DefaultRoute); err == nil {
			li.HasDefaultRoute = true
		}
	}
	if err := errors.Join(errs...); err != nil {
		return li, fmt.Errorf("decode link %d properties: %w", ifindex, err)
	}
	return li, nil
}

// State reads resolved's whole live view: the Manager, then every link it exports and every link
// its Manager lists a server or domain for. A link that vanishes between listing and reading is
// skipped.
func (c *Resolved) State(ctx context.Context) (systemd.ResolvedState, error) {
	m, err := c.Manager(ctx)
	if err != nil {
		return systemd.ResolvedState{}, err
	}
	st := systemd.ResolvedState{FallbackDNS: m.FallbackDNS, ResolvConfMode: m.ResolvConfMode, Current: m.CurrentDNSServer}
	idx := map[int]bool{}
	for _, s := range m.DNS {
		if s.IfIndex == 0 {
			st.DNS = append(st.DNS, s)
		} else {
			idx[s.IfIndex] = true
		}
	}
	for _, d := range m.Domains {
		if d.IfIndex == 0 {
			st.Domains = append(st.Domains, d.Domain)
		} else {
			idx[d.IfIndex] = true
		}
	}
	links, err := c.LinkIndexes(ctx)
	if err != nil && !errors.Is(err, ErrLinkGone) {
		return st, err
	}
	for _, i := range links {
		idx[i] = true
	}
	order := make([]int, 0, len(idx))
	for i := range idx {
		order = append(order, i)
	}
	slices.Sort(order)
	for _, i := range order {
		li, err := c.Link(ctx, i)
		if errors.Is(err, ErrLinkGone) {
			continue
		}
		if err != nil {
			return st, err
		}
		st.Links = append(st.Links, li)
	}
	st.Delegates, err = c.Delegates(ctx)
	return st, err
}

// SetLinkDNS sets a link's DNS servers (SetLinkDNSEx, keeping ports and server names; on a resolved
// older than 246, SetLinkDNS, which has neither). ErrLinkBusy: networkd manages the link.
func (c *Resolved) SetLinkDNS(ctx context.Context, ifindex int, servers []systemd.DNSServer) error {
	return c.do(ctx, fmt.Sprintf("set DNS on link %d", ifindex), func(ctx context.Context, conn *dbus.Conn) error {
		ex := make([]wireLinkEx, 0, len(servers))
		plain := make([]wireLinkSrv, 0, len(servers))
		for _, s := range servers {
			ex = append(ex, wireLinkEx{Family: family(s.Addr), Addr: s.Addr.AsSlice(), Port: s.Port, Name: s.Name})
			plain = append(plain, wireLinkSrv{Family: family(s.Addr), Addr: s.Addr.AsSlice()})
		}
		err := call(ctx, conn, resolvedPath, managerIface+".SetLinkDNSEx", int32(ifindex), ex).Err
		if errors.Is(busError(err), ErrUnknownMethod) {
			err = call(ctx, conn, resolvedPath, managerIface+".SetLinkDNS", int32(ifindex), plain).Err
		}
		return err
	})
}

// SetLinkDomains sets a link's search and routing domains. ErrLinkBusy: networkd manages the link.
func (c *Resolved) SetLinkDomains(ctx context.Context, ifindex int, domains []systemd.Domain) error {
	return c.do(ctx, fmt.Sprintf("set domains on link %d", ifindex), func(ctx context.Context, conn *dbus.Conn) error {
		w := make([]wireLinkDom, 0, len(domains))
		for _, d := range domains {
			w = append(w, wireLinkDom{Name: d.Name, RoutingOnly: d.RoutingOnly})
		}
		return call(ctx, conn, resolvedPath, managerIface+".SetLinkDomains", int32(ifindex), w).Err
	})
}

// RevertLink drops every per-link setting made over D-Bus on a link.
func (c *Resolved) RevertLink(ctx context.Context, ifindex int) error {
	return c.do(ctx, fmt.Sprintf("revert link %d", ifindex), func(ctx context.Context, conn *dbus.Conn) error {
		return call(ctx, conn, resolvedPath, managerIface+".RevertLink", int32(ifindex)).Err
	})
}

// FlushCaches empties resolved's caches.
func (c *Resolved) FlushCaches(ctx context.Context) error {
	return c.do(ctx, "flush systemd-resolved's caches", func(ctx context.Context, conn *dbus.Conn) error {
		return call(ctx, conn, resolvedPath, managerIface+".FlushCaches").Err
	})
}

// decodeDomains reads a link's or a delegate's Domains property, a(sb): each name and whether it is
// routing-only.
func decodeDomains(v dbus.Variant) ([]systemd.Domain, error) {
	var w []wireLinkDom
	if err := v.Store(&w); err != nil {
		return nil, fmt.Errorf("decode property Domains: %w", err)
	}
	var out []systemd.Domain
	for _, d := range w {
		out = append(out, systemd.Domain{Name: d.Name, RoutingOnly: d.RoutingOnly})
	}
	return out, nil
}
