package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nodedns/nodedns/internal/store"
	"github.com/nodedns/nodedns/probes"
)

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
Under --root only the file checks run; the live ones (netlink, nf_tables, DNS probes) say skipped.

The live checks judge the cache as nodeLocalDNS.mode says: interface (node-cache on the host network:
the nodelocaldns interface with every cache address, IPv4 and IPv6 alike, their local-table routes
and raw-table NOTRACK rules, answers on each address over UDP and TCP), or lrp and none (the cache in a
pod behind the CNI's redirect, or no cache: those three checks are skipped, and the probes go to
kubelet's clusterDNS). auto, the default, picks interface when the interface exists or a cache address
is named. The kernel's own fe80:: address of an up interface is never a cache address.

nodelocaldns.pods asks the same question from inside up to probes.maxPods pod network namespaces
(kubepods cgroups, /run/netns), in parallel within one probes.timeout, and names each pod the host is
answered for and the pod is not, with its host-side interface and the likely cause. It changes
nothing in a pod's namespace; it needs root in the host's PID namespace (CAP_SYS_ADMIN to enter the
namespaces, CAP_SYS_PTRACE to read other users' /proc entries), and says skipped while no pod runs.`,
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
	var st *store.Store
	for {
		e := g.edges()
		n := e.Node
		st = e.Store
		s, p := n.Observe(ctx)
		env := &probes.Env{Snapshot: s, Config: g.cfg, Plan: p, Live: n.Live(), Log: g.log, Host: e.Probes, Files: e.Store}
		rep = probes.Run(ctx, env, probes.All())
		_ = e.Close()
		// The reboot baseline is recorded only from a passing check (probes.SaveBaseline).
		if err := probes.SaveBaseline(ctx, env, rep); err != nil {
			g.log.Warn("reboot baseline not saved", "path", probes.StatePath, "err", err)
		}
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
	writeCheckMetrics(g, st, rep)
	switch {
	case o.npd:
		fmt.Fprintln(g.stdout, rep.NPD())
	case o.output == "json":
		enc := json.NewEncoder(g.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(newCheckJSON(rep, time.Now())); err != nil {
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

// checkSchemaVersion is the version of `check -o json`'s object (docs/contract.md "Check JSON"): it
// changes only when a field changes meaning or goes away; new fields keep it.
const checkSchemaVersion = 1

// checkJSON is `check -o json`'s object: the report with what a fleet collector needs to file it
// (which schema, which machine, when).
type checkJSON struct {
	SchemaVersion int    `json:"schemaVersion"`
	Hostname      string `json:"hostname"`
	Time          string `json:"time"`
	probes.Report
}

func newCheckJSON(rep probes.Report, now time.Time) checkJSON {
	host, _ := os.Hostname() // "" when the kernel will not say: the report is still worth printing
	return checkJSON{SchemaVersion: checkSchemaVersion, Hostname: host, Time: now.UTC().Format(time.RFC3339), Report: rep}
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
