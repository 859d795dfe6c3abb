package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/aymanbagabas/go-udiff"
	"github.com/spf13/cobra"

	"github.com/nodedns/nodedns/internal/policy"
	"github.com/nodedns/nodedns/internal/reconcile"
)

// version is set at build time: -ldflags "-X main.version=1.2.3".
var version = "dev"

// planJSON is the JSON shape of `nodedns plan -o json`.
type planJSON struct {
	Changes []changeJSON     `json:"changes"`
	Actions []actionJSON     `json:"actions"`
	Blocked []policy.Blocked `json:"blocked"`
	Notes   []string         `json:"notes"`
	Summary planSummary      `json:"summary"`
}

// planSummary counts the plan as its text's last line does.
type planSummary struct {
	Create  int `json:"create"`
	Change  int `json:"change"`
	Remove  int `json:"remove"`
	Actions int `json:"actions"`
}

func summarize(p policy.Plan) planSummary {
	sum := planSummary{Actions: len(p.Actions)}
	for _, c := range p.Changes {
		switch {
		case c.Op == policy.OpRemove:
			sum.Remove++
		case c.Before == nil:
			sum.Create++
		default:
			sum.Change++
		}
	}
	return sum
}

// String is plan's last line: "Plan: 1 to create, 1 to change, 0 to remove, 1 action."
func (s planSummary) String() string {
	actions := "actions"
	if s.Actions == 1 {
		actions = "action"
	}
	return fmt.Sprintf("Plan: %d to create, %d to change, %d to remove, %d %s.", s.Create, s.Change, s.Remove, s.Actions, actions)
}

// collapseLines is how long a file nodedns creates may be before plan shows it as one line (its
// size and reason) unless --full: a generated body such as the dhclient hook would otherwise bury
// the few lines that change the node's behaviour.
const collapseLines = 12

