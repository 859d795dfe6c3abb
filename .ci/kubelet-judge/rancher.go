package main

// rancher.go: the kubelet command line RKE2 or k3s builds when it starts, for the tests of RKE2 and
// k3s nodes. Neither is served by the Go module proxy, so their code cannot be imported; what they
// do is modelled here from their sources, with the libraries they use doing the reading:
//
//   - the config file and its drop-ins become flags as k3s's pkg/configfilearg does it (Parser.Parse,
//     readConfigFile, dotDFiles): config.yaml (--config/-c, else $K3S_CONFIG_FILE/$RKE2_CONFIG_FILE,
//     else /etc/rancher/SHAPE/config.yaml), then config.yaml.d's files whose names end in .yaml or
//     .yml in any letter case (util.HasSuffixI), in os.ReadDir's order; decoded with
//     gopkg.in/yaml.v2 MapSlice and wrangler's convert.ToString, as k3s decodes them; a later key
//     replaces an earlier one, "key+" appends; the flags go right after the subcommand, before the
//     command line's own (stripInvalidFlags drops keys the command does not know: here, every key
//     but the ones below, which are all that reach kubelet's DNS);
//   - the flags are parsed by urfave/cli v2 (rke2 v1.36.4's go.mod: v2.27.7) with the definitions
//     of k3s's pkg/cli/cmds (ResolvConfFlag with its $PROGRAM_RESOLV_CONF, ExtraKubeletArgs,
//     data-dir) and DisableSliceFlagSeparator, as both set it (rke2 pkg/cli/cmds/root.go NewApp,
//     k3s cmd/agent/main.go): a kubelet-arg is never split at commas;
//   - the resolv.conf k3s picks when no flag names one is pkg/agent/config's
//     locateOrGenerateResolvConf (isValidResolvConf: every nameserver a global unicast address, at
//     least one), its generated file DATA/agent/etc/resolv.conf;
//   - the result goes where k3s puts it since it configures kubelet with a drop-in directory
//     (pkg/daemons/agent agent.go startKubelet, defaultKubeletConfig, writeKubeletConfig): resolvConf
//     in DATA/agent/etc/kubelet.conf.d/00-SHAPE-defaults.conf, which k3s rewrites at every start,
//     and kubelet's flags from kubeletArgsAndConfig (--config-dir of that directory, --kubeconfig)
//     merged with the kubelet-args by pkg/util GetArgs: every name's values in order, the names
//     sorted; RKE2 puts its own flags first (pkg/executor/staticpod StaticPodConfig.Kubelet).
//
// Only --config-dir, --kubeconfig, --cloud-provider and --node-labels of k3s's own flags are passed:
// the others (hostname-override, node-ip, runtime-cgroups, ...) depend on the running node and
// change nothing of kubelet's DNS. A kubelet-arg config= or config-dir= (which k3s copies into its
// drop-in directory, extractConfigArgs) is refused as not modelled, so a test cannot pass on it.
//
// It prints the kubelet arguments NUL-separated and writes the files k3s writes at start.

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/rancher/wrangler/v3/pkg/data/convert"
	"github.com/urfave/cli/v2"
	yaml "gopkg.in/yaml.v2"
	sigsyaml "sigs.k8s.io/yaml"
)

