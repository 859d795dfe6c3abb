package bus

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	sdbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/nodedns/nodedns/systemd"
)

// systemdPrivateSocket is PID 1's private D-Bus socket: it answers even while dbus-daemon is down,
// so a restart does not depend on the bus it may be waiting for.
const systemdPrivateSocket = "/run/systemd/private"

// Restarter restarts systemd-resolved so that it reloads resolved.conf.d. It never signals resolved:
// SIGHUP kills resolved 252 (exit 129) instead of reloading it. With Unit set and no Client it
// restarts that unit and waits for the job alone (kubelet.restart: the unit that starts kubelet).
type Restarter struct {
	// Command, when set (config resolved.restartCommand), is run instead of asking systemd; e.g.
	// where PID 1 is not systemd. Its output is kept for the error.
	Command []string
	// Unit is the unit systemd restarts (default systemd-resolved.service).
	Unit string
	// Client waits until the restarted resolved answers on the bus.
	Client *Resolved
	// Timeout bounds the whole restart, waiting included (default 30s: resolved's own start
	// timeout in its unit is 90s, but a resolved slower than 30s to come back is worth an error).
	Timeout time.Duration
	// DialSystemd connects to systemd's manager. nil: PID 1's private socket when it is there, else
	// the system bus. A seam for tests.
	DialSystemd func(ctx context.Context) (*sdbus.Conn, error)
}

// Restart restarts resolved and waits until a new resolved owns org.freedesktop.resolve1 and
// answers a ping.
func (r *Restarter) Restart(ctx context.Context) error {
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	unit := r.Unit
	if unit == "" {
		unit = systemd.ResolvedUnit
	}
	old := ""
	if r.Client != nil {
		// Not fatal: resolved may be down already, then any new owner will do.
		old, _ = r.Client.NameOwner(ctx)
	}
	if len(r.Command) > 0 {
		cmd := exec.CommandContext(ctx, r.Command[0], r.Command[1:]...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("restart systemd-resolved with %q: %w: %s", strings.Join(r.Command, " "), err, strings.TrimSpace(out.String()))
		}
	} else if err := r.restartUnit(ctx, unit); err != nil {
		return err
	}
	if r.Client == nil {
		return nil
	}
	if err := r.Client.WaitReady(ctx, old); err != nil {
		return fmt.Errorf("restart systemd-resolved: %w", err)
	}
	return nil
}

func (r *Restarter) restartUnit(ctx context.Context, unit string) error {
	dial := r.DialSystemd
	if dial == nil {
		dial = dialSystemd
	}
	conn, err := dial(ctx)
	if err != nil {
		return fmt.Errorf("restart %s: connect to systemd: %w", unit, err)
	}
	defer conn.Close()
	done := make(chan string, 1)
	if _, err := conn.RestartUnitContext(ctx, unit, "replace", done); err != nil {
		return fmt.Errorf("restart %s: %w", unit, busError(err))
	}
	select {
	case res := <-done:
		if res != "done" {
			return fmt.Errorf("restart %s: job %s (see `journalctl -u %s`)", unit, res, unit)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("restart %s: wait for the job: %w", unit, ctx.Err())
	}
}

func dialSystemd(ctx context.Context) (*sdbus.Conn, error) {
	if _, err := os.Stat(systemdPrivateSocket); err == nil && os.Geteuid() == 0 {
		c, err := sdbus.NewSystemdConnectionContext(ctx)
		if err == nil {
			return c, nil
		}
		// Fall through to the bus: the private socket can refuse while systemd re-executes.
	}
	c, err := sdbus.NewSystemConnectionContext(ctx)
	if err != nil {
		return nil, errors.Join(err, errors.New("is PID 1 systemd? set resolved.restartCommand otherwise"))
	}
	return c, nil
}
