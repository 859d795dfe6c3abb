package busconn

import (
	"context"
	"sync"

	"github.com/godbus/dbus/v5"
)

// Client is what a client of one D-Bus service is besides its calls: its Conn, the events the
// service's signals become, NameOwner and Close. Events go out on a buffered channel that drops an
// event when full rather than block the connection's goroutine, so a consumer treats any event as
// "read the whole state again", never as a delta. The service getting or losing its owner
// (NameOwnerChanged) and the connection breaking and coming back are events too. systemd/bus's
// Resolved and networkmanager/bus's Client each embed one and make their calls on the Conn
// DialClient returns.
type Client[E any] struct {
	svc    Service[E]
	conn   *Conn
	events chan E
	once   sync.Once
}

// Service says which service a Client talks to and what its events are. Every field is required.
type Service[E any] struct {
	// Name is the service's well-known bus name ("org.freedesktop.resolve1").
	Name string
	// Matches are the subscriptions to the service's own signals; Signal turns each such signal
	// into an event, or none (false).
	Matches [][]dbus.MatchOption
	Signal  func(*dbus.Signal) (E, bool)
	// Started is the event for Name getting an owner (its unique name: the service (re)started),
	// Stopped for Name losing it.
	Started func(owner string) E
	Stopped func() E
	// Lost is the event for the connection breaking (why), Back for it being there again.
	Lost func(err error) E
	Back func() E
}

// eventBuffer is how many events wait for the consumer before further ones are dropped.
const eventBuffer = 64

// DialClient connects (Dial: the first connection must succeed, later losses are retried until
// Close) and returns the client with the connection its calls go through (Conn.Do). Calls fail
// with D-Bus error replies as *Reply (AsReply), which errors.Is matches against Sentinel errors.
func DialClient[E any](ctx context.Context, opts Options, svc Service[E]) (*Client[E], *Conn, error) {
	c := newClient(svc)
	owner := []dbus.MatchOption{dbus.WithMatchSender("org.freedesktop.DBus"), dbus.WithMatchInterface("org.freedesktop.DBus"),
		dbus.WithMatchMember("NameOwnerChanged"), dbus.WithMatchArg(0, svc.Name)}
	conn, err := Dial(ctx, opts, Handlers{
		Matches: append([][]dbus.MatchOption{owner}, svc.Matches...),
		Signal:  c.signal,
		Lost:    func(err error) { c.emit(svc.Lost(err)) },
		Back:    func() { c.emit(svc.Back()) },
		Error:   AsReply,
	})
	if err != nil {
		return nil, nil, err
	}
	c.conn = conn
	return c, conn, nil
}

func newClient[E any](svc Service[E]) *Client[E] {
	return &Client[E]{svc: svc, events: make(chan E, eventBuffer)}
}

// signal turns a signal into the client's event: NameOwnerChanged of the service's name here, the
// service's own signals by Service.Signal.
func (c *Client[E]) signal(s *dbus.Signal) {
	if s.Name != "org.freedesktop.DBus.NameOwnerChanged" {
		if ev, ok := c.svc.Signal(s); ok {
			c.emit(ev)
		}
		return
	}
	// NameOwnerChanged(name, old_owner, new_owner).
	if len(s.Body) < 3 {
		return
	}
	name, _ := s.Body[0].(string)
	owner, _ := s.Body[2].(string)
	switch {
	case name != c.svc.Name:
	case owner == "":
		c.emit(c.svc.Stopped())
	default:
		c.emit(c.svc.Started(owner))
	}
}

func (c *Client[E]) emit(e E) {
	select {
	case c.events <- e:
	default: // full: the consumer re-reads everything on the events it does get
	}
}

// Events returns the event channel, closed by Close.
func (c *Client[E]) Events() <-chan E { return c.events }

// Close stops the connection's goroutine and closes the connection, then the Events channel. It is
// safe to call more than once.
func (c *Client[E]) Close() error {
	c.conn.Close()
	c.once.Do(func() { close(c.events) })
	return nil
}

// NameOwner returns the unique bus name that owns the service's name, "" when none does.
func (c *Client[E]) NameOwner(ctx context.Context) (string, error) {
	return c.conn.NameOwner(ctx, c.svc.Name)
}

// GetAll reads every property of one interface of the object path of the service dest
// (org.freedesktop.DBus.Properties.GetAll). It runs on the connection's goroutine, inside a Do.
func GetAll(ctx context.Context, conn *dbus.Conn, dest string, path dbus.ObjectPath, iface string) (map[string]dbus.Variant, error) {
	var props map[string]dbus.Variant
	err := conn.Object(dest, path).CallWithContext(ctx, "org.freedesktop.DBus.Properties.GetAll", 0, iface).Store(&props)
	return props, err
}
