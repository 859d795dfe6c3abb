package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"time"

	"github.com/aymanbagabas/go-udiff"
	"github.com/spf13/cobra"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nodedns/nodedns/config"
	"github.com/nodedns/nodedns/netplan"
	"github.com/nodedns/nodedns/node"
	"github.com/nodedns/nodedns/policy"
	"github.com/nodedns/nodedns/probes"
	"github.com/nodedns/nodedns/reconcile"
)

// The netplan integration: netplan's own `netplan generate` judges every netplan file nodedns
// would keep (everywhere, --root included); `netplan apply` and `networkctl reload` run only on the
// live node and only when asked; netlink tells the pin which interface carries the default route.
func init() {
	validatorFactories = append(validatorFactories, func(*globals) reconcile.Validator {
		return netplanValidator{}
	})
	actorFactories = append(actorFactories, func(*globals) reconcile.Actor { return commandActor{} })
	sourceFactories = append(sourceFactories, func(*globals) reconcile.Source { return uplinkSource{} })
}

// netplanValidator runs `netplan generate --root-dir` on a copy of the node's netplan files with
// the planned file in place. A rejection keeps the change from being written and carries netplan's
// own file:line:col message.
type netplanValidator struct{ runner netplan.Runner }

func (v netplanValidator) Validate(ctx context.Context, root string, c policy.Change) error {
	if c.Path != netplan.NodednsFile {
		return nil
	}
	var data []byte
	if c.Op == policy.OpWrite {
		data = c.After
	}
	if err := v.runner.Validate(ctx, root, c.Path, data); err != nil {
		return fmt.Errorf("validate %s: %w", c.Path, err)
	}
	return nil
}

// commandActor runs the commands that make a netplan or networkd change live.
type commandActor struct{}

// actorTimeout bounds `netplan apply`, which restarts networkd and waits for udev.
const actorTimeout = 2 * time.Minute

func (commandActor) Handles(kind string) bool {
	return kind == policy.ActionNetplanApply || kind == policy.ActionNetworkctlReload
}

func (commandActor) Do(ctx context.Context, a policy.Action) error {
	argv := []string{"netplan", "apply"}
	if a.Kind == policy.ActionNetworkctlReload {
		argv = []string{"networkctl", "reload"}
	}
	ctx, cancel := context.WithTimeout(ctx, actorTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// uplinkSource reads the default-route interface and its IPv4 addresses over netlink, so a pin
// takes the addressing the node really has (a lease file can be stale).
type uplinkSource struct{}

func (uplinkSource) Name() string { return "netlink uplink" }

func (uplinkSource) Observe(_ context.Context, s *node.Snapshot) error {
	u, err := readUplink()
	if err != nil {
		return err
	}
	s.Uplink = u
	return nil
}

func readUplink() (*node.Uplink, error) {
	routes, err := probes.RetryDump("list routes", func() ([]netlink.Route, error) {
		return netlink.RouteListFiltered(unix.AF_INET, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	})
	if err != nil {
		return nil, err
	}
	var def *netlink.Route
	for i := range routes {
		r := &routes[i]
		if r.Dst != nil && r.Dst.IP != nil {
			if ones, _ := r.Dst.Mask.Size(); ones != 0 {
				continue
			}
		}
		if r.LinkIndex == 0 {
			continue
		}
		if def == nil || r.Priority < def.Priority {
			def = r
		}
	}
	if def == nil {
		return nil, nil // no IPv4 default route: nothing to pin
	}
	link, err := netlink.LinkByIndex(def.LinkIndex)
	if err != nil {
		return nil, fmt.Errorf("link %d of the default route: %w", def.LinkIndex, err)
	}
	u := &node.Uplink{IfName: link.Attrs().Name, IfIndex: def.LinkIndex}
	if gw, ok := netip.AddrFromSlice(def.Gw); ok {
		u.Gateway = gw.Unmap()
	}
	addrs, err := probes.RetryDump("addresses of "+u.IfName, func() ([]netlink.Addr, error) { return netlink.AddrList(link, unix.AF_INET) })
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok {
			continue
		}
		ones, _ := a.Mask.Size()
		u.Addrs = append(u.Addrs, netip.PrefixFrom(ip.Unmap(), ones))
	}
	return u, nil
}

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
	pin.Flags().BoolVar(&dryRun, "dry-run", false, "print the file and a diff of `netplan get` instead of writing it")
	pin.Flags().BoolVar(&apply, "apply", false, "run `netplan apply` after writing (live node only)")
	nc.AddCommand(pin)
	return nc
}

func runPin(ctx context.Context, g *globals, dryRun, apply bool) error {
	g.cfg.Netplan.Mode = config.NetplanPin
	g.cfg.Netplan.Apply = g.cfg.Netplan.Apply || apply
	n := g.node()
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
		var r netplan.Runner
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
		if a.Kind == policy.ActionNetplanApply {
			only.Actions = append(only.Actions, a)
		}
	}
	o := n.Apply(ctx, only)
	for _, w := range o.Written {
		fmt.Fprintf(g.stdout, "wrote %s\n", w.Path)
	}
	for _, a := range o.Done {
		fmt.Fprintf(g.stdout, "ran %s\n", a.Kind)
	}
	for _, a := range o.Pending {
		fmt.Fprintf(g.stdout, "pending %s (not carried out under --root)\n", a.Kind)
	}
	if len(only.Actions) == 0 {
		fmt.Fprintln(g.stdout, "netplan apply not run: the pin takes effect at the next `netplan apply` or boot (use --apply)")
	}
	if len(o.Errors) > 0 {
		return &exitError{1, errors.Join(o.Errors...)}
	}
	return nil
}
