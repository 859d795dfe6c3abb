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
// --config, from /proc/PID/cmdline (kubelet.FindProcess), of a process the kernel says is root's
// kubelet. It beats whatever the unit files say (a unit edited without a restart, a kubelet started
// by hand or by another supervisor) and is used only on the live node. Where several of root's
// run, the main process of the unit that starts kubelet wins, asked of systemd over D-Bus.
type kubeletProcess struct {
	cfg   config.Config
	proc  string        // "/proc"; a fake tree in tests
	files nodefs.Reader // the node's files, to read the config found
	// units answers what systemd says of each of kubelet.Units, its MainPID and ControlGroup
	// (bus.UnitProcesses); nil: no bus.
	units func(ctx context.Context) (map[string]kubelet.UnitProcess, error)
}

func (kubeletProcess) Name() string { return "kubelet process" }

func (k kubeletProcess) Observe(ctx context.Context, s *node.Snapshot) error {
	// A path in the config names the file directly; the running kubelet is then read only for
	// kubelet.manage's restart, which its start settles.
	named := k.cfg.Kubelet.Config != "" && k.cfg.Kubelet.Config != config.KubeletConfigAuto
	if named && !k.cfg.Kubelet.Manage {
		return nil
	}
	var units kubelet.AskUnits
	if k.units != nil {
		// Asked only when several of root's kubelets run, or one must be verified without ptrace
		// access to it: the answer is D-Bus round trips per unit.
		units = func() map[string]kubelet.UnitProcess {
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			m, err := k.units(ctx)
			if err != nil {
				return nil // no systemd to ask: FindProcess takes the newest
			}
			return m
		}
	}
	scan, err := kubelet.FindProcess(k.proc, units)
	if err != nil {
		return err
	}
	s.KubeletIgnored, s.KubeletUnverified = scan.Ignored, scan.Unverified
	s.KubeletScanned = k.cfg.Kubelet.Manage
	if !scan.OK {
		return nil
	}
	if !named {
		s.UseKubeletConfig(k.files, kubelet.Complete(k.files, scan.Found))
	}
	if k.cfg.Kubelet.Manage && !scan.Started.IsZero() {
		// docs/contract.md "kubelet.manage": a kubelet started after nodedns changed its config
		// reads the new one. Only the chosen process's start time counts: another process named
		// kubelet that started later is no restart of it.
		s.KubeletStarted = scan.Started
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

// unitProcesses asks systemd over D-Bus for the main process and control group of each unit that
// starts kubelet.
func unitProcesses(ctx context.Context) (map[string]kubelet.UnitProcess, error) {
	m, err := bus.UnitProcesses(ctx, nil, kubelet.Units)
	if err != nil {
		return nil, err
	}
	out := make(map[string]kubelet.UnitProcess, len(m))
	for u, up := range m {
		out[u] = kubelet.UnitProcess{MainPID: up.MainPID, ControlGroup: up.ControlGroup}
	}
	return out, nil
}
