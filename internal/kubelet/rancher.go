package kubelet

// rancher.go finds what kubelet reads on RKE2 and k3s nodes (docs/contract.md "Kubelet's config"):
// their units name no kubelet config; RKE2 (built on k3s's agent) and k3s build kubelet's command
// line themselves from their config.yaml, its config.yaml.d drop-ins and their units' environment.
// The resolv.conf they choose goes into their own drop-in of kubelet's --config-dir
// (RancherDefaults, rewritten at every start), so a later drop-in there wins over it; the user's
// kubelet-arg goes on kubelet's command line and wins over both (kubelet's flag precedence).

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/systemd"
	"go.yaml.in/yaml/v3"
)

// rancherDir is where RKE2 and k3s keep their config.yaml.
func rancherDir(shape string) string { return path.Join("/etc/rancher", shape) }

// RancherConfig is the config.yaml of RKE2 or k3s, where their hints point.
func RancherConfig(shape string) string { return path.Join(rancherDir(shape), "config.yaml") }

// rancherDropInDir is the directory of config.yaml's drop-ins (k3s's configfilearg: the config
// file's name plus ".d").
func rancherDropInDir(shape string) string { return RancherConfig(shape) + ".d" }

// RancherDropIn reports whether RKE2 and k3s read a file of that name in config.yaml.d: k3s's
// pkg/configfilearg (dotDFiles) takes every entry that is not a directory and whose name ends in
// ".yaml" or ".yml" in any letter case (pkg/agent/util HasSuffixI, which lowers the name with
// strings.ToLower), hidden names included.
func RancherDropIn(name string) bool {
	n := strings.ToLower(name)
	return strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")
}

// rancherDropInPatterns are RancherDropIn's names as path.Match patterns (kubelet.manage's Writes).
var rancherDropInPatterns = []string{"*.[yY][aA][mM][lL]", "*.[yY][mM][lL]"}

// rancherOpts is what RKE2 and k3s read of their config: the last resolv-conf and data-dir, every
// kubelet-arg, each with the file:line that set it.
type rancherOpts struct {
	resolvConf, resolvConfAt string
	dataDir                  string
	kubeletArgs              []string
	kubeletArgAt             []string
}

// fromRancher is the RKE2/k3s step: their config files and the unit's environment decide.
func (in *Inputs) fromRancher(r nodefs.Reader, problem func(string, int, string), shape, unit string, env []systemd.EnvVar) Found {
	return in.rancher(r, problem, shape, unit, env, nil)
}

// Complete finishes a Found of FindProcess: for a running k3s, whose kubelet is inside it, its own
// flags and environment over its config files (k3s puts config.yaml's values before the command
// line's, and reads K3S_RESOLV_CONF only when neither sets resolv-conf), and the unit that starts
// it when the node has one. Other Founds are returned as they are.
func Complete(r nodefs.Reader, f Found) Found {
	if f.process == nil {
		return f
	}
	unit := ""
	if n, p, _, _ := pickUnit(r); p != "" && shapeOf(n) == ShapeK3s {
		unit = n
	}
	var in Inputs
	out := in.rancher(r, func(string, int, string) {}, ShapeK3s, unit, nil, f.process)
	out.How, out.PID = f.How, f.PID
	if out.ConfigDir != "" {
		out.How += " with --config-dir " + out.ConfigDir
	}
	return out
}

