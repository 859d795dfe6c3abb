package edges

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodedns/nodedns/internal/edges/netplancmd"
	"github.com/nodedns/nodedns/internal/policy"
	"github.com/nodedns/nodedns/internal/store"
	"github.com/nodedns/nodedns/netplan"
)

// netplanValidator runs `netplan generate --root-dir` on a copy of the node's netplan files with
// the planned file in place. A rejection keeps the change from being written and carries netplan's
// own file:line:col message.
type netplanValidator struct {
	store  *store.Store
	runner netplancmd.Runner // a test's; the zero value: netplanRunner(store)
}

// NetplanRunner is the netplan runner of the run's node (`netplan pin --dry-run` shows `netplan
// get` through it).
func (e *Edges) NetplanRunner() (netplancmd.Runner, error) { return netplanRunner(e.Store) }

// netplanRunner is the netplan runner of the node st holds: its copies go into nodedns's work
// directory (workDir), so a run under --root leaves nothing outside it.
func netplanRunner(st *store.Store) (netplancmd.Runner, error) {
	dir, err := workDir(st)
	return netplancmd.Runner{TempDir: dir}, err
}

// workDir is where the validators make their copies: nodedns's work directory under the node's
// state directory (store.Store.TempDir), which the next holder of the state lock sweeps when a
// killed run left something there. A user who cannot write it (a non-root `nodedns plan` on a live
// node) gets "" (the system's temp directory); untrusted state is an error.
func workDir(st *store.Store) (string, error) {
	dir, err := st.TempDir()
	if err == nil && unix.Access(dir, unix.W_OK|unix.X_OK) == nil {
		return dir, nil
	}
	var ue *store.UntrustedError
	if errors.As(err, &ue) {
		return "", err
	}
	return "", nil
}

func (v netplanValidator) run() (netplancmd.Runner, error) {
	if v.runner.TempDir != "" || v.runner.Bin != "" {
		return v.runner, nil
	}
	return netplanRunner(v.store)
}

func (v netplanValidator) Validate(ctx context.Context, root string, c policy.Change) error {
	if c.Path != netplan.NodednsFile {
		return nil
	}
	var data []byte
	if c.Op == policy.OpWrite {
		data = c.After
	}
	r, err := v.run()
	if err == nil {
		err = r.Validate(ctx, root, c.Path, data)
	}
	if err != nil {
		return fmt.Errorf("validate %s: %w", c.Path, err)
	}
	return nil
}

// Explain implements reconcile.Explainer: when the netplan change is blocked because nodedns could
// not read the node's netplan tree, netplan itself judges the tree as it is, and its own
// file:line:col message becomes the reason (nodedns's YAML reader may name another line: a tab in
// the indentation of line 6 is reported on line 5 by the YAML library, on 6:1 by netplan 0.106).
func (v netplanValidator) Explain(ctx context.Context, root string, b policy.Blocked) (string, bool) {
	if b.Target != netplan.NodednsFile {
		return "", false
	}
	r, err := v.run()
	if err != nil {
		return "", false
	}
	_, err = r.Generate(ctx, root, nil)
	var ge *netplancmd.GenerateError
	if !errors.As(err, &ge) {
		return "", false // netplan accepts the tree (or could not run): policy's reason stands
	}
	return fmt.Sprintf("netplan rejects the node's netplan files (%s); the netplan change waits until they are fixed", strings.TrimSuffix(ge.Message, ":")), true
}

// commands runs the commands that make a netplan or networkd change live (policy.NetplanApply,
// policy.NetworkctlReload). Policy plans them only with netplan.apply: true.
type commands struct{}

// commandTimeout bounds `netplan apply`, which restarts networkd and waits for udev.
const commandTimeout = 2 * time.Minute

func (commands) Handles(a policy.Action) bool {
	switch a.(type) {
	case policy.NetplanApply, policy.NetworkctlReload:
		return true
	}
	return false
}

func (commands) Do(ctx context.Context, a policy.Action) error {
	var argv []string
	switch a.(type) {
	case policy.NetplanApply:
		argv = []string{"netplan", "apply"}
	case policy.NetworkctlReload:
		argv = []string{"networkctl", "reload"}
	default:
		return fmt.Errorf("%s: not a command action", a.Kind())
	}
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
