package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aymanbagabas/go-udiff"
	"github.com/spf13/cobra"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/policy"
	"github.com/nodedns/nodedns/netplan"
)

func newNetplanCmd(g *globals) *cobra.Command {
	nc := &cobra.Command{Use: "netplan", Short: "netplan integration", Args: cobra.NoArgs}
	var dryRun, apply bool
	pin := &cobra.Command{
		Use:   "pin",
		Short: "Pin the current DHCP lease as static netplan config",
		Long: `Writes ` + netplan.NodednsFile + ` with static addressing for the default-route interface, taken
from its current DHCP lease (and, on the live node, the addresses netlink shows): dhcp4: false, the
address with its prefix, routes: [{to: default, via: ROUTER}], the lease's nameservers minus loop
addresses and without search domains. match:, set-name: and MTU stay as the node's own files have
them; DHCPv6 and SLAAC are left alone. Other DHCP interfaces keep their use-domains: false override.

It refuses, with the reason, when the lease is missing or expired, has no router, the interface is a
bond or bridge member, or the lease disagrees with the live link. The file is validated with
` + "`netplan generate`" + ` first; a rejected file is not written. ` + "`netplan apply`" + ` runs only with --apply
(or netplan.apply: true), and never under --root.`,
		Example: `  nodedns netplan pin --dry-run     # the file and a diff of netplan get
  nodedns netplan pin               # write it; takes effect at the next netplan apply or boot
  nodedns netplan pin --apply       # write it and run netplan apply`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPin(cmd.Context(), g, dryRun, apply)
		},
	}
	pin.Flags().BoolVar(&dryRun, "dry-run", false, "print the file and a diff of 'netplan get' instead of writing it")
	pin.Flags().BoolVar(&apply, "apply", false, "run 'netplan apply' after writing (live node only)")
	nc.AddCommand(pin)
	return nc
}

func runPin(ctx context.Context, g *globals, dryRun, apply bool) error {
	g.cfg.Netplan.Mode = config.NetplanPin
	g.cfg.Netplan.Apply = g.cfg.Netplan.Apply || apply
	e := g.edges()
	defer e.Close()
	n := e.Node
	if !dryRun {
		// The state lock from reading the node to the write (docs/contract.md, invariant 4).
		release, err := n.Hold(0)
		if err != nil {
			return &exitError{1, err}
		}
		defer release()
	}
	_, p := n.Observe(ctx)

	var blocked []policy.Blocked
	for _, b := range p.Blocked {
		if strings.HasPrefix(b.Target, netplan.NodednsFile) {
			blocked = append(blocked, b)
		}
	}
	var change *policy.Change
	for i := range p.Changes {
		if p.Changes[i].Path == netplan.NodednsFile {
			change = &p.Changes[i]
		}
	}
	for _, b := range blocked {
		fmt.Fprintf(g.stderr, "nodedns: netplan pin: %s: %s\n", b.Target, b.Reason)
	}
	if len(blocked) > 0 {
		return &exitError{1, fmt.Errorf("netplan pin refused: nothing written")}
	}
	if change == nil {
		fmt.Fprintf(g.stdout, "nodedns: nothing to change: %s already has what the pin needs\n", netplan.NodednsFile)
		return nil
	}
	g.log.Info("netplan pin", "path", change.Path, "reason", change.Reason, "dry_run", dryRun, "apply", g.cfg.Netplan.Apply, "live", n.Live())

	if dryRun {
		fmt.Fprintf(g.stdout, "# %s (mode 0600): %s\n%s", change.Path, change.Reason, change.After)
		r, err := e.NetplanRunner()
		if err != nil {
			return &exitError{1, fmt.Errorf("netplan get: %w", err)}
		}
		before, err := r.Get(ctx, rootOr(g.root), nil)
		if err != nil {
			return &exitError{1, fmt.Errorf("netplan get: %w", err)}
		}
		after, err := r.Get(ctx, rootOr(g.root), map[string][]byte{change.Path: change.After})
		if err != nil {
			return &exitError{1, fmt.Errorf("netplan get: %w", err)}
		}
		fmt.Fprintf(g.stdout, "# netplan get, before and after:\n%s", udiff.Unified("netplan-get.before", "netplan-get.after", string(before), string(after)))
		return nil
	}

	only := policy.Plan{Facts: p.Facts, Changes: []policy.Change{*change}}
	for _, a := range p.Actions {
		if _, ok := a.(policy.NetplanApply); ok {
			only.Actions = append(only.Actions, a)
		}
	}
	o := n.Apply(ctx, only)
	for _, w := range o.Written {
		fmt.Fprintf(g.stdout, "wrote %s\n", w.Path)
	}
	for _, a := range o.Done {
		fmt.Fprintf(g.stdout, "ran %s\n", a.Kind())
	}
	for _, a := range o.Pending {
		fmt.Fprintf(g.stdout, "pending %s (not carried out under --root)\n", a.Kind())
	}
	if len(only.Actions) == 0 {
		fmt.Fprintln(g.stdout, "netplan apply not run: the pin takes effect at the next `netplan apply` or boot (use --apply)")
	}
	if len(o.Errors) > 0 {
		return &exitError{1, errors.Join(o.Errors...)}
	}
	return nil
}
