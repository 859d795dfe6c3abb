package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/aymanbagabas/go-udiff"
	"github.com/spf13/cobra"

	"github.com/nodedns/nodedns/policy"
	"github.com/nodedns/nodedns/probes"
)

// version is set at build time: -ldflags "-X main.version=1.2.3".
var version = "dev"

type checkOptions struct {
	topLevel bool
	output   string
	npd      bool
	wait     time.Duration
}

func addCheckFlags(cmd *cobra.Command, o *checkOptions) {
	cmd.Flags().StringVarP(&o.output, "output", "o", "text", "text (one line per check) or json")
	cmd.Flags().BoolVar(&o.npd, "npd", false, "print one line of at most 80 characters, for node-problem-detector")
	cmd.Flags().DurationVar(&o.wait, "wait", 0, "keep checking until everything is ok or DURATION passes (e.g. 120s after a reboot)")
}

func newCheckCmd(g *globals) *cobra.Command {
	var o checkOptions
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Self-check: is this node's DNS sound now and after the next reboot?",
		Long: `Runs every check of nodedns and prints one line per check.

Exit codes, as node-problem-detector reads them: 0 ok, 1 problem, 2 unknown (could not check).
Check ids (stable): ` + strings.Join(probes.IDs, ", ") + `.
Under --root only the file checks run; the live ones (netlink, nf_tables, DNS probes) say skipped.`,
		Example: `  nodedns check
  nodedns check -o json | jq '.checks[] | select(.status=="problem")'
  nodedns check --npd                 # node-problem-detector custom plugin
  nodedns check --wait 120s           # preflight right after a reboot`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runCheck(cmd.Context(), g, o) },
	}
	addCheckFlags(cmd, &o)
	return cmd
}

func runCheck(ctx context.Context, g *globals, o checkOptions) error {
	if o.output != "text" && o.output != "json" {
		return &exitError{2, fmt.Errorf("-o %q: want text or json", o.output)}
	}
	if ctx == nil {
		ctx = context.Background()
	}
	deadline := time.Now().Add(o.wait)
	var rep probes.Report
	for {
		n := g.node()
		s, p := n.Observe()
		rep = probes.Run(ctx, &probes.Env{Snapshot: s, Config: g.cfg, Plan: p, Live: n.Live()}, probes.All())
		if rep.Status == probes.OK || o.wait <= 0 || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
			continue
		}
		break
	}
	switch {
	case o.npd:
		fmt.Fprintln(g.stdout, rep.NPD())
	case o.output == "json":
		enc := json.NewEncoder(g.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return &exitError{2, err}
		}
	default:
		writeCheckText(g.stdout, rep)
	}
	if code := rep.ExitCode(); code != 0 {
		return &exitError{code: code}
	}
	return nil
}

func writeCheckText(w io.Writer, rep probes.Report) {
	width := 0
	for _, c := range rep.Checks {
		width = max(width, len(c.ID))
	}
	for _, c := range rep.Checks {
		line := fmt.Sprintf("%-8s %-*s  %s", strings.ToUpper(string(c.Status)), width, c.ID, c.Message)
		if c.Hint != "" && c.Status != probes.OK {
			line += " (fix: " + c.Hint + ")"
		}
		fmt.Fprintln(w, line)
	}
	fmt.Fprintf(w, "nodedns: %s\n", rep.Status)
}

// planJSON is the JSON shape of `nodedns plan -o json`.
type planJSON struct {
	Changes []changeJSON     `json:"changes"`
	Actions []policy.Action  `json:"actions"`
	Blocked []policy.Blocked `json:"blocked"`
	Notes   []string         `json:"notes"`
}

type changeJSON struct {
	Path   string `json:"path"`
	Target string `json:"target"`
	Op     string `json:"op"`
	Reason string `json:"reason"`
	Diff   string `json:"diff"`
}

func unifiedDiff(c policy.Change) string {
	from, to := "a"+c.Target, "b"+c.Target
	if c.Before == nil {
		from = "/dev/null"
	}
	if c.Op == policy.OpRemove {
		to = "/dev/null"
	}
	return udiff.Unified(from, to, string(c.Before), string(c.After))
}

