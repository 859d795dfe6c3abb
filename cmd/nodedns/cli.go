package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nodedns/nodedns/internal/nodefs"
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

// writers are the commands that change the node (a live node: root only; under --root the user
// who owns DIR); netplan pin writes unless --dry-run. TestEveryCommandDeclaresWhetherItWrites
// makes a new command choose.
var writers = map[string]bool{"apply": true, "restore": true, "run": true, "pin": true}

// euid is the effective user id; a variable so tests can pretend.
var euid = os.Geteuid

// polishCLI gives the command tree the conventions users expect of a CLI: --version, a suggestion
// for a mistyped command, completions for flag values, and one line saying "must run as root" where
// a command that changes the node would fail deep inside with EACCES (requireRoot, rootNeeded).
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
				return rootNeeded(g, cmd, run(cmd, args))
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// requireRoot refuses a command that changes the node unless it can (docs/contract.md "Command
// line"): on the live node only root can (the files it changes are root's, and systemd's D-Bus API
// answers root only); under --root a user other than root may work on a copy of the node's files
// that is theirs, so a DIR owned by someone else is refused too. It runs before the config is read
// and before any lock is taken, so whatever would fail first, the user reads one line saying root
// is needed. netplan pin --dry-run writes nothing.
func requireRoot(g *globals, cmd *cobra.Command) error {
	if !writers[cmd.Name()] || euid() == 0 {
		return nil
	}
	if f := cmd.Flags().Lookup("dry-run"); f != nil && f.Value.String() == "true" {
		return nil
	}
	name := cmd.CommandPath()
	root := g.root
	if root == "" && !cmd.Flags().Changed("root") {
		root = os.Getenv("NODEDNS_ROOT")
	}
	if root == "" {
		return &exitError{1, fmt.Errorf("%s changes the node's files and talks to systemd: it must run as root (sudo %s), or work on a copy with --root DIR", name, name)}
	}
	fi, err := os.Stat(root)
	if err != nil {
		return nil // loading the config says what is wrong with --root
	}
	if uid, _ := nodefs.Owner(fi); uid != euid() {
		return &exitError{1, fmt.Errorf("%s changes the files under --root %s, which uid %d owns: it must run as root (sudo %s), or on a copy of the node's files you own", name, root, uid, name)}
	}
	return nil
}

// rootNeeded turns the error of a command that changes the node, run by a user other than root
// under --root, into the one line requireRoot gives when a file or directory under the root is not
// this user's to change (EACCES, EPERM), naming the first such failure (an apply's or restore's
// errors are joined, one per path).
func rootNeeded(g *globals, cmd *cobra.Command, err error) error {
	if err == nil || euid() == 0 {
		return err
	}
	denied := firstDenied(err)
	if denied == nil {
		return err
	}
	first, _, _ := strings.Cut(denied.Error(), "\n")
	name := cmd.CommandPath()
	return &exitError{1, fmt.Errorf("%s cannot change the files under --root %s as uid %d (%s): it must run as root (sudo %s), or on a copy of the node's files you own", name, g.root, euid(), first, name)}
}

// firstDenied is the first error in err's tree (errors.Join's included, in order) that is a
// permission refused, nil when none is.
func firstDenied(err error) error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if d := firstDenied(e); d != nil {
				return d
			}
		}
		return nil
	}
	if ee, ok := err.(*exitError); ok {
		if ee.err == nil {
			return nil
		}
		return firstDenied(ee.err)
	}
	if errors.Is(err, fs.ErrPermission) {
		return err
	}
	return nil
}
