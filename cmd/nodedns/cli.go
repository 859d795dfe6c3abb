package main

import (
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/spf13/cobra"
)

// fullVersion is what `nodedns version` and `nodedns --version` print after "nodedns ".
func fullVersion() string {
	return fmt.Sprintf("%s (%s %s/%s)", versionString(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// flagValues are the values a flag takes, offered by shell completion.
var flagValues = map[string][]string{
	"output":    {"text\tone line per check or a diff", "json\tfor tools"},
	"log-level": {"debug", "info", "warn", "error"},
}

// writers are the commands that change the node (a live node: root only); netplan pin writes
// unless --dry-run.
var writers = map[string]bool{"apply": true, "restore": true, "run": true, "pin": true}

// euid is the effective user id; a variable so tests can pretend.
var euid = os.Geteuid

// polishCLI gives the command tree the conventions users expect of a CLI: --version, a suggestion
// for a mistyped command, completions for flag values, and a clear "must run as root" before a
// command that writes to a live node fails deep inside with EACCES.
func polishCLI(root *cobra.Command, g *globals) {
	root.Version = fullVersion()
	root.SetVersionTemplate("nodedns {{.Version}}\n")
	root.SuggestionsMinimumDistance = 2
	root.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
		}
		return &exitError{1, fmt.Errorf("%s\n\nRun '%s --help' for usage", msg, cmd.CommandPath())}
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for name, values := range flagValues {
			if c.Flags().Lookup(name) != nil || c.PersistentFlags().Lookup(name) != nil {
				_ = c.RegisterFlagCompletionFunc(name, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
			}
		}
		if writers[c.Name()] && c.RunE != nil {
			run := c.RunE
			c.RunE = func(cmd *cobra.Command, args []string) error {
				if err := requireRoot(g, cmd); err != nil {
					return err
				}
				return run(cmd, args)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// requireRoot refuses a command that writes to the live node unless it runs as root: the files it
// changes are root's and systemd's D-Bus API answers root only. Under --root the directory's own
// permissions decide.
func requireRoot(g *globals, cmd *cobra.Command) error {
	if g.root != "" || euid() == 0 {
		return nil
	}
	if f := cmd.Flags().Lookup("dry-run"); f != nil && f.Value.String() == "true" {
		return nil
	}
	return &exitError{1, fmt.Errorf("%s changes the node's files and talks to systemd: it must run as root (sudo %s), or work on a copy with --root DIR", cmd.CommandPath(), cmd.CommandPath())}
}
