package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/edges"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/nodefs"
)

// globals are the flags every command shares.
type globals struct {
	configPath string
	root       string
	logLevel   string

	stdout, stderr io.Writer
	cfg            config.Config
	log            *slog.Logger
}

const rootLong = `nodedns keeps a Kubernetes node's DNS configuration safe around NodeLocal DNSCache.

It reads the node's resolv.conf files, systemd-resolved's configuration, DHCP leases, netplan and the
kubelet config; keeps the node-local cache (169.254.25.10 and friends) and the cluster DNS IP out of
every upstream list, so the cache never forwards to itself; strips DHCP-provided search domains; and
writes a loop-free resolv.conf for kubelet (/var/lib/nodedns/resolv.conf).

Every change is backed up once under /var/lib/nodedns/backup; ` + "`nodedns restore`" + ` undoes them all.
apply, restore, netplan pin and run change the node: they run as root (under --root, as the user
who owns DIR).

Configuration: /etc/nodedns/config.yaml (keys below), NODEDNS_* environment variables
(NODEDNS_UPSTREAMS="10.0.0.2 10.0.0.3", NODEDNS_NETPLAN_MODE=off, NODEDNS_LOG_LEVEL=debug, ...)
and flags.

Config keys: ` + "{{KEYS}}"

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{stdout: stdout, stderr: stderr}
	var checkOpts checkOptions
	root := &cobra.Command{
		Use:   "nodedns",
		Short: "Keep a Kubernetes node's DNS safe around NodeLocal DNSCache",
		Long:  strings.Replace(rootLong, "{{KEYS}}", strings.Join(config.KeyNames(), ", "), 1),
		Example: `  nodedns check                     # is this node's DNS sound? (exit 0 ok, 1 problem, 2 unknown)
  nodedns --check -o json           # the same, for tools
  nodedns plan                      # what apply would change, as diffs
  nodedns apply                     # fix it; backups in /var/lib/nodedns/backup
  nodedns restore                   # undo every change nodedns made
  nodedns --root ./examples/kubespray-host-resolvconf plan   # work on a copy of a node's files`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireRoot(g, cmd); err != nil {
				return err
			}
			err := g.load(cmd)
			var ee *exitError
			if errors.As(err, &ee) && (cmd.Name() == "check" || checkOpts.topLevel) {
				// check's exit codes are node-problem-detector's: a config it cannot read means it
				// could not check (2), not that the node has a problem (1).
				ee.code = 2
			}
			return err
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if checkOpts.topLevel {
				return runCheck(cmd.Context(), g, checkOpts)
			}
			return cmd.Help()
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	pf := root.PersistentFlags()
	pf.StringVar(&g.configPath, "config", "", "config file (default /etc/nodedns/config.yaml, under --root when given; a missing default file means built-in defaults)")
	pf.StringVar(&g.root, "root", "", "treat DIR as the node's / : read and write only files under DIR, never D-Bus, netlink or the network (like netplan --root-dir)")
	pf.StringVar(&g.logLevel, "log-level", "", "debug, info, warn or error (default info; env NODEDNS_LOG_LEVEL)")
	root.Flags().BoolVar(&checkOpts.topLevel, "check", false, "run the self-check (same as 'nodedns check')")
	addCheckFlags(root, &checkOpts)

	root.AddCommand(newCheckCmd(g), newPlanCmd(g), newApplyCmd(g), newRestoreCmd(g), newVersionCmd(g),
		newRunCmd(g), newNetplanCmd(g))
	root.AddCommand(newGenCmd(root)) // hidden: man page and completions for the packages
	polishCLI(root, g)
	// check's exit codes are node-problem-detector's: a command line it cannot parse means it could
	// not check (2), not that the node has a problem (1).
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		code := 1
		if c.Name() == "check" || (c == root && (c.Flags().Changed("check") || slices.Contains(os.Args, "--check"))) {
			code = 2
		}
		return &exitError{code, fmt.Errorf("%w (see `%s --help`)", err, c.CommandPath())}
	})
	return root
}

// load turns the config file, NODEDNS_* environment and flags into one validated config.Config.
func (g *globals) load(cmd *cobra.Command) error {
	// Global flags may also come from the environment (the flag wins).
	if !cmd.Flags().Changed("root") && g.root == "" {
		g.root = os.Getenv("NODEDNS_ROOT")
	}
	if !cmd.Flags().Changed("config") && g.configPath == "" {
		g.configPath = os.Getenv("NODEDNS_CONFIG")
	}
	if g.root != "" {
		abs, err := filepath.Abs(g.root)
		if err != nil {
			return &exitError{1, fmt.Errorf("--root %s: %w", g.root, err)}
		}
		fi, err := os.Stat(abs)
		if err != nil || !fi.IsDir() {
			return &exitError{1, fmt.Errorf("--root %s: not a directory", g.root)}
		}
		g.root = abs
	}

	path, named := g.configPath, true
	if path == "" {
		named = false
		path = filepath.Join(rootOr(g.root), config.DefaultConfigPath)
	}
	data, err := readConfigFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !named:
		data = nil // no config file: built-in defaults
	case err != nil:
		return &exitError{1, fmt.Errorf("config: %w", err)}
	}
	cfg, fileLevel, err := parseConfig(data)
	if err != nil {
		return &exitError{1, fmt.Errorf("config %s: %w", path, err)}
	}
	g.cfg = cfg
	logLevel := g.logLevel
	if logLevel == "" {
		logLevel = fileLevel
	}

	var lvl slog.Level
	if logLevel == "" {
		logLevel = "info"
	}
	if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
		return &exitError{1, fmt.Errorf("--log-level %q: want debug, info, warn or error", logLevel)}
	}
	g.log = slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: lvl}))
	return nil
}

// readConfigFile reads a config file once, bounded (1 MiB), a FIFO, socket or device refused
// without a blocking open. A file others can write, or one owned by a user other than root and the
// one running nodedns, is refused, judged on the open file that is then read
// (nodefs.ReadConfigFile): the config decides what nodedns, as root, writes and restores.
func readConfigFile(p string) ([]byte, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", p, err)
	}
	return nodefs.ReadConfigFile(abs)
}

// edges builds this run's node with its integrations (edges.New); the caller closes it.
func (g *globals) edges() *edges.Edges { return edges.New(g.root, g.cfg, g.log) }

func rootOr(r string) string {
	if r == "" {
		return "/"
	}
	return r
}

// parseConfig turns config file bytes (nil: no file) and NODEDNS_* environment variables into a
// validated config.Config, and the log level the file or environment asks for ("" if none).
func parseConfig(data []byte) (config.Config, string, error) {
	v := viper.New()
	v.SetEnvPrefix("NODEDNS")
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_", "-", "_"))
	v.AutomaticEnv()
	for k, d := range config.Keys() {
		v.SetDefault(k, d)
	}
	if data != nil {
		v.SetConfigType("yaml")
		if err := v.ReadConfig(bytes.NewReader(data)); err != nil {
			return config.Config{}, "", err
		}
	}
	settings := map[string]any{}
	logLevel := ""
	for _, k := range v.AllKeys() {
		if k == "log-level" || k == "loglevel" {
			logLevel = v.GetString(k)
			continue
		}
		settings[k] = v.Get(k)
	}
	if logLevel == "" {
		logLevel = os.Getenv("NODEDNS_LOG_LEVEL")
	}
	cfg, err := config.FromSettings(settings, node.Writes()...)
	return cfg, logLevel, err
}
