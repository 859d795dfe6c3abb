package reconcile

import (
	"context"
	"fmt"
	"time"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/store"
)

// Targets is what restore may change on this node (store.Store.Targets): what nodedns manages
// whatever the config says (store.DefaultTargets), and the files the config makes it write
// (kubelet.resolvConf, the metrics textfiles). Integrations that manage more add their paths here.
func Targets(cfg config.Config) *store.Targets {
	t := store.DefaultTargets(config.StateDir).Add(node.Writes()...).AddLinked(node.LinkedWrites()...)
	for _, ps := range cfg.WrittenPaths() {
		t.Add(ps...)
	}
	return t
}

// Hold takes nodedns's state lock for a whole change (docs/contract.md, invariant 4): apply, each
// daemon pass, restore and `netplan pin` hold it from reading the node to the last rename, so two
// commands never interleave (a restore between apply's backup and apply's write lost the original).
// It waits at most wait (0: store.DefaultLockWait), then fails naming the holder's PID. Once held,
// the temp files and work directories dead nodedns processes left are removed; release removes this
// run's work directories again and lets go. Hold nests: only the outermost release unlocks. One
// goroutine drives a Node. (Temp files are swept only when the lock shows an earlier holder died
// holding it.)
func (n *Node) Hold(wait time.Duration) (release func(), err error) {
	return n.HoldContext(context.Background(), wait)
}

// HoldContext is Hold that also stops waiting for the lock when ctx is done (the daemon's SIGTERM:
// a pass that has not taken the lock has changed nothing and can be dropped).
func (n *Node) HoldContext(ctx context.Context, wait time.Duration) (release func(), err error) {
	if n.held != nil {
		n.holds++
		return n.releaseOne, nil
	}
	st := n.store()
	l, err := st.LockContext(ctx, wait)
	if err != nil {
		return nil, err
	}
	n.held, n.holds, n.tempDirs = l, 1, store.TempDirCalls()
	// Temp files of the targets can be left only by a holder that died holding the lock; work
	// directories also by a `check` that was killed (it takes no lock). The first sweep walks a
	// dozen directories, so a daemon pass makes it only after such a death.
	sweep := st.SweepWork
	if l.Interrupted != 0 {
		sweep = func() ([]string, error) { return st.Sweep(l) }
	}
	removed, err := sweep()
	for _, p := range removed {
		n.log().Info("removed a leftover of an interrupted nodedns", "path", p)
	}
	if err != nil {
		n.log().Warn("cannot remove every leftover of an interrupted nodedns", "err", err)
	}
	return n.releaseOne, nil
}

func (n *Node) releaseOne() {
	if n.held == nil {
		return
	}
	n.holds--
	if n.holds > 0 {
		return
	}
	// The work directories this hold made (none unless something asked for TempDir).
	if store.TempDirCalls() != n.tempDirs {
		if _, err := n.store().SweepWork(); err != nil {
			n.log().Warn("cannot remove nodedns's work directories", "err", err)
		}
	}
	if err := n.held.Unlock(); err != nil {
		n.log().Warn("releasing the state lock", "err", fmt.Errorf("unlock: %w", err))
	}
	n.held = nil
}