func newPlanCmd(g *globals) *cobra.Command {
	var output string
	var detailed bool
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Show what apply would change, as unified diffs and pending actions",
		Long: `Reads the node and prints what ` + "`nodedns apply`" + ` would do: a unified diff per file, the actions
that are not file writes (restarting systemd-resolved, per-link settings), the targets nodedns cannot
fix safely (blocked, with the reason) and notes. It changes nothing.

Exit codes: 0 (1 if something is blocked). With --detailed-exitcode: 0 nothing to change,
2 changes planned, 1 error or blocked.`,
		Example: `  nodedns plan
  nodedns plan -o json
  nodedns plan --detailed-exitcode >/dev/null; echo $?   # 0 clean, 2 changes, 1 error`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "text" && output != "json" {
				return &exitError{1, fmt.Errorf("-o %q: want text or json", output)}
			}
			_, p := g.node().Observe()
			if output == "json" {
				out := planJSON{Changes: []changeJSON{}, Actions: p.Actions, Blocked: p.Blocked, Notes: p.Notes}
				if out.Actions == nil {
					out.Actions = []policy.Action{}
				}
				if out.Blocked == nil {
					out.Blocked = []policy.Blocked{}
				}
				if out.Notes == nil {
					out.Notes = []string{}
				}
				for _, c := range p.Changes {
					out.Changes = append(out.Changes, changeJSON{Path: c.Path, Target: c.Target, Op: string(c.Op), Reason: c.Reason, Diff: unifiedDiff(c)})
				}
				enc := json.NewEncoder(g.stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(out); err != nil {
					return err
				}
			} else {
				writePlanText(g.stdout, p)
			}
			switch {
			case len(p.Blocked) > 0:
				return &exitError{code: 1}
			case detailed && (len(p.Changes) > 0 || len(p.Actions) > 0):
				return &exitError{code: 2}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	cmd.Flags().BoolVar(&detailed, "detailed-exitcode", false, "exit 0 when there is nothing to change, 2 when changes are planned, 1 on error")
	return cmd
}

func writePlanText(w io.Writer, p policy.Plan) {
	for _, c := range p.Changes {
		verb := "change"
		switch {
		case c.Op == policy.OpRemove:
			verb = "remove"
		case c.Before == nil:
			verb = "create"
		}
		name := c.Path
		if c.Target != c.Path {
			name += " (-> " + c.Target + ")"
		}
		fmt.Fprintf(w, "# %s %s: %s\n", verb, name, c.Reason)
		fmt.Fprint(w, unifiedDiff(c))
	}
	for _, a := range p.Actions {
		line := fmt.Sprintf("# action %s %s", a.Kind, a.Target)
		if a.Detail != "" {
			line += ": " + a.Detail
		}
		fmt.Fprintf(w, "%s (%s)\n", line, a.Reason)
	}
	for _, b := range p.Blocked {
		fmt.Fprintf(w, "# blocked %s: %s\n", b.Target, b.Reason)
	}
	for _, n := range p.Notes {
		fmt.Fprintf(w, "# note: %s\n", n)
	}
	if p.Empty() {
		fmt.Fprintln(w, "nodedns: nothing to change")
	}
}

func newApplyCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "apply",
		Short: "Make one reconcile pass, then exit (for Ansible)",
		Long: `Carries out the plan: every file is written atomically (temp file, fsync, rename, fsync of the
directory), a symlinked /etc/resolv.conf stays a symlink, and each file is backed up once under
/var/lib/nodedns/backup before its first change. A target that cannot be fixed safely is left alone
and reported; apply then exits 1 after making every other safe change.`,
		Example: `  nodedns apply
  nodedns --root /tmp/node-copy apply && nodedns --root /tmp/node-copy plan   # second plan is empty`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n := g.node()
			_, p := n.Observe()
			o := n.Apply(p)
			for _, w := range o.Written {
				fmt.Fprintf(g.stdout, "wrote %s\n", w.Path)
			}
			for _, r := range o.Removed {
				fmt.Fprintf(g.stdout, "removed %s\n", r)
			}
			for _, a := range o.Pending {
				why := "the live resolved client is not in this version"
				if !n.Live() {
					why = "not carried out under --root"
				}
				fmt.Fprintf(g.stdout, "pending %s %s %s (%s)\n", a.Kind, a.Target, a.Detail, why)
			}
			for _, b := range o.Blocked {
				fmt.Fprintf(g.stdout, "blocked %s: %s\n", b.Target, b.Reason)
			}
			if len(o.Written)+len(o.Removed) == 0 && len(o.Blocked) == 0 && len(o.Errors) == 0 {
				fmt.Fprintln(g.stdout, "nodedns: nothing to change")
			}
			if o.Failed() {
				return &exitError{1, errors.Join(append(o.Errors, blockedErr(o.Blocked))...)}
			}
			return nil
		},
	}
}

func blockedErr(b []policy.Blocked) error {
	if len(b) == 0 {
		return nil
	}
	return fmt.Errorf("%d target(s) blocked", len(b))
}

func newRestoreCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "restore",
		Short: "Undo every change nodedns made, from its backups",
		Long: `Puts back the exact original bytes, mode, owner and symlink of every file nodedns changed, and
removes the files it created. The kubelet resolv.conf is kept while kubelet's config still points at
it (removing it would stop kubelet): restore says so and exits 0. With nothing to restore it does
nothing.`,
		Example: `  nodedns restore`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := g.node().Restore()
			for _, r := range res {
				line := r.Action + " " + r.Path
				if r.Reason != "" {
					line += ": " + r.Reason
				}
				fmt.Fprintln(g.stdout, line)
			}
			if err != nil {
				return &exitError{1, err}
			}
			if len(res) == 0 {
				fmt.Fprintln(g.stdout, "nodedns: nothing to restore")
			}
			return nil
		},
	}
}

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := version
			if v == "dev" {
				if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
					v = bi.Main.Version
				}
			}
			fmt.Fprintf(g.stdout, "nodedns %s (%s %s/%s)\n", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}

func newRunCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "run",
		Short: "Run the daemon: apply, then watch and re-apply (not implemented yet)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return &exitError{1, errors.New("run: not implemented yet (use `nodedns apply` from a timer until the daemon lands)")}
		},
	}
}

func newNetplanCmd(g *globals) *cobra.Command {
	nc := &cobra.Command{Use: "netplan", Short: "netplan integration", Args: cobra.NoArgs}
	pin := &cobra.Command{
		Use:   "pin",
		Short: "Pin the current DHCP lease as static netplan config (not implemented yet)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return &exitError{1, errors.New("netplan pin: not implemented yet")}
		},
	}
	pin.Flags().Bool("dry-run", false, "print the file and a diff instead of writing it")
	nc.AddCommand(pin)
	return nc
}
