// Package busconn is one private system-bus connection owned by one goroutine: the way nodedns
// talks to systemd-resolved (systemd/bus) and NetworkManager (networkmanager/bus). Every call is
// handed to that goroutine, which also receives the subscribed signals and reconnects with capped
// exponential backoff when the bus goes away (dbus-daemon restarted). Every call has a timeout; a
// call made while the bus is away fails at once with ErrDisconnected instead of waiting. The clients
// keep their own D-Bus names, errors and events; this package holds only the plumbing they share.
package busconn

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/godbus/dbus/v5"
)

// D-Bus error names of the bus itself.
const (
	ErrNameServiceUnknown = "org.freedesktop.DBus.Error.ServiceUnknown"
	ErrNameNameHasNoOwner = "org.freedesktop.DBus.Error.NameHasNoOwner"
	ErrNameUnknownObject  = "org.freedesktop.DBus.Error.UnknownObject"
	ErrNameUnknownMethod  = "org.freedesktop.DBus.Error.UnknownMethod"
)

// Errors of the connection itself; test them with errors.Is.
var (
	// ErrDisconnected: no bus connection at the moment (the goroutine keeps reconnecting).
	ErrDisconnected = errors.New("not connected to the system bus")
	// ErrClosed: the connection was closed.
	ErrClosed = errors.New("bus client closed")
)

// Options configure a connection.
type Options struct {
	// Address is the bus address; "" means the system bus (DBUS_SYSTEM_BUS_ADDRESS or
	// unix:path=/run/dbus/system_bus_socket).
	Address string
	// CallTimeout bounds every call (default 5s). A context with an earlier deadline wins.
	CallTimeout time.Duration
	// MinBackoff and MaxBackoff bound the reconnect backoff after the bus goes away (defaults 100ms
	// and 5s): it doubles from MinBackoff up to MaxBackoff and resets on success.
	MinBackoff, MaxBackoff time.Duration
}

func (o Options) withDefaults() Options {
	if o.CallTimeout <= 0 {
		o.CallTimeout = 5 * time.Second
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 100 * time.Millisecond
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(5*time.Second, o.MinBackoff)
	}
	return o
}

// Handlers are what the owner of a connection is told. They run on the connection's goroutine and
// must not block (hand the news on through a buffered channel that drops when full).
type Handlers struct {
	// Matches are the signal subscriptions, made again after every reconnect.
	Matches [][]dbus.MatchOption
	// Signal gets each subscribed signal.
	Signal func(*dbus.Signal)
	// Lost is told the connection broke; Back that it is connected again.
	Lost func(err error)
	Back func()
	// Error maps an error a call returned (a dbus.Error reply) to the client's own error, before
	// the call's operation is wrapped around it; nil keeps it.
	Error func(error) error
}

// Conn is the connection. Methods are safe for concurrent use.
type Conn struct {
	opts    Options
	h       Handlers
	reqs    chan request
	done    chan struct{}
	stopped chan struct{}
	once    sync.Once
}

type request struct {
	ctx  context.Context
	fn   func(ctx context.Context, conn *dbus.Conn) error
	errc chan error
}

// Dial connects and starts the goroutine. The first connection must succeed (a node without a
// system bus is an error to report, not to wait for); later losses are retried until Close.
func Dial(ctx context.Context, opts Options, h Handlers) (*Conn, error) {
	opts = opts.withDefaults()
	c := &Conn{opts: opts, h: h, reqs: make(chan request), done: make(chan struct{}), stopped: make(chan struct{})}
	conn, sigs, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	go c.loop(conn, sigs)
	return c, nil
}

// dial opens a private connection, authenticates, says Hello and subscribes.
func (c *Conn) dial(ctx context.Context) (*dbus.Conn, chan *dbus.Signal, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
	defer cancel()
	var conn *dbus.Conn
	var err error
	if c.opts.Address != "" {
		conn, err = dbus.Dial(c.opts.Address)
	} else {
		conn, err = dbus.SystemBusPrivate()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("connect to the system bus: %w", err)
	}
	fail := func(op string, err error) (*dbus.Conn, chan *dbus.Signal, error) {
		conn.Close()
		return nil, nil, fmt.Errorf("%s on the system bus: %w", op, err)
	}
	// Auth and Hello take no context in godbus: a hung bus is cut by closing the connection.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if err := conn.Auth(nil); err != nil {
		return fail("authenticate", err)
	}
	if err := conn.Hello(); err != nil {
		return fail("hello", err)
	}
	sigs := make(chan *dbus.Signal, 256)
	conn.Signal(sigs)
	for _, m := range c.h.Matches {
		if err := conn.AddMatchSignalContext(ctx, m...); err != nil {
			return fail("subscribe to signals", c.mapErr(err))
		}
	}
	return conn, sigs, nil
}

func (c *Conn) mapErr(err error) error {
	if err == nil || c.h.Error == nil {
		return err
	}
	return c.h.Error(err)
}

