package kubelet

// unit.go finds kubelet's --config from its systemd unit (docs/contract.md "Kubelet's config", step
// 2): the unit, its drop-ins and the environment files they name, read as systemd would start
// kubelet (the parsing is package systemd's).

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/systemd"
)

// fromUnit reads the kubelet unit as systemd would start it, recording what it read in in. ok is
// false when there is no unit, or it names no config file.
// The Found it returns names the unit and shape even when ok is false; for RKE2 and k3s (whose units
// never name kubelet's config) it is complete.
func (in *Inputs) fromUnit(r nodefs.Reader, problem func(string, int, string)) (Found, bool) {
	name, unit, dropIns, errs := pickUnit(r)
	if unit == "" {
		return Found{}, false
	}
	in.Unit = unit
	for _, err := range errs {
		problem("", 0, err.Error())
	}
	var ufs []systemd.UnitFile
	for _, p := range append([]string{unit}, dropIns...) {
		data, err := r.ReadFile(p, nodefs.Config)
		if err != nil {
			problem(p, 0, err.Error())
			continue
		}
		if p != unit {
			in.DropIns = append(in.DropIns, p)
		}
		ufs = append(ufs, systemd.UnitFile{Path: p, Data: data})
	}
	u := systemd.ParseServiceUnit(name, ufs)
	if u.Err != nil {
		// systemd refuses to load the unit: it does not start kubelet, whatever it names.
		problem(unit, 0, u.Err.Error())
		return Found{}, false
	}
	lists := [][]systemd.EnvVar{u.Environment}
	for _, ef := range u.EnvironmentFiles {
		in.EnvFiles = append(in.EnvFiles, ef.Path)
		for _, p := range globEnvFile(r, ef.Path) {
			data, err := r.ReadFile(p, nodefs.Config)
			if err != nil {
				if !errors.Is(err, fs.ErrNotExist) || !ef.Optional {
					problem(p, 0, err.Error())
				}
				continue
			}
			vars, _, err := systemd.ParseEnvFile(p, data)
			if err != nil {
				problem(p, 0, err.Error())
				continue
			}
			lists = append(lists, vars)
		}
	}
	env := systemd.MergeEnv(lists...)
	if sh := shapeOf(name); sh != ShapeKubelet {
		return in.fromRancher(r, problem, sh, name, env), false
	}
	ref, ok := UnitConfig(u, env)
	found := Found{Unit: name, Shape: ShapeKubelet}
	for _, p := range append(append([]string{}, in.DropIns...), in.EnvFiles...) {
		if b := path.Base(p); b == "10-kubeadm.conf" || b == "kubeadm-flags.env" {
			found.Kubeadm = true
		}
	}
	if ref.HasResolvConf {
		found.ResolvConf, found.HasResolvConf = absFromRoot(ref.ResolvConf), true
		found.ResolvConfHow = fmt.Sprintf("--resolv-conf in ExecStart= (%s) of %s", ref.ResolvConfSource, unit)
		found.ResolvOrigin = Origin{Kind: OriginExecStart, Path: ref.ResolvConfSource.Path, Line: ref.ResolvConfSource.Line}
		if ref.ResolvConfVar != "" {
			found.ResolvConfHow = fmt.Sprintf("--resolv-conf in $%s (%s) of %s", ref.ResolvConfVar, ref.ResolvConfSource, unit)
			found.ResolvOrigin = Origin{Kind: OriginEnvFile, Path: ref.ResolvConfSource.Path, Line: ref.ResolvConfSource.Line, Var: ref.ResolvConfVar}
			if in.unitFile(ref.ResolvConfSource.Path) {
				found.ResolvOrigin.Kind = OriginUnitEnv // Environment= in the unit or a drop-in
			}
		}
	}
	if !ok {
		return found, false
	}
	found.Path = absFromRoot(ref.Config)
	if ref.HasConfigDir {
		found.ConfigDir = absFromRoot(ref.ConfigDir)
	}
	switch {
	case ref.Var != "" && ref.Referenced:
		found.How = fmt.Sprintf("--config in $%s (%s) of %s", ref.Var, ref.Source, unit)
	case ref.Var != "":
		found.How = fmt.Sprintf("%s (%s) of %s", ref.Var, ref.Source, unit)
	default:
		found.How = fmt.Sprintf("--config in ExecStart= (%s) of %s", ref.Source, unit)
	}
	return found, true
}

// unitFile reports whether p is the unit found or one of its drop-ins (not an environment file).
func (in *Inputs) unitFile(p string) bool {
	return p == in.Unit || slices.Contains(in.DropIns, p)
}

// pickUnit finds the unit that starts kubelet: the first of Units that is enabled (a link in a
// .wants directory of /etc/systemd/system), else the first installed.
func pickUnit(r nodefs.Reader) (name, unit string, dropIns []string, errs []error) {
	for _, n := range Units {
		p, d, e := systemd.FindUnit(r, n)
		if p == "" {
			continue
		}
		if unit == "" {
			name, unit, dropIns, errs = n, p, d, e
		}
		if enabled(r, n) {
			return n, p, d, e
		}
	}
	return name, unit, dropIns, errs
}

