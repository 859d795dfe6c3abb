package edges

import (
	"context"
	"io"
	"sync"
)

// lazyBus is the one D-Bus client of an integration (systemd-resolved, NetworkManager), shared by
// its source, actor, reverter and event source: dialled on first use, so a node where the service
// is not in use never connects, and one connection per run. Each client it dials feeds the notices
// channel (forward) until it is closed. The zero value is ready.
type lazyBus[C io.Closer] struct {
	mu      sync.Mutex
	client  C
	dialled bool
	notices chan string
}

// get returns the client, dialling it with dial on first use and starting listen on its events.
func (l *lazyBus[C]) get(ctx context.Context, dial func(context.Context) (C, error), listen func(C, chan<- string)) (C, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dialled {
		return l.client, nil
	}
	c, err := dial(ctx)
	if err != nil {
		var zero C
		return zero, err
	}
	l.client, l.dialled = c, true
	go listen(c, l.noticesLocked())
	return c, nil
}

// close closes the client if one was made; the next get dials again.
func (l *lazyBus[C]) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.dialled {
		return nil
	}
	err := l.client.Close()
	var zero C
	l.client, l.dialled = zero, false
	return err
}

// events is the daemon's notices channel: it exists before the client does and outlives
// reconnects; it holds one notice (a notice that finds one pending is dropped: the pending one's
// pass reads the whole state). It is never closed.
func (l *lazyBus[C]) events() chan string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.noticesLocked()
}

func (l *lazyBus[C]) noticesLocked() chan string {
	if l.notices == nil {
		l.notices = make(chan string, 1)
	}
	return l.notices
}

// forward turns one client's events into notices until the client is closed (its channel
// closes). notice names what an event needs ("" for no pass) and logs it.
func forward[E any](events <-chan E, out chan<- string, notice func(E) string) {
	for e := range events {
		what := notice(e)
		if what == "" {
			continue
		}
		select {
		case out <- what:
		default: // a notice is pending: its pass reads the state this event changed
		}
	}
}