// actionJSON is one action of the plan, as people read it in the text output.
type actionJSON struct {
	Kind   string `json:"Kind"`
	Target string `json:"Target"`
	Detail string `json:"Detail"`
	Reason string `json:"Reason"`
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
	var detailed, full bool
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Show what apply would change, as unified diffs and pending actions",
		Long: `Reads the node and prints what ` + "`nodedns apply`" + ` would do: a unified diff per file, the actions
that are not file writes (restarting systemd-resolved, per-link settings), the targets nodedns cannot
fix safely (blocked, with the reason) and notes. It changes nothing. A file nodedns generates (the
dhclient hook) shows as one line with its size unless --full; the last line counts what apply would
do: "Plan: 1 to create, 1 to change, 0 to remove, 1 action."

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
			e := g.edges()
			defer e.Close()
			_, p := e.Node.Observe(cmd.Context())
			if output == "json" {
				// Pending steps travel as notes: the JSON's four arrays are a contract (docs/contract.md "Plan JSON").
				out := planJSON{Changes: []changeJSON{}, Actions: []actionJSON{}, Blocked: p.Blocked, Notes: append(append([]string{}, p.Notes...), pendingNotes(p)...), Summary: summarize(p)}
				for _, a := range p.Actions {
					out.Actions = append(out.Actions, actionJSON{Kind: a.Kind(), Target: a.Target(), Detail: a.Detail(), Reason: a.Why()})
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
				writePlanText(g.stdout, p, full)
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
	cmd.Flags().BoolVar(&full, "full", false, "show every file nodedns would create in full, generated ones (the dhclient hook) included")
	return cmd
}

func writePlanText(w io.Writer, p policy.Plan, full bool) {
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
		if n := bytes.Count(c.After, []byte("\n")); !full && verb == "create" && n > collapseLines {
			fmt.Fprintf(w, "+ (%d lines, %d bytes; nodedns plan --full shows them)\n", n, len(c.After))
			continue
		}
		fmt.Fprint(w, unifiedDiff(c))
	}
	for _, a := range p.Actions {
		line := fmt.Sprintf("# action %s %s", a.Kind(), a.Target())
		if d := a.Detail(); d != "" {
			line += ": " + d
		}
		fmt.Fprintf(w, "%s (%s)\n", line, a.Why())
	}
	for _, b := range p.Blocked {
		fmt.Fprintf(w, "# blocked %s: %s\n", b.Target, b.Reason)
	}
	for _, n := range p.Notes {
		fmt.Fprintf(w, "# note: %s\n", n)
	}
	for _, pd := range p.Pending {
		fmt.Fprintf(w, "# pending %s: %s (%s)\n", pd.Target, pd.Step, pd.Why)
	}
	switch {
	case p.Empty() && len(p.Pending) > 0:
		// Not "nothing to change" while check still reports what these steps complete
		// (docs/contract.md "Check and plan agree").
		fmt.Fprintf(w, "nodedns: nothing for apply to change; %d step(s) pending, listed above\n", len(p.Pending))
	case p.Empty():
		fmt.Fprintln(w, "nodedns: nothing to change")
	}
	fmt.Fprintln(w, summarize(p))
}

// pendingNotes renders the plan's pending steps as notes.
func pendingNotes(p policy.Plan) []string {
	var out []string
	for _, pd := range p.Pending {
		out = append(out, pd.String())
	}
	return out
}

func newApplyCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "apply",
		Short: "Make one reconcile pass, then exit (for Ansible)",
		Long: `Carries out the plan: every file is written atomically (temp file, fsync, rename, fsync of the
directory) and keeps the mode, owner and SELinux label of the file it replaces, a symlinked
/etc/resolv.conf stays a symlink, and each file is backed up once under
/var/lib/nodedns/backup before its first change. A target that cannot be fixed safely is left alone
and reported; apply then exits 1 after making every other safe change.`,
		Example: `  nodedns apply
  nodedns --root /tmp/node-copy apply && nodedns --root /tmp/node-copy plan   # second plan is empty`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e := g.edges()
			defer e.Close()
			n := e.Node
			// The state lock from reading the node to the last write (docs/contract.md, invariant 4).
			release, err := n.Hold(0)
			if err != nil {
				return &exitError{1, err}
			}
			defer release()
			_, p := n.Observe(cmd.Context())
			o := n.Apply(cmd.Context(), p)
			for _, w := range o.Written {
				fmt.Fprintf(g.stdout, "wrote %s\n", w.Path)
			}
			for _, r := range o.Removed {
				fmt.Fprintf(g.stdout, "removed %s\n", r)
			}
			for _, a := range o.Pending {
				why := "nothing on this node carries it out"
				if !n.Live() {
					why = "not carried out under --root"
				}
				fmt.Fprintf(g.stdout, "pending %s %s %s (%s)\n", a.Kind(), a.Target(), a.Detail(), why)
			}
			for _, b := range o.Blocked {
				fmt.Fprintf(g.stdout, "blocked %s: %s\n", b.Target, b.Reason)
			}
			for _, pd := range p.Pending {
				fmt.Fprintf(g.stdout, "pending %s: %s (%s)\n", pd.Target, pd.Step, pd.Why)
			}
			if len(o.Written)+len(o.Removed) == 0 && len(o.Blocked) == 0 && len(o.Errors) == 0 && len(p.Pending) == 0 {
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
	var forget bool
	cmd := &cobra.Command{
		Use:   "restore",
		Short: "Undo every change nodedns made, from its backups",
		Long: `Puts back the exact original bytes, mode, owner, SELinux label and symlink of every file nodedns changed, and
removes the files it created and the directories it created for them. The kubelet resolv.conf is kept
while kubelet's config still points at it (removing it would stop kubelet): restore says so and exits
0. With nothing to restore it does nothing.

Restore acts only on trusted state (/var/lib/nodedns owned by root and writable by nobody else) and
only on the files nodedns manages. When files still carry nodedns's header (or are its hook or
drop-ins) but their backups are gone, restore lists them and exits 1: their originals cannot be put
back. --forget then removes the files nodedns created and drops the header line of the files it
edited, knowingly; or reinstall those files from their packages' defaults first.`,
		Example: `  nodedns restore
  nodedns restore --forget    # the backups are lost: drop what nodedns left, knowingly`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e := g.edges()
			defer e.Close()
			res, err := e.Node.RestoreWith(cmd.Context(), reconcile.RestoreOptions{Forget: forget})
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
			warnRestoredLoops(cmd.Context(), g, e.Node, res)
			return nil
		},
	}
	cmd.Flags().BoolVar(&forget, "forget", false, "when backups are lost: remove the files nodedns created and its header line from the files it edited, knowingly")
	return cmd
}

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(g.stdout, "nodedns %s\n", fullVersion())
			return nil
		},
	}
}
