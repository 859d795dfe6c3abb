package bus

import (
	"context"
	"errors"
	"fmt"

	sdbus "github.com/coreos/go-systemd/v22/dbus"
)

// UnitProcess is what systemd says of a service's processes: its main process (MainPID, 0 when it
// runs none) and its control group (ControlGroup, the path in systemd's cgroup hierarchy: every
// process the unit started is in it, and only root can put another there).
type UnitProcess struct {
	MainPID      int
	ControlGroup string
}

// UnitProcesses asks systemd for the main process and control group of each of units (the Service
// interface's MainPID and ControlGroup); a unit that is not loaded is left out. dial nil: PID 1's
// private socket when it is there, else the system bus (as Restarter). nodedns uses it to tell
// root's kubelet from other processes (docs/contract.md "Kubelet's config"). An error only when
// systemd cannot be asked at all or answers no unit.
func UnitProcesses(ctx context.Context, dial func(ctx context.Context) (*sdbus.Conn, error), units []string) (map[string]UnitProcess, error) {
	if dial == nil {
		dial = dialSystemd
	}
	conn, err := dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("ask systemd for the processes of %v: %w", units, err)
	}
	defer conn.Close()
	out := map[string]UnitProcess{}
	var errs []error
	for _, u := range units {
		var up UnitProcess
		p, err := conn.GetServicePropertyContext(ctx, u, "MainPID")
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", u, err))
			continue
		}
		if pid, ok := p.Value.Value().(uint32); ok {
			up.MainPID = int(pid)
		}
		if p, err := conn.GetServicePropertyContext(ctx, u, "ControlGroup"); err == nil {
			up.ControlGroup, _ = p.Value.Value().(string)
		}
		if up.MainPID > 0 || up.ControlGroup != "" {
			out[u] = up
		}
	}
	if len(errs) == len(units) && len(units) > 0 {
		return nil, fmt.Errorf("ask systemd for the processes of its units: %w", errors.Join(errs...))
	}
	return out, nil
}