func (in *Inputs) rancher(r nodefs.Reader, problem func(string, int, string), shape, unit string, env []systemd.EnvVar, proc *rancherProcess) Found {
	found := Found{Unit: unit, Shape: shape, RancherConfig: RancherConfig(shape)}
	var o rancherOpts
	// k3s's configfilearg (readConfigFile) reads config.yaml, then its config.yaml.d drop-ins in
	// name order; a later key replaces an earlier one, and a key ending in "+" appends to a list.
	files := []string{RancherConfig(shape)}
	dropDir := rancherDropInDir(shape)
	if es, err := r.ReadDir(dropDir); err == nil {
		var names []string
		for _, e := range es {
			if !e.IsDir() && RancherDropIn(e.Name()) {
				names = append(names, e.Name())
			}
		}
		slices.Sort(names) // os.ReadDir's order, which dotDFiles keeps: bytewise
		for _, n := range names {
			files = append(files, path.Join(dropDir, n))
		}
	}
	for _, p := range files {
		data, err := r.ReadFile(p, nodefs.Config)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		in.Rancher = append(in.Rancher, p)
		if err != nil {
			problem(p, 0, err.Error())
			continue
		}
		if err := o.read(data, p); err != nil {
			var ke *Error
			if errors.As(err, &ke) {
				problem(ke.Path, ke.Line, ke.Msg)
			} else {
				problem(p, 0, err.Error())
			}
		}
	}
	var envSet *systemd.EnvVar
	envName := strings.ToUpper(shape) + "_RESOLV_CONF"
	if proc != nil {
		by := fmt.Sprintf("of the running %s, pid %d", shape, proc.pid)
		for _, a := range proc.kubeletArgs {
			o.kubeletArgs = append(o.kubeletArgs, a)
			o.kubeletArgAt = append(o.kubeletArgAt, "--kubelet-arg "+by)
		}
		if proc.hasResolvConf {
			o.resolvConf, o.resolvConfAt = proc.resolvConf, "--resolv-conf "+by
		}
		if proc.dataDir != "" {
			o.dataDir = proc.dataDir
		}
		if proc.env != "" {
			envSet = &systemd.EnvVar{Name: envName, Value: proc.env}
			envSet.Source.Path = "the environment " + by
		}
	} else {
		envSet = envValue(env, envName)
	}
	dataDir := o.dataDir
	if dataDir == "" {
		dataDir = path.Join("/var/lib/rancher", shape)
	}
	// k3s passes --config-dir=DATA/agent/etc/kubelet.conf.d (its defaults and the user's drop-ins).
	if d := path.Join(dataDir, "agent/etc/kubelet.conf.d"); exists(r, d) {
		found.ConfigDir = d
	}
	found.How = fmt.Sprintf("%s runs kubelet (%s); no kubelet config file", unit, shapeRuns(shape))
	if found.ConfigDir != "" {
		found.How = fmt.Sprintf("%s runs kubelet (%s) with --config-dir %s", unit, shapeRuns(shape), found.ConfigDir)
	}
	found.HasResolvConf = true
	arg := effectiveResolvArg(o.kubeletArgs)
	switch {
	case arg >= 0:
		name, value, _ := strings.Cut(o.kubeletArgs[arg], "=")
		found.ResolvConf = value
		found.ResolvConfHow = fmt.Sprintf("kubelet-arg resolv-conf (%s)", o.kubeletArgAt[arg])
		found.ResolvOrigin = originAt(OriginRancherArg, o.kubeletArgAt[arg])
		// The entry's name as written, which an edit keeps (effectiveResolvArg: the spelling decides
		// where k3s passes it).
		found.ResolvOrigin.Var = name
	case found.ConfigDir != "" && laterDropIn(r, found.ConfigDir, shape):
		// A drop-in after k3s's own sets resolvConf: kubelet merges it over k3s's choice, whatever
		// that is. Load reads it from the drop-ins, as for any --config-dir.
		found.HasResolvConf = false
		return found
	case o.resolvConf != "":
		found.ResolvConf = o.resolvConf
		found.ResolvConfHow = fmt.Sprintf("resolv-conf (%s)", o.resolvConfAt)
		found.ResolvOrigin = originAt(OriginRancherKey, o.resolvConfAt)
	case envSet != nil && proc != nil:
		found.ResolvConf = envSet.Value
		found.ResolvConfHow = fmt.Sprintf("%s in %s", envName, envSet.Source.Path)
		found.ResolvOrigin = Origin{Kind: OriginProcess, Var: envName}
	case envSet != nil:
		found.ResolvConf = envSet.Value
		found.ResolvConfHow = fmt.Sprintf("%s (%s) of %s", envName, envSet.Source, unit)
		found.ResolvOrigin = Origin{Kind: OriginEnvFile, Path: envSet.Source.Path, Line: envSet.Source.Line, Var: envName}
		if in.unitFile(envSet.Source.Path) {
			found.ResolvOrigin.Kind = OriginUnitEnv
		}
	default:
		found.ResolvConf, found.ResolvConfHow = chooseResolv(r, shape, dataDir)
		found.ResolvOrigin = Origin{Kind: OriginRancherChoice}
	}
	found.ResolvConf = absFromRoot(found.ResolvConf)
	return found
}

func shapeRuns(shape string) string {
	if shape == ShapeK3s {
		return "inside the k3s process"
	}
	return "as rke2's child process"
}

func exists(r nodefs.Reader, p string) bool {
	_, err := r.Stat(p)
	return err == nil
}

func envValue(env []systemd.EnvVar, name string) *systemd.EnvVar {
	for i := len(env) - 1; i >= 0; i-- {
		if env[i].Name == name {
			if env[i].Value == "" {
				return nil // an empty flag value is no choice: k3s tests `!= ""`
			}
			return &env[i]
		}
	}
	return nil
}

// effectiveResolvArg is the index of the kubelet-arg whose --resolv-conf kubelet gets last (kubelet's
// flags are last-wins), -1 when none sets it. k3s hands kubelet-args to kubelet through pkg/util
// GetArgs: grouped by their name as written ("--" taken off; a trailing "+" appends to the group, a
// trailing "-" prepends), each group's values in order, the groups sorted by name; kubelet's flag
// set reads "_" as "-". So a resolv_conf= comes after every resolv-conf=, whatever their order in
// kubelet-arg.
func effectiveResolvArg(args []string) int {
	groups := map[string][]int{}
	for i, a := range args {
		name, _, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !ok {
			continue // GetArgs makes it --NAME=true: no file
		}
		group := strings.TrimRight(name, "-+")
		if strings.ReplaceAll(group, "_", "-") != "resolv-conf" {
			continue
		}
		if strings.HasSuffix(name, "-") {
			groups[group] = append([]int{i}, groups[group]...)
		} else {
			groups[group] = append(groups[group], i)
		}
	}
	last := ""
	for g := range groups {
		if g > last {
			last = g
		}
	}
	if last == "" {
		return -1
	}
	return groups[last][len(groups[last])-1]
}

