package edges

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	sdbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/nodedns/nodedns/internal/policy"
	"github.com/nodedns/nodedns/systemd/bus"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/kubelet"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/nodefs"
)

// kubeletProcess is step 1 of docs/contract.md "Kubelet's config": the running kubelet's own
// --config, from /proc/PID/cmdline (kubelet.FindProcess). It beats whatever the unit files say (a unit edited without a
// restart, a kubelet started by hand or by another supervisor) and is used only on the live node.
type kubeletProcess struct {
	cfg   config.Config
	proc  string        // "/proc"; a fake tree in tests
	files nodefs.Reader // the node's files, to read the config found
}

func (kubeletProcess) Name() string { return "kubelet process" }

func (k kubeletProcess) Observe(_ context.Context, s *node.Snapshot) error {
	if k.cfg.Kubelet.Config != "" && k.cfg.Kubelet.Config != config.KubeletConfigAuto {
		return nil // a path in the config names the file directly
	}
	found, ok, err := kubelet.FindProcess(k.proc)
	if err != nil {
		return err
	}
	if ok {
		s.UseKubeletConfig(k.files, kubelet.Complete(k.files, found))
		if k.cfg.Kubelet.Manage && found.PID > 0 {
			// docs/contract.md "kubelet.manage": a kubelet started after nodedns changed its config
			// reads the new one.
			if t, err := kubelet.StartTime(k.proc, found.PID); err == nil {
				s.KubeletStarted = t
			}
		}
	}
	return nil
}

// KubeletRestarter is the Actor of policy.RestartKubelet (kubelet.restart, docs/contract.md
// "kubelet.manage"): the unit that starts kubelet is restarted over systemd's D-Bus API, in
// "replace" mode, and the job's result awaited, with the restart machinery systemd-resolved's
// restart uses (bus.Restarter).
type KubeletRestarter struct {
	// Timeout bounds the restart, waiting for the job included (default 3 minutes: k3s and RKE2
	// are Type=notify units that report ready only once their agent runs).
	Timeout time.Duration
	// DialSystemd connects to systemd's manager; nil: PID 1's private socket, else the system bus.
	DialSystemd func(ctx context.Context) (*sdbus.Conn, error)
	Log         *slog.Logger
}

// Handles implements reconcile.Actor.
func (KubeletRestarter) Handles(a policy.Action) bool {
	_, ok := a.(policy.RestartKubelet)
	return ok
}

// Do implements reconcile.Actor.
func (k KubeletRestarter) Do(ctx context.Context, a policy.Action) error {
	rk, ok := a.(policy.RestartKubelet)
	if !ok {
		return fmt.Errorf("%s: not a kubelet action", a.Kind())
	}
	timeout := k.Timeout
	if timeout <= 0 {
		timeout = 3 * time.Minute
	}
	r := &bus.Restarter{Unit: rk.Unit, Timeout: timeout, DialSystemd: k.DialSystemd}
	if err := r.Restart(ctx); err != nil {
		return err
	}
	if k.Log != nil {
		k.Log.Info("restarted the unit that starts kubelet", "unit", rk.Unit, "how", "systemd D-Bus RestartUnit")
	}
	return nil
}