// loop owns the connection: it serves calls one at a time, hands signals on and reconnects after a
// loss.
func (c *Conn) loop(conn *dbus.Conn, sigs chan *dbus.Signal) {
	defer close(c.stopped)
	backoff := c.opts.MinBackoff
	var lastErr error
	var retry *time.Timer
	defer func() {
		if conn != nil {
			conn.Close()
		}
		if retry != nil {
			retry.Stop()
		}
	}()
	for {
		var connDone <-chan struct{}
		var retryC <-chan time.Time
		var sigC <-chan *dbus.Signal
		if conn != nil {
			connDone, sigC = conn.Context().Done(), sigs
		} else if retry != nil {
			retryC = retry.C
		}
		select {
		case <-c.done:
			return
		case r := <-c.reqs:
			if conn == nil {
				r.errc <- fmt.Errorf("%w (reconnecting: %v)", ErrDisconnected, lastErr)
				continue
			}
			r.errc <- c.mapErr(r.fn(r.ctx, conn))
		case s, ok := <-sigC:
			if !ok {
				sigs = nil // the connection closed: connDone fires next
				continue
			}
			if c.h.Signal != nil {
				c.h.Signal(s)
			}
		case <-connDone:
			lastErr = conn.Close()
			if lastErr == nil {
				lastErr = errors.New("connection closed")
			}
			conn, sigs = nil, nil
			if c.h.Lost != nil {
				c.h.Lost(lastErr)
			}
			backoff = c.opts.MinBackoff
			retry = time.NewTimer(backoff)
		case <-retryC:
			nc, ns, err := c.dial(context.Background())
			if err != nil {
				lastErr = err
				backoff = min(backoff*2, c.opts.MaxBackoff)
				retry.Reset(backoff)
				continue
			}
			conn, sigs, retry = nc, ns, nil
			if c.h.Back != nil {
				c.h.Back()
			}
		}
	}
}

// Close stops the goroutine and closes the connection. It is safe to call more than once; no
// handler runs after it returns.
func (c *Conn) Close() {
	c.once.Do(func() { close(c.done) })
	<-c.stopped
}

// Do runs fn on the connection's goroutine with the call timeout, and wraps an error with op.
func (c *Conn) Do(ctx context.Context, op string, fn func(ctx context.Context, conn *dbus.Conn) error) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
	defer cancel()
	r := request{ctx: ctx, fn: fn, errc: make(chan error, 1)}
	select {
	case c.reqs <- r:
	case <-c.done:
		return fmt.Errorf("%s: %w", op, ErrClosed)
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", op, ctx.Err())
	}
	var err error
	select {
	case err = <-r.errc:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// ErrorName is the D-Bus error name of err's reply, "" when err is no D-Bus error reply.
func ErrorName(err error) (name, message string) {
	var de dbus.Error
	var dp *dbus.Error
	switch {
	case errors.As(err, &de):
	case errors.As(err, &dp) && dp != nil:
		de = *dp
	default:
		return "", ""
	}
	if len(de.Body) > 0 {
		message, _ = de.Body[0].(string)
	}
	return de.Name, message
}

// NameOwner returns the unique name that owns the well-known name, "" when nobody does.
func (c *Conn) NameOwner(ctx context.Context, name string) (string, error) {
	var owner string
	err := c.Do(ctx, "get the owner of "+name, func(ctx context.Context, conn *dbus.Conn) error {
		err := conn.BusObject().CallWithContext(ctx, "org.freedesktop.DBus.GetNameOwner", 0, name).Store(&owner)
		if n, _ := ErrorName(err); n == ErrNameNameHasNoOwner || n == ErrNameServiceUnknown {
			owner = ""
			return nil
		}
		return err
	})
	return owner, err
}

// WaitOwner waits until name has an owner other than old ("": any owner) for which answers
// succeeds, or ctx ends. After a restart it tells the new service from the old one, which may still
// be on the bus when a restart command returns. who names the service in errors.
func (c *Conn) WaitOwner(ctx context.Context, name, old, who string, answers func(ctx context.Context) error) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		owner, err := c.NameOwner(ctx, name)
		switch {
		case err != nil:
			last = err
		case owner == "":
			last = fmt.Errorf("%s is not on the system bus", who)
		case owner == old:
			last = fmt.Errorf("the old %s (%s) still owns %s", who, old, name)
		default:
			if err := answers(ctx); err != nil {
				last = err
			} else {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s on the bus: %w (last: %v)", who, ctx.Err(), last)
		case <-tick.C:
		}
	}
}

// Reply is a D-Bus error reply kept by name. errors.Is matches it against the sentinel errors
// clients declare with Sentinel, by the name alone: messages differ between versions and locales.
type Reply struct {
	Name    string
	Message string
}

func (e *Reply) Error() string {
	if e.Message == "" {
		return e.Name
	}
	return e.Name + ": " + e.Message
}

// Is reports whether the reply's name is one of those target stands for.
func (e *Reply) Is(target error) bool {
	sentinels.RLock()
	defer sentinels.RUnlock()
	for _, n := range sentinels.m[target] {
		if n == e.Name {
			return true
		}
	}
	return false
}

var sentinels = struct {
	sync.RWMutex
	m map[error][]string
}{m: map[error][]string{}}

// Sentinel declares err as the error a client's callers test for (errors.Is) when a call fails
// with a D-Bus error reply named by one of names, and returns it.
func Sentinel(err error, names ...string) error {
	sentinels.Lock()
	defer sentinels.Unlock()
	sentinels.m[err] = append(sentinels.m[err], names...)
	return err
}

// AsReply turns a D-Bus error reply into a *Reply and leaves other errors (timeouts, a closed
// connection) as they are. It is the Handlers.Error of the clients.
func AsReply(err error) error {
	if err == nil {
		return nil
	}
	name, msg := ErrorName(err)
	if name == "" {
		return err
	}
	return &Reply{Name: name, Message: msg}
}
