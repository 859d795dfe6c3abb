package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// newGenCmd is the hidden `nodedns gen DIR` that `make package` runs: it writes the man page
// (DIR/nodedns.1) and the bash, zsh and fish completions (DIR/completions/) from the cobra command
// tree, so what the packages ship always matches the binary's own --help.
func newGenCmd(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:    "gen DIR",
		Short:  "Write the man page and shell completions into DIR (for packaging)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		// No config is read: generating docs must work on a build machine.
		PersistentPreRunE: func(*cobra.Command, []string) error { return nil },
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			if err := os.MkdirAll(filepath.Join(dir, "completions"), 0o755); err != nil {
				return fmt.Errorf("gen: %w", err)
			}
			var man bytes.Buffer
			writeMan(&man, root, versionString())
			outputs := []struct {
				name string
				gen  func(*bytes.Buffer) error
			}{
				{"nodedns.1", func(b *bytes.Buffer) error { _, err := b.Write(man.Bytes()); return err }},
				{"completions/nodedns.bash", func(b *bytes.Buffer) error { return root.GenBashCompletionV2(b, true) }},
				{"completions/_nodedns", func(b *bytes.Buffer) error { return root.GenZshCompletion(b) }},
				{"completions/nodedns.fish", func(b *bytes.Buffer) error { return root.GenFishCompletion(b, true) }},
			}
			for _, o := range outputs {
				var b bytes.Buffer
				if err := o.gen(&b); err != nil {
					return fmt.Errorf("gen %s: %w", o.name, err)
				}
				if err := os.WriteFile(filepath.Join(dir, o.name), b.Bytes(), 0o644); err != nil {
					return fmt.Errorf("gen %s: %w", o.name, err)
				}
				fmt.Fprintln(cmd.OutOrStdout(), filepath.Join(dir, o.name))
			}
			return nil
		},
	}
}

// writeMan renders one section-1 page for the whole command tree: every visible command with its
// long help, flags and examples. The date is left out so the package build is reproducible.
func writeMan(b *bytes.Buffer, root *cobra.Command, version string) {
	fmt.Fprintf(b, ".TH NODEDNS 1 \"\" \"nodedns %s\" \"User Commands\"\n", roffText(version))
	b.WriteString(".SH NAME\nnodedns \\- " + roffText(lowerFirst(root.Short)) + "\n")
	b.WriteString(".SH SYNOPSIS\n.B nodedns\n[\\fIOPTIONS\\fR] \\fICOMMAND\\fR\n.br\n.B nodedns \\-\\-check\n[\\fIOPTIONS\\fR]\n")
	b.WriteString(".SH DESCRIPTION\n")
	roffParagraphs(b, root.Long)
	b.WriteString(".SH COMMANDS\n")
	cmds := root.Commands()
	sort.SliceStable(cmds, func(i, j int) bool { return cmds[i].Name() < cmds[j].Name() })
	for _, c := range visibleTree(cmds) {
		fmt.Fprintf(b, ".SS \"%s\"\n", roffText(strings.TrimPrefix(c.UseLine(), "nodedns ")))
		long := c.Long
		if long == "" {
			long = c.Short
		}
		roffParagraphs(b, long)
		roffFlags(b, c.NonInheritedFlags())
		if c.Example != "" {
			b.WriteString(".PP\nExamples:\n")
			roffExample(b, c.Example)
		}
	}
	b.WriteString(".SH OPTIONS\nThese apply to every command.\n")
	roffFlags(b, root.PersistentFlags())
	roffFlags(b, root.LocalNonPersistentFlags())
	b.WriteString(`.SH EXIT STATUS
.B check
exits as node\-problem\-detector reads it: 0 ok, 1 problem, 2 unknown (could not check).
Other commands: 0 success, 1 error;
.B plan \-\-detailed\-exitcode
exits 0 when there is nothing to change, 2 when changes are planned, 1 on error.
.SH FILES
.TP
.I /etc/nodedns/config.yaml
The configuration (every key commented out in the packaged file: the built\-in defaults apply).
.TP
.I /var/lib/nodedns/resolv.conf
The loop\-free resolv.conf nodedns writes for kubelet (resolvConf).
.TP
.I /var/lib/nodedns/kubelet\-restart.json
With kubelet.manage: the record that kubelet must restart to read the config nodedns changed.
.TP
.I /usr/share/nodedns/systemd/kubelet\-manage.conf
The unit drop\-in kubelet.manage needs, installed into /etc/systemd/system/nodedns.service.d/.
.TP
.I /var/lib/nodedns/backup
One backup of every file nodedns changed, used by
.BR "nodedns restore" .
.TP
.I /run/netns
Where the container runtime names the pods' network namespaces (containerd cni\-<uuid>, CRI\-O <uuid>);
.B check
sends its nodelocaldns.pods probes from them and from the namespaces of kubelet's pod processes,
and changes nothing there.
.TP
.I /var/lib/node_exporter/textfile_collector/nodedns.prom
Metrics for node_exporter's textfile collector (the daemon; the one\-shot check writes nodedns_check.prom),
written only when the directory exists.
.SH EXAMPLES
`)
	roffExample(b, root.Example)
	b.WriteString(".SH SEE ALSO\n.BR resolv.conf (5),\n.BR systemd\\-resolved (8),\n.BR netplan (5),\n.BR dhclient (8)\n")
}

func visibleTree(cmds []*cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	for _, c := range cmds {
		// cobra's completion and help commands are described by their own --help, not the page.
		if c.Hidden || !c.IsAvailableCommand() || c.Name() == "completion" || c.Name() == "help" {
			continue
		}
		if c.Runnable() {
			out = append(out, c)
		}
		sub := c.Commands()
		sort.SliceStable(sub, func(i, j int) bool { return sub[i].Name() < sub[j].Name() })
		out = append(out, visibleTree(sub)...)
	}
	return out
}

func roffFlags(b *bytes.Buffer, fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Name == "help" {
			return
		}
		b.WriteString(".TP\n\\fB")
		if f.Shorthand != "" {
			b.WriteString("\\-" + f.Shorthand + "\\fR, \\fB")
		}
		b.WriteString("\\-\\-" + roffText(f.Name) + "\\fR")
		if name, _ := pflag.UnquoteUsage(f); name != "" {
			b.WriteString(" \\fI" + roffText(name) + "\\fR")
		}
		b.WriteString("\n" + roffText(f.Usage) + "\n")
	})
}

// roffParagraphs writes text with blank lines as paragraph breaks and leading-space lines kept as
// they are (no fill), as cobra's Long texts are written.
func roffParagraphs(b *bytes.Buffer, text string) {
	b.WriteString(".PP\n")
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		switch {
		case strings.TrimSpace(line) == "":
			b.WriteString(".PP\n")
		case strings.HasPrefix(line, " "):
			b.WriteString(".br\n" + roffText(line) + "\n")
		default:
			b.WriteString(roffText(line) + "\n")
		}
	}
}

func roffExample(b *bytes.Buffer, text string) {
	b.WriteString(".PP\n.RS 4\n.nf\n")
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		b.WriteString(roffText(strings.TrimPrefix(line, "  ")) + "\n")
	}
	b.WriteString(".fi\n.RE\n")
}

// roffText escapes text for roff: backslashes, hyphens as minus signs (options are typed with
// ASCII '-'), and a leading dot or quote that roff would take as a request.
func roffText(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	s = strings.ReplaceAll(s, "`", "")
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}
