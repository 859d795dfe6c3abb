// Package reconcile carries out nodedns's decisions on a node: observe, plan, apply the plan with safe
// writes, restore. The daemon's watch loop (`nodedns run`) builds on it.
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/internal/policy"
	"github.com/nodedns/nodedns/internal/store"
)

// Source adds what only the live node can tell (systemd-resolved over D-Bus, netlink) to a snapshot
// read from files. Sources run only on the live node, never under --root.
type Source interface {
	Name() string
	Observe(ctx context.Context, s *node.Snapshot) error
}

// Actor carries out plan actions that are not file writes (restarting resolved, per-link settings
// over D-Bus). It switches on the action's type (policy's action kinds are typed). Actions no actor
// handles stay pending; the edges tests make sure every kind policy can emit has an actor.
type Actor interface {
	Handles(a policy.Action) bool
	Do(ctx context.Context, a policy.Action) error
}

// Validator judges a planned change before it is kept (netplan's own `netplan generate`). A change
// it rejects moves to the plan's Blocked list with the validator's error.
type Validator interface {
	Validate(ctx context.Context, root string, c policy.Change) error
}

// Explainer is a Validator that can also judge the current inputs of a blocked target, replacing
// policy's reason with the judge's own words: netplan's own file:line:col message for a netplan tree
// nodedns's parser could not read, since netplan, not nodedns, decides what is valid netplan.
type Explainer interface {
	Explain(ctx context.Context, root string, b policy.Blocked) (reason string, ok bool)
}

// Node is one node nodedns works on.
type Node struct {
	// Root is "/" for the real node, a directory for --root (files only: no D-Bus, no netlink).
	Root   string
	Config config.Config
	// Store is the node's files under Root (NewStore; edges.New passes the run's). nil: one over
	// the real filesystem is made on first use.
	Store *store.Store
	Log   *slog.Logger
	Now   func() time.Time

	Sources    []Source
	Actors     []Actor
	Validators []Validator

	// held is the state lock while Hold holds it (state.go); holds counts nested Holds.
	held  *store.Lock
	holds int
	// tempDirs is store.TempDirCalls when the lock was taken.
	tempDirs int64
}

// Live reports whether nodedns works on the real node rather than a --root tree.
func (n *Node) Live() bool { return n.Root == "" || n.Root == "/" }

// NewStore is the node's file store: the one way nodedns reads and writes the node's files under
// root ("" or "/": the live node) through fsys (nil: the real filesystem), with nodedns's state
// directory, and restore allowed to change what cfg writes (Targets). A run shares one: edges.New
// builds it and passes it to the node, the integrations, the probes and the metrics textfile.
func NewStore(root string, fsys nodefs.FS, cfg config.Config) *store.Store {
	if root == "" {
		root = "/"
	}
	if fsys == nil {
		fsys = nodefs.OS()
	}
	return &store.Store{Root: root, FS: fsys, StateDir: config.StateDir, Targets: Targets(cfg)}
}

func (n *Node) store() *store.Store {
	if n.Store == nil {
		n.Store = NewStore(n.Root, nil, n.Config)
	}
	return n.Store
}

// SetConfig replaces the node's config (the daemon's SIGHUP), and with it the paths restore may
// change.
func (n *Node) SetConfig(cfg config.Config) {
	n.Config = cfg
	n.store().Targets = Targets(cfg)
}

func (n *Node) now() time.Time {
	if n.Now != nil {
		return n.Now()
	}
	return time.Now()
}

func (n *Node) log() *slog.Logger {
	if n.Log != nil {
		return n.Log
	}
	return slog.New(slog.DiscardHandler)
}

// Observe reads the node (files, then the live sources on a live node), computes the plan and lets
// the validators judge its changes.
func (n *Node) Observe(ctx context.Context) (*node.Snapshot, policy.Plan) {
	return n.ObserveChanged(ctx, &node.Observer{}, nil)
}

