package bus

import (
	"context"
	"errors"
	"fmt"

	sdbus "github.com/coreos/go-systemd/v22/dbus"
)

// MainPIDs asks systemd for the main process of each of units (the Service interface's MainPID),
// as PID -> unit; a unit that is not loaded or runs no process (MainPID 0) is left out. dial nil:
// PID 1's private socket when it is there, else the system bus (as Restarter). nodedns uses it to
// tell the kubelet a unit started from other processes of root's (docs/contract.md "Kubelet's
// config"). An error only when systemd cannot be asked at all or answers no unit.
func MainPIDs(ctx context.Context, dial func(ctx context.Context) (*sdbus.Conn, error), units []string) (map[int]string, error) {
	if dial == nil {
		dial = dialSystemd
	}
	conn, err := dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("ask systemd for the main processes of %v: %w", units, err)
	}
	defer conn.Close()
	out := map[int]string{}
	var errs []error
	for _, u := range units {
		p, err := conn.GetServicePropertyContext(ctx, u, "MainPID")
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", u, err))
			continue
		}
		if pid, ok := p.Value.Value().(uint32); ok && pid > 0 {
			out[int(pid)] = u
		}
	}
	if len(errs) == len(units) && len(units) > 0 {
		return nil, fmt.Errorf("ask systemd for the main processes: %w", errors.Join(errs...))
	}
	return out, nil
}
