package bus

import (
	"context"
	"errors"
	"fmt"

	"github.com/godbus/dbus/v5"

	"github.com/nodedns/nodedns/internal/busconn"
	"github.com/nodedns/nodedns/systemd"
)

// delegateIface is the interface of resolved's DNS delegate objects (systemd 258+).
const delegateIface = "org.freedesktop.resolve1.DnsDelegate"

// Delegates reads the DNS delegates resolved runs with: Manager.ListDelegates (a(so): id and object
// path), then each object's DNS (a(iiayqs), as DNSEx), Domains (a(sb)) and DefaultRoute (b).
// Measured on resolved 262; resolved 257 and older have no ListDelegates, which reads as none. A
// delegate that goes away between listing and reading is skipped.
func (c *Resolved) Delegates(ctx context.Context) ([]systemd.DelegateInfo, error) {
	var out []systemd.DelegateInfo
	err := c.do(ctx, "read systemd-resolved's DNS delegates", func(ctx context.Context, conn *dbus.Conn) error {
		out = nil
		var list []struct {
			ID   string
			Path dbus.ObjectPath
		}
		if err := call(ctx, conn, resolvedPath, managerIface+".ListDelegates").Store(&list); err != nil {
			if errors.Is(busError(err), ErrUnknownMethod) {
				return nil
			}
			return err
		}
		for _, d := range list {
			props, err := busconn.GetAll(ctx, conn, systemd.ResolvedBusName, d.Path, delegateIface)
			if err != nil {
				if errors.Is(busError(err), ErrLinkGone) {
					continue
				}
				return err
			}
			di, err := decodeDelegate(d.ID, props)
			if err != nil {
				return err
			}
			out = append(out, di)
		}
		return nil
	})
	return out, err
}

func decodeDelegate(id string, props map[string]dbus.Variant) (systemd.DelegateInfo, error) {
	di := systemd.DelegateInfo{ID: id}
	var errs []error
	if v, ok := props["DNS"]; ok {
		s, err := decodeServers(v, true, false, 0)
		di.DNS = s
		errs = append(errs, err)
	}
	if v, ok := props["Domains"]; ok {
		var err error
		di.Domains, err = decodeDomains(v)
		errs = append(errs, err)
	}
	if v, ok := props["DefaultRoute"]; ok {
		_ = v.Store(&di.DefaultRoute)
	}
	if err := errors.Join(errs...); err != nil {
		return di, fmt.Errorf("decode delegate %q properties: %w", id, err)
	}
	return di, nil
}
