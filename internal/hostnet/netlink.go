// Package hostnet reads the host's network state from the kernel over rtnetlink: an interface with
// its addresses, the local routing table, the policy routing rules and the default-route uplink.
// Every dump is retried while the kernel reports it interrupted (as cilium's safenetlink does), so
// no caller judges a torn view. It only reads. What it reads comes as netstate's records, which the
// self-check judges without importing this package.
package hostnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/nodedns/nodedns/internal/hostnet/netstate"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Reader reads the kernel's view of interfaces, routes and rules.
type Reader interface {
	// Link returns the named interface with its addresses; nil and no error when it does not exist.
	Link(name string) (*netstate.Link, error)
	// LocalRoutes returns the routes of the local table for family 4 or 6.
	LocalRoutes(family int) ([]netstate.Route, error)
	// Rules returns the policy routing rules for family 4 or 6.
	Rules(family int) ([]netstate.Rule, error)
	// Uplink returns the interface of the IPv4 default route (the main table's, lowest metric);
	// nil and no error when there is none.
	Uplink() (*netstate.Uplink, error)
}

type netlinkReader struct{ h *netlink.Handle }

// New returns a Reader over rtnetlink in the caller's network namespace.
func New() Reader { return netlinkReader{h: &netlink.Handle{}} }

// dumpRetries bounds how often a dump is repeated when the kernel says it changed under us
// (NLM_F_DUMP_INTR: netlink v1.3 returns partial results with ErrDumpInterrupted); a node whose
// routes churn that fast is reported as unreadable rather than judged on a torn view.
const dumpRetries = 5

// RetryDump runs a netlink dump again while the kernel reports it interrupted, as cilium's
// safenetlink does, and wraps a final error with what.
func RetryDump[T any](what string, f func() (T, error)) (T, error) {
	var v T
	var err error
	for range dumpRetries {
		v, err = f()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			break
		}
	}
	if err != nil {
		return v, fmt.Errorf("%s: %w", what, err)
	}
	return v, nil
}

func nlFamily(family int) int {
	if family == 6 {
		return netlink.FAMILY_V6
	}
	return netlink.FAMILY_V4
}

func (r netlinkReader) Link(name string) (*netstate.Link, error) {
	l, err := r.h.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil, nil
		}
		return nil, fmt.Errorf("read link %s: %w", name, err)
	}
	a := l.Attrs()
	out := &netstate.Link{Name: a.Name, Index: a.Index, Type: l.Type(), AdminUp: a.Flags&net.FlagUp != 0, OperState: a.OperState.String()}
	addrs, err := RetryDump("list addresses of "+name, func() ([]netlink.Addr, error) { return r.h.AddrList(l, netlink.FAMILY_ALL) })
	if err != nil {
		return out, err
	}
	for _, ad := range addrs {
		if p, ok := prefixOf(ad.IPNet); ok {
			out.Addrs = append(out.Addrs, p)
		}
	}
	return out, nil
}

func (r netlinkReader) LocalRoutes(family int) ([]netstate.Route, error) {
	filter := &netlink.Route{Table: netstate.TableLocal}
	rs, err := RetryDump(fmt.Sprintf("list local routes (IPv%d)", family), func() ([]netlink.Route, error) {
		return r.h.RouteListFiltered(nlFamily(family), filter, netlink.RT_FILTER_TABLE)
	})
	if err != nil {
		return nil, err
	}
	var out []netstate.Route
	for _, rt := range rs {
		if rt.Type != unix.RTN_LOCAL {
			continue
		}
		if p, ok := prefixOf(rt.Dst); ok {
			out = append(out, netstate.Route{Dst: p, LinkIndex: rt.LinkIndex})
		}
	}
	return out, nil
}

func (r netlinkReader) Rules(family int) ([]netstate.Rule, error) {
	rs, err := RetryDump(fmt.Sprintf("list rules (IPv%d)", family), func() ([]netlink.Rule, error) { return r.h.RuleList(nlFamily(family)) })
	if err != nil {
		return nil, err
	}
	out := make([]netstate.Rule, 0, len(rs))
	for _, x := range rs {
		ru := netstate.Rule{Family: family, Priority: x.Priority, Table: x.Table, Goto: x.Goto, IIF: x.IifName, OIF: x.OifName, Mark: x.Mark, Invert: x.Invert}
		if ru.Goto < 0 {
			ru.Goto = 0
		}
		if x.Mask != nil {
			ru.Mask = *x.Mask
		} else if x.Mark != 0 {
			ru.Mask = 0xffffffff
		}
		ru.Src, _ = prefixOf(x.Src)
		ru.Dst, _ = prefixOf(x.Dst)
		out = append(out, ru)
	}
	return out, nil
}

func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), ones), true
}

func (r netlinkReader) Uplink() (*netstate.Uplink, error) {
	routes, err := RetryDump("list routes", func() ([]netlink.Route, error) {
		return r.h.RouteListFiltered(unix.AF_INET, &netlink.Route{Table: netstate.TableMain}, netlink.RT_FILTER_TABLE)
	})
	if err != nil {
		return nil, err
	}
	var def *netlink.Route
	for i := range routes {
		rt := &routes[i]
		if rt.Dst != nil && rt.Dst.IP != nil {
			if ones, _ := rt.Dst.Mask.Size(); ones != 0 {
				continue
			}
		}
		if rt.LinkIndex == 0 {
			continue
		}
		if def == nil || rt.Priority < def.Priority {
			def = rt
		}
	}
	if def == nil {
		return nil, nil // no IPv4 default route
	}
	link, err := r.h.LinkByIndex(def.LinkIndex)
	if err != nil {
		return nil, fmt.Errorf("link %d of the default route: %w", def.LinkIndex, err)
	}
	u := &netstate.Uplink{IfName: link.Attrs().Name, IfIndex: def.LinkIndex}
	if gw, ok := netip.AddrFromSlice(def.Gw); ok {
		u.Gateway = gw.Unmap()
	}
	addrs, err := RetryDump("list addresses of "+u.IfName, func() ([]netlink.Addr, error) { return r.h.AddrList(link, unix.AF_INET) })
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		if p, ok := prefixOf(a.IPNet); ok {
			u.Addrs = append(u.Addrs, p)
		}
	}
	return u, nil
}
