package standby

// netwatch.go: the kernel's word that the cache's interface or one of its addresses is gone
// (RTM_DELLINK, RTM_DELADDR on rtnetlink's link and address groups), as it happens: node-cache's
// teardown removes its interface last, and the standby puts it back within milliseconds.

import (
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// netEvent is a cache interface or address gone.
type netEvent struct {
	at   time.Time
	what string
}

// netWatch subscribes to link and address changes and reports those that take the interface named
// ifname, or one of addrs, away. A subscription that fails (its socket overflowed) is renewed and
// reported as an event, so the standby looks at the node again.
type netWatch struct {
	Events chan netEvent
	done   chan struct{}
	once   sync.Once
}

func watchNet(ifname string, addrs []netip.Addr) (*netWatch, error) {
	w := &netWatch{Events: make(chan netEvent, 16), done: make(chan struct{})}
	if err := w.subscribe(ifname, addrs); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *netWatch) subscribe(ifname string, addrs []netip.Addr) error {
	links := make(chan netlink.LinkUpdate, 64)
	as := make(chan netlink.AddrUpdate, 64)
	done := make(chan struct{})
	failed := make(chan error, 2)
	onErr := func(err error) {
		select {
		case failed <- err:
		default:
		}
	}
	if err := netlink.LinkSubscribeWithOptions(links, done, netlink.LinkSubscribeOptions{ErrorCallback: onErr}); err != nil {
		return fmt.Errorf("subscribe to link changes: %w", err)
	}
	if err := netlink.AddrSubscribeWithOptions(as, done, netlink.AddrSubscribeOptions{ErrorCallback: onErr}); err != nil {
		close(done)
		return fmt.Errorf("subscribe to address changes: %w", err)
	}
	go func() {
		defer close(done)
		for {
			select {
			case <-w.done:
				return
			case u, ok := <-links:
				if !ok {
					links = nil
					continue
				}
				if u.Header.Type == unix.RTM_DELLINK && u.Link != nil && u.Link.Attrs().Name == ifname {
					w.send(netEvent{at: time.Now(), what: fmt.Sprintf("interface %s deleted (RTM_DELLINK)", ifname)})
				}
			case u, ok := <-as:
				if !ok {
					as = nil
					continue
				}
				a, _ := netip.AddrFromSlice(u.LinkAddress.IP)
				for _, c := range addrs {
					if !u.NewAddr && a.Unmap() == c {
						w.send(netEvent{at: time.Now(), what: fmt.Sprintf("address %s deleted (RTM_DELADDR)", c)})
					}
				}
			case err := <-failed:
				// The subscription is over (an overflowed socket loses events): start another and
				// have the node looked at, as if something went.
				for {
					if serr := w.subscribe(ifname, addrs); serr == nil {
						break
					}
					select {
					case <-w.done:
						return
					case <-time.After(time.Second):
					}
				}
				w.send(netEvent{at: time.Now(), what: fmt.Sprintf("link and address events lost (%v)", err)})
				return
			}
		}
	}()
	return nil
}

func (w *netWatch) send(e netEvent) {
	select {
	case w.Events <- e:
	default: // one pending event is enough: the handler looks at the whole node
	}
}

// Close ends the watch.
func (w *netWatch) Close() { w.once.Do(func() { close(w.done) }) }