func rancher(args []string) error {
	fs := flag.NewFlagSet("rancher", flag.ContinueOnError)
	shape := fs.String("shape", "k3s", "k3s or rke2")
	if err := fs.Parse(args); err != nil {
		return err
	}
	prog := *shape
	if prog != "k3s" && prog != "rke2" {
		return fmt.Errorf("shape %q is neither k3s nor rke2", prog)
	}
	argv := fs.Args() // the command line after the program: "server" or "agent", then its flags
	if len(argv) == 0 || (argv[0] != "server" && argv[0] != "agent") {
		return fmt.Errorf("the command line %q does not start with server or agent", argv)
	}
	upper := strings.ToUpper(prog)

	// configfilearg: the config file's flags go right after the subcommand.
	configFile := os.Getenv(upper + "_CONFIG_FILE")
	for i, a := range argv {
		if (a == "--config" || a == "-c") && i+1 < len(argv) {
			configFile = argv[i+1]
		} else if v, ok := strings.CutPrefix(a, "--config="); ok {
			configFile = v
		} else if v, ok := strings.CutPrefix(a, "-c="); ok {
			configFile = v
		}
	}
	if configFile == "" {
		configFile = "/etc/rancher/" + prog + "/config.yaml"
	}
	fromFile, err := readConfigFiles(configFile)
	if err != nil {
		return err
	}
	known := map[string]bool{"resolv-conf": true, "kubelet-arg": true, "data-dir": true, "d": true, "config": true, "c": true}
	var kept []string
	for _, a := range fromFile {
		name := strings.TrimLeft(strings.SplitN(a, "=", 2)[0], "-")
		if known[name] {
			kept = append(kept, a)
		}
	}
	full := append([]string{prog, argv[0]}, append(kept, argv[1:]...)...)

	var resolvConf, dataDir string
	var kubeletArgs []string
	flags := []cli.Flag{
		&cli.StringFlag{Name: "config", Aliases: []string{"c"}, EnvVars: []string{upper + "_CONFIG_FILE"}},
		&cli.StringFlag{Name: "resolv-conf", EnvVars: []string{upper + "_RESOLV_CONF"}},
		&cli.StringSliceFlag{Name: "kubelet-arg"},
		&cli.StringFlag{Name: "data-dir", Aliases: []string{"d"}, Value: "/var/lib/rancher/" + prog},
	}
	action := func(c *cli.Context) error {
		if c.NArg() > 0 {
			return fmt.Errorf("arguments %q are not modelled", c.Args().Slice())
		}
		resolvConf, dataDir, kubeletArgs = c.String("resolv-conf"), c.String("data-dir"), c.StringSlice("kubelet-arg")
		return nil
	}
	app := &cli.App{
		Name:                      prog,
		DisableSliceFlagSeparator: true,
		Commands: []*cli.Command{
			{Name: "server", Flags: flags, Action: action},
			{Name: "agent", Flags: flags, Action: action},
		},
		ExitErrHandler: func(*cli.Context, error) {}, // return errors, never exit
	}
	if err := app.Run(full); err != nil {
		return fmt.Errorf("%s's command line %q: %w", prog, full, err)
	}

	if resolvConf == "" {
		resolvConf, err = locateOrGenerate(dataDir)
		if err != nil {
			return err
		}
	}
	configDir := filepath.Join(dataDir, "agent", "etc", "kubelet.conf.d")
	if err := writeDefaults(filepath.Join(configDir, "00-"+prog+"-defaults.conf"), resolvConf); err != nil {
		return err
	}
	for _, a := range kubeletArgs {
		k, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if k == "config" || k == "config-dir" {
			return fmt.Errorf("kubelet-arg %q: k3s copies it into its drop-in directory, which is not modelled", a)
		}
	}
	initial := map[string]string{
		"config-dir":     configDir,
		"kubeconfig":     filepath.Join(dataDir, "agent", "kubelet.kubeconfig"),
		"cloud-provider": "external",
		"node-labels":    "",
	}
	out := getArgs(initial, kubeletArgs)
	if prog == "rke2" {
		out = append([]string{"--volume-plugin-dir=/var/lib/kubelet/volumeplugins", "--file-check-frequency=5s", "--sync-frequency=30s"}, out...)
	}
	w := bufio.NewWriter(os.Stdout)
	for _, a := range out {
		w.WriteString(a)
		w.WriteByte(0)
	}
	return w.Flush()
}