// enabled: `systemctl enable` links the unit into the .wants directory of its WantedBy= target;
// every unit of Units is wanted by multi-user.target.
func enabled(r nodefs.Reader, name string) bool {
	_, err := r.Stat(path.Join("/etc/systemd/system/multi-user.target.wants", name))
	return err == nil
}

func shapeOf(unit string) string {
	switch {
	case strings.HasPrefix(unit, "rke2-"):
		return ShapeRKE2
	case strings.HasPrefix(unit, "k3s"):
		return ShapeK3s
	}
	return ShapeKubelet
}

// absFromRoot makes a relative --config absolute: systemd starts kubelet in / unless
// WorkingDirectory= says otherwise, and no kubelet unit seen (kubespray, kubeadm) sets it.
func absFromRoot(p string) string {
	if p == "" || path.IsAbs(p) {
		return path.Clean(p)
	}
	return path.Join("/", p)
}

// globEnvFile expands EnvironmentFile='s glob in its last component, as systemd does when the
// command starts (a pattern in a directory name is rare enough to be read literally).
func globEnvFile(r nodefs.Reader, p string) []string {
	dir, base := path.Split(p)
	if !strings.ContainsAny(base, "*?[") {
		return []string{p}
	}
	es, err := r.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range es {
		if ok, _ := path.Match(base, e.Name()); ok {
			out = append(out, path.Join(dir, e.Name()))
		}
	}
	return out
}

// ConfigRef is where a kubelet unit names kubelet's config file.
type ConfigRef struct {
	Flags
	// Command is the ExecStart= command that starts kubelet.
	Command systemd.ExecCommand
	// Var is the variable that carried --config into the command
	// ("KUBELET_ARGS" from kubespray's kubelet.env, "KUBELET_CONFIG_ARGS"
	// from kubeadm's 10-kubeadm.conf); "" when ExecStart= writes it itself.
	Var string
	// Source is the file:line that wrote --config: the variable's
	// assignment, or the ExecStart= line.
	Source systemd.Setting
	// ResolvConfVar and ResolvConfSource are Var and Source for --resolv-conf.
	ResolvConfVar    string
	ResolvConfSource systemd.Setting
	// Referenced is false when the command line has no --config and it was
	// taken from a KUBELET_CONFIG or KUBELET_CONFIG_ARGS variable that the
	// command does not use.
	Referenced bool
}

// UnitConfig returns kubelet's --config as the unit starts it: the
// last ExecStart= command whose executable is named kubelet (else the last
// command), expanded with env (systemd.MergeEnv of the unit's Environment= and its
// environment files), searched by FlagsFromArgs. When the command line
// has none, a variable KUBELET_CONFIG (a path, or arguments with --config)
// or KUBELET_CONFIG_ARGS is used, with Referenced false. ok is false when
// neither names a config file.
func UnitConfig(u *systemd.ServiceUnit, env []systemd.EnvVar) (ref ConfigRef, ok bool) {
	if u == nil || len(u.ExecStart) == 0 {
		return ConfigRef{}, false
	}
	cmd := u.ExecStart[len(u.ExecStart)-1]
	for _, c := range u.ExecStart {
		if path.Base(c.Path) == "kubelet" {
			cmd = c
		}
	}
	var args []systemd.ExpandedArg
	if cmd.NoEnvExpand {
		for _, a := range cmd.Argv {
			args = append(args, systemd.ExpandedArg{Value: a})
		}
	} else {
		args = systemd.ExpandArgv(cmd.Argv, env)
	}
	vals := make([]string, 0, len(args))
	for _, a := range args {
		vals = append(vals, a.Value)
	}
	if len(vals) > 0 {
		vals = vals[1:] // argv[0]
	}
	ref = ConfigRef{Command: cmd, Referenced: true}
	ref.Flags = FlagsFromArgs(vals)
	// source: the variable that carried argument i into the command and the line that set it.
	source := func(i int) (string, systemd.Setting) {
		v := args[i+1].Var
		if v != "" {
			for j := len(env) - 1; j >= 0; j-- {
				if env[j].Name == v {
					return v, env[j].Source
				}
			}
		}
		return v, cmd.Source
	}
	if ref.HasResolvConf {
		ref.ResolvConfVar, ref.ResolvConfSource = source(ref.ResolvConfIndex)
	}
	if ref.HasConfig {
		ref.Var, ref.Source = source(ref.ConfigIndex)
		return ref, true
	}
	for _, name := range []string{"KUBELET_CONFIG", "KUBELET_CONFIG_ARGS"} {
		for i := len(env) - 1; i >= 0; i-- {
			v := env[i]
			if v.Name != name {
				continue
			}
			words := systemd.SplitWords(v.Value)
			fl := FlagsFromArgs(words)
			if !fl.HasConfig && len(words) == 1 && strings.HasPrefix(words[0], "/") {
				fl.Config, fl.HasConfig, fl.ConfigIndex = words[0], true, 0
			}
			if fl.HasConfig {
				out := ConfigRef{Flags: fl, Command: cmd, Var: name, Source: v.Source}
				out.ResolvConf, out.HasResolvConf, out.ResolvConfIndex = ref.ResolvConf, ref.HasResolvConf, ref.ResolvConfIndex
				out.ResolvConfVar, out.ResolvConfSource = ref.ResolvConfVar, ref.ResolvConfSource
				return out, true
			}
			break
		}
	}
	return ref, false
}