// ObserveChanged is Observe re-reading only the files' sources that changed (node.Observer.Observe;
// nil changed: all of them); the live sources are asked every time. The plan is computed on the
// whole snapshot.
func (n *Node) ObserveChanged(ctx context.Context, o *node.Observer, changed []string) (*node.Snapshot, policy.Plan) {
	s := n.snapshot(ctx, o, changed)
	p := policy.Compute(s, n.Config)
	n.validate(ctx, &p)
	n.log().Debug("observed", "upstreams", fmt.Sprint(p.Facts.Upstreams), "upstream_source", p.Facts.UpstreamSource,
		"cache", fmt.Sprint(p.Facts.CacheAddrs), "cluster_dns", fmt.Sprint(p.Facts.ClusterDNS),
		"dhcp_domains", strings.Join(p.Facts.SortedDHCPDomains(), ","), "resolved", s.ResolvedInUse(),
		"problems", len(s.Problems))
	for _, pr := range s.Problems {
		n.log().Warn("input skipped", "problem", pr.String())
	}
	return s, p
}

// snapshot reads the node's files, then (live node) what the sources add: the one snapshot plan,
// apply, check and restore judge by (restore keeps the kubelet file by the kubelet config the running
// kubelet reads, docs/contract.md "Kubelet's config").
func (n *Node) snapshot(ctx context.Context, o *node.Observer, changed []string) *node.Snapshot {
	s := o.Observe(n.store(), n.Config, n.now(), changed)
	if n.Live() {
		for _, src := range n.Sources {
			if err := src.Observe(ctx, s); err != nil {
				s.Problems = append(s.Problems, node.Problem{Source: node.SourceLive, Msg: fmt.Sprintf("%s: %v", src.Name(), err)})
			}
		}
	}
	return s
}

func (n *Node) validate(ctx context.Context, p *policy.Plan) {
	if len(n.Validators) == 0 {
		return
	}
	root := n.Root
	if root == "" {
		root = "/"
	}
	for i := range p.Blocked {
		for _, v := range n.Validators {
			if e, ok := v.(Explainer); ok {
				if reason, ok := e.Explain(ctx, root, p.Blocked[i]); ok {
					p.Blocked[i].Reason = reason
				}
			}
		}
	}
	kept := p.Changes[:0]
	for _, c := range p.Changes {
		var err error
		for _, v := range n.Validators {
			if err = v.Validate(ctx, root, c); err != nil {
				break
			}
		}
		if err != nil {
			p.Blocked = append(p.Blocked, policy.Blocked{Target: c.Path, Reason: err.Error()})
			continue
		}
		kept = append(kept, c)
	}
	p.Changes = kept
}

// Outcome is what Apply did.
type Outcome struct {
	Written []store.WriteResult
	Removed []string
	Done    []policy.Action
	// Pending are actions not carried out: under --root none are, and the live D-Bus ones come with
	// the live resolved client.
	Pending []policy.Action
	Blocked []policy.Blocked
	Errors  []error
}

// Failed reports whether apply must exit non-zero: a write failed or a target is blocked.
func (o Outcome) Failed() bool { return len(o.Errors) > 0 || len(o.Blocked) > 0 }

// Apply carries out every safe change of the plan, then its actions (on a live node, by the actor
// that handles each); a failing target does not stop the others.
func (n *Node) Apply(ctx context.Context, p policy.Plan) Outcome {
	st := n.store()
	o := Outcome{Blocked: p.Blocked}
	for _, c := range p.Changes {
		switch c.Op {
		case policy.OpWrite:
			res, err := st.Write(c.Path, c.After, c.Mode)
			if err != nil {
				o.Errors = append(o.Errors, err) // it names the operation and the path
				n.log().Error("write failed", "path", c.Path, "err", err)
				continue
			}
			o.Written = append(o.Written, res)
			n.log().Info("wrote", "path", c.Path, "target", res.Path, "created", res.Created, "in_place", res.InPlace, "reason", c.Reason)
		case policy.OpRemove:
			if err := st.Remove(c.Path); err != nil {
				o.Errors = append(o.Errors, err) // it names the operation and the path
				continue
			}
			o.Removed = append(o.Removed, c.Path)
			n.log().Info("removed", "path", c.Path, "reason", c.Reason)
		}
	}
actions:
	for _, a := range p.Actions {
		if n.Live() {
			for _, ac := range n.Actors {
				if !ac.Handles(a) {
					continue
				}
				if err := ac.Do(ctx, a); err != nil {
					o.Errors = append(o.Errors, fmt.Errorf("%s %s: %w", a.Kind(), a.Target(), err))
					n.log().Error("action failed", "kind", a.Kind(), "target", a.Target(), "err", err)
				} else {
					o.Done = append(o.Done, a)
					n.log().Info("action done", "kind", a.Kind(), "target", a.Target(), "detail", a.Detail(), "reason", a.Why())
				}
				continue actions
			}
		}
		o.Pending = append(o.Pending, a)
		n.log().Info("action pending", "kind", a.Kind(), "target", a.Target(), "detail", a.Detail(), "reason", a.Why())
	}
	for _, b := range p.Blocked {
		n.log().Warn("blocked", "target", b.Target, "reason", b.Reason)
	}
	return o
}