// readConfigFiles is configfilearg's readConfigFile: the flags of file and its .d drop-ins.
func readConfigFiles(file string) ([]string, error) {
	var files []string
	es, err := os.ReadDir(file + ".d")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	for _, e := range es {
		n := strings.ToLower(e.Name())
		if !e.IsDir() && (strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
			files = append(files, filepath.Join(file+".d", e.Name()))
		}
	}
	switch _, err := os.Stat(file); {
	case err == nil:
		files = append([]string{file}, files...)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	case len(files) == 0:
		return nil, nil // configfilearg.Parse: neither the file nor a drop-in is no flags
	}
	var order []string
	values := map[string]any{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var ms yaml.MapSlice
		if err := yaml.Unmarshal(data, &ms); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, item := range ms {
			k, v := convert.ToString(item.Key), item.Value
			appendTo := strings.HasSuffix(k, "+")
			k = strings.TrimSuffix(k, "+")
			old, seen := values[k]
			if !seen {
				order = append(order, k)
			}
			if seen && appendTo {
				values[k] = append(toSlice(old), toSlice(v)...)
			} else {
				values[k] = v
			}
		}
	}
	var out []string
	for _, k := range order {
		prefix := "--"
		if len(k) == 1 {
			prefix = "-"
		}
		if list, ok := values[k].([]any); ok {
			for _, v := range list {
				out = append(out, prefix+k+"="+convert.ToString(v))
			}
			continue
		}
		out = append(out, prefix+k+"="+convert.ToString(values[k]))
	}
	return out, nil
}

// toSlice is configfilearg's toSlice.
func toSlice(v any) []any {
	switch x := v.(type) {
	case string:
		return []any{x}
	case []any:
		return x
	}
	if s := strings.TrimSpace(convert.ToString(v)); s != "" {
		return []any{s}
	}
	return nil
}

// locateOrGenerate is pkg/agent/config's locateOrGenerateResolvConf.
func locateOrGenerate(dataDir string) (string, error) {
	for _, p := range []string{"/etc/resolv.conf", "/run/systemd/resolve/resolv.conf"} {
		if validResolvConf(p) {
			return p, nil
		}
	}
	p := filepath.Join(dataDir, "agent", "etc", "resolv.conf")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", err
	}
	return p, os.WriteFile(p, []byte("nameserver 8.8.8.8\n"), 0o644)
}

var nameserverLine = regexp.MustCompile(`^nameserver\s+([^\s]*)`)

// validResolvConf is pkg/agent/config's isValidResolvConf.
func validResolvConf(p string) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	found := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := nameserverLine.FindStringSubmatch(sc.Text()); len(m) == 2 {
			ip := net.ParseIP(m[1])
			if ip == nil || !ip.IsGlobalUnicast() {
				return false
			}
			found = true
		}
	}
	return sc.Err() == nil && found
}

// writeDefaults sets resolvConf in k3s's own drop-in, which it rewrites from defaultKubeletConfig at
// every start; the other fields the node's copy of it holds (those k3s takes from its server:
// clusterDNS, clusterDomain) are kept as they are.
func writeDefaults(p, resolvConf string) error {
	doc := map[string]any{}
	data, err := os.ReadFile(p)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := sigsyaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	if doc == nil {
		doc = map[string]any{}
	}
	doc["apiVersion"], doc["kind"] = "kubelet.config.k8s.io/v1beta1", "KubeletConfiguration"
	doc["resolvConf"] = resolvConf
	out, err := sigsyaml.Marshal(doc)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, out, 0o600)
}

// getArgs is k3s's pkg/util GetArgs: extra args override an initial one of the same name (a name
// ending in "+" appends to it, in "-" prepends), repeated names keep every value in order, and the
// names come out sorted.
func getArgs(initial map[string]string, extra []string) []string {
	multi := map[string][]string{}
	for _, a := range extra {
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !ok {
			value = "true"
		}
		clean := strings.TrimRight(name, "-+")
		init, hasInit := initial[clean]
		prev := multi[clean]
		var vals []string
		switch {
		case strings.HasSuffix(name, "+"):
			if hasInit {
				vals = append(vals, init)
			}
			vals = append(append(vals, prev...), value)
		case strings.HasSuffix(name, "-"):
			vals = append(vals, value)
			if hasInit {
				vals = append(vals, init)
			}
			vals = append(vals, prev...)
		default:
			vals = append(append(vals, prev...), value)
		}
		delete(initial, clean)
		multi[clean] = vals
	}
	for k, v := range initial {
		multi[k] = []string{v}
	}
	keys := make([]string, 0, len(multi))
	for k := range multi {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		for _, v := range multi[k] {
			out = append(out, "--"+strings.TrimPrefix(k, "--")+"="+v)
		}
	}
	return out
}