// RancherDefaults is the drop-in RKE2 and k3s (1.32+) write into their kubelet --config-dir at
// every start (pkg/daemons/agent writeKubeletConfig, "00-"+program+"-defaults.conf"): it holds the
// resolv.conf they pick (defaultKubeletConfig: ResolverConfig) among their other defaults.
func RancherDefaults(dir, shape string) string { return path.Join(dir, "00-"+shape+"-defaults.conf") }

// laterDropIn reports whether a drop-in of dir that kubelet merges after RKE2's or k3s's own sets
// resolvConf (a drop-in it cannot read counts: Load then reports it).
func laterDropIn(r nodefs.Reader, dir, shape string) bool {
	names, _, err := dropIns(r, dir)
	if err != nil {
		return false
	}
	own := RancherDefaults(dir, shape)
	for _, p := range names {
		if !after(dir, p, own) {
			continue
		}
		data, err := r.ReadFile(p, nodefs.Config)
		if err != nil {
			return true
		}
		if f, err := parseFile(data, p); err != nil || f.resolvConf != nil {
			return true
		}
	}
	return false
}

// read merges one config file into o.
func (o *rancherOpts) read(data []byte, p string) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return yamlError(p, err)
	}
	if len(doc.Content) == 0 {
		return nil
	}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode {
		return &Error{p, top.Line, "not a YAML mapping"}
	}
	for i := 0; i+1 < len(top.Content); i += 2 {
		key, val := top.Content[i].Value, deref(top.Content[i+1])
		appendList := strings.HasSuffix(key, "+")
		key = strings.TrimSuffix(key, "+")
		at := fmt.Sprintf("%s:%d", p, val.Line)
		switch key {
		case "resolv-conf", "data-dir":
			var s string
			if err := val.Decode(&s); err != nil {
				return yamlError(p, err)
			}
			if key == "data-dir" {
				o.dataDir = s
			} else {
				o.resolvConf, o.resolvConfAt = s, at
			}
		case "kubelet-arg":
			var list []string
			if val.Kind == yaml.SequenceNode {
				if err := val.Decode(&list); err != nil {
					return yamlError(p, err)
				}
			} else {
				var s string
				if err := val.Decode(&s); err != nil {
					return yamlError(p, err)
				}
				list = []string{s}
			}
			if !appendList {
				o.kubeletArgs, o.kubeletArgAt = nil, nil
			}
			for j, a := range list {
				line := val.Line
				if val.Kind == yaml.SequenceNode {
					line = val.Content[j].Line
				}
				o.kubeletArgs = append(o.kubeletArgs, a)
				o.kubeletArgAt = append(o.kubeletArgAt, fmt.Sprintf("%s:%d", p, line))
			}
		}
	}
	return nil
}

// resolvNameserver is k3s's own pattern (pkg/agent/config isValidResolvConf).
var resolvNameserver = regexp.MustCompile(`^nameserver\s+([^\s]*)`)

// chooseResolv is RKE2's and k3s's choice when nothing names a file (k3s's
// locateOrGenerateResolvConf): the first of /etc/resolv.conf and /run/systemd/resolve/resolv.conf
// whose every nameserver is a global unicast address (a loopback stub like 127.0.0.53 or a
// link-local cache like 169.254.25.10 fails the test), else a file they generate with 8.8.8.8.
func chooseResolv(r nodefs.Reader, shape, dataDir string) (string, string) {
	var skipped []string
	for _, p := range []string{"/etc/resolv.conf", "/run/systemd/resolve/resolv.conf"} {
		ok, why := validResolv(r, p)
		if ok {
			how := fmt.Sprintf("%s's own choice: %s lists only global unicast nameservers", shape, p)
			if len(skipped) > 0 {
				how += " (" + strings.Join(skipped, "; ") + ")"
			}
			return p, how
		}
		skipped = append(skipped, p+" "+why)
	}
	gen := path.Join(dataDir, "agent/etc/resolv.conf")
	return gen, fmt.Sprintf("%s's own choice: the file it writes with nameserver 8.8.8.8 (%s)", shape, strings.Join(skipped, "; "))
}

func validResolv(r nodefs.Reader, p string) (bool, string) {
	data, err := r.ReadFile(p, nodefs.Config)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, "does not exist"
		}
		return false, "cannot be read"
	}
	found := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		m := resolvNameserver.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		a, err := netip.ParseAddr(m[1])
		if err != nil || !a.IsGlobalUnicast() || a.IsLinkLocalUnicast() {
			return false, "lists " + m[1]
		}
		found = true
	}
	if !found {
		return false, "lists no nameserver"
	}
	return true, ""
}