// Reverter is an Actor that also undoes what it did outside files (per-link settings over D-Bus)
// and reacts to restored files (restarting resolved once its drop-in is gone). On a live node,
// RestoreWith calls every actor that is a Reverter: BeforeRestore before the files are put back
// (its own records are among them), AfterRestore with what the files restore did.
type Reverter interface {
	BeforeRestore(ctx context.Context) ([]store.RestoreResult, error)
	AfterRestore(ctx context.Context, restored []store.RestoreResult) ([]store.RestoreResult, error)
}

// RestoreOptions change what restore does.
type RestoreOptions struct {
	// Forget drops, knowingly, what nodedns left in the files it has no backup of (their backups
	// are lost): the files it created are removed, the header line of those it edited dropped.
	Forget bool
}

// RestoreWith undoes every change nodedns made, from its backups, and (live) the per-link settings
// its actors made, under the state lock. The kubelet resolv.conf is kept while kubelet's config
// still points at it: removing it would stop kubelet from starting pods. Files that carry nodedns's
// mark with no backup make it fail with a *LostBackupsError listing them, unless opts.Forget. A
// failing step does not stop the others.
func (n *Node) RestoreWith(ctx context.Context, opts RestoreOptions) ([]store.RestoreResult, error) {
	release, err := n.Hold(0)
	if err != nil {
		return nil, err
	}
	defer release()
	var reverters []Reverter
	if n.Live() {
		for _, a := range n.Actors {
			if r, ok := a.(Reverter); ok {
				reverters = append(reverters, r)
			}
		}
	}
	var pre []store.RestoreResult
	var errs []error
	for _, r := range reverters {
		res, err := r.BeforeRestore(ctx)
		pre = append(pre, res...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	res, err := n.restoreFiles(ctx, opts)
	if err != nil {
		errs = append(errs, err)
	}
	var post []store.RestoreResult
	for _, r := range reverters {
		more, err := r.AfterRestore(ctx, res)
		post = append(post, more...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	for _, r := range append(append([]store.RestoreResult{}, pre...), post...) {
		n.log().Info("restore", "path", r.Path, "action", r.Action, "reason", r.Reason)
	}
	return append(append(pre, res...), post...), errors.Join(errs...)
}

func (n *Node) restoreFiles(ctx context.Context, opts RestoreOptions) ([]store.RestoreResult, error) {
	st := n.store()
	keep := n.kubeletKeep(ctx)
	res, err := st.Restore(keep)
	if _, berr := st.Backups(); berr != nil {
		return res, err // the manifest itself is refused: nothing more to judge
	}
	lost, lerr := n.unbacked(st)
	if len(lost) > 0 && opts.Forget {
		more, ferr := n.forget(st, lost, keep)
		res = append(res, more...)
		lerr = errors.Join(lerr, ferr)
	} else if len(lost) > 0 {
		lerr = errors.Join(lerr, &LostBackupsError{Paths: lost})
	}
	for _, r := range res {
		n.log().Info("restore", "path", r.Path, "action", r.Action, "reason", r.Reason)
	}
	return res, errors.Join(err, lerr)
}
