package node

// kubeletconfig.go finds the file kubelet really reads (docs/contract.md "Kubelet's config") from the
// node's files: the kubelet unit, its drop-ins and the environment files they name, else the places
// kubespray and kubeadm write it. The running kubelet's own command line (/proc/PID/cmdline) comes
// first on a live node; the edges read it and hand it in through UseKubeletConfig.

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/systemd"
)

// Where kubespray and kubeadm put kubelet's config, in the order `kubelet.config: auto` tries them
// when neither a running kubelet nor its unit names one.
const (
	// KubesprayKubeletConfig is named by --config in /etc/kubernetes/kubelet.env (kubespray's
	// roles/kubernetes/node/templates/kubelet.env.v1beta1.j2).
	KubesprayKubeletConfig = "/etc/kubernetes/kubelet-config.yaml"
	// KubeadmKubeletConfig is named by KUBELET_CONFIG_ARGS in kubeadm's 10-kubeadm.conf.
	KubeadmKubeletConfig = "/var/lib/kubelet/config.yaml"
	// KubeletUnit is the unit that starts kubelet on both.
	KubeletUnit = "kubelet.service"
)

// KubeletConfigPaths are the known places, in the order auto tries them.
var KubeletConfigPaths = []string{KubesprayKubeletConfig, KubeadmKubeletConfig}

// KubeletFound is where kubelet's config is and how that was found.
type KubeletFound struct {
	// Path is the node path of the config file; "" when kubelet runs without one (its defaults).
	Path string
	// ConfigDir is --config-dir, "" when none.
	ConfigDir string
	// How is the reason, for `check`.
	How string
}

// kubeletDiscovery is what finding kubelet's config read: the inputs the daemon must watch.
type kubeletDiscovery struct {
	unit     string   // the kubelet unit file found, "" when none
	dropIns  []string // its drop-ins, in systemd's order
	envFiles []string // the environment files they name (globs as written)
}

// FindKubeletConfig finds kubelet's config from the node's files only (docs/contract.md "Kubelet's
// config", steps 2 and 3; step 1, the running kubelet, is the live node's): an explicit
// kubelet.config; else --config (or KUBELET_CONFIG) as the kubelet unit, its drop-ins and the
// environment files they name start kubelet; else the first of KubeletConfigPaths that exists.
// Problems with the unit's files are returned; they never stop the search.
func FindKubeletConfig(r nodefs.Reader, cfg config.Config) (KubeletFound, []Problem) {
	f, _, ps := findKubeletConfig(r, cfg)
	return f, ps
}

func findKubeletConfig(r nodefs.Reader, cfg config.Config) (KubeletFound, kubeletDiscovery, []Problem) {
	var d kubeletDiscovery
	if cfg.Kubelet.Config != "" && cfg.Kubelet.Config != config.KubeletConfigAuto {
		return KubeletFound{Path: cfg.Kubelet.Config, How: "kubelet.config in nodedns's config"}, d, nil
	}
	var ps []Problem
	problem := func(p string, line int, msg string) {
		ps = append(ps, Problem{Path: p, Line: line, Source: SourceUnit, Msg: msg})
	}
	if found, ok := d.fromUnit(r, problem); ok {
		return found, d, ps
	}
	for _, p := range KubeletConfigPaths {
		if _, err := r.Stat(p); err == nil {
			why := "no kubelet unit names --config"
			if d.unit != "" {
				why = d.unit + " names no --config"
			}
			return KubeletFound{Path: p, How: fmt.Sprintf("%s; the first of %s that exists", why, strings.Join(KubeletConfigPaths, ", "))}, d, ps
		}
	}
	return KubeletFound{How: fmt.Sprintf("no kubelet unit names --config and neither %s exists: kubelet's defaults", strings.Join(KubeletConfigPaths, " nor "))}, d, ps
}

// fromUnit reads the kubelet unit as systemd would start it. ok is false when there is no unit, or it
// names no config file.
func (d *kubeletDiscovery) fromUnit(r nodefs.Reader, problem func(string, int, string)) (KubeletFound, bool) {
	for _, dir := range unitDirs {
		p := path.Join(dir, KubeletUnit)
		if _, err := r.Stat(p); err == nil {
			d.unit = p
			break
		}
	}
	if d.unit == "" {
		return KubeletFound{}, false
	}
	var dropDirs []string
	for _, dir := range unitDirs {
		dropDirs = append(dropDirs, path.Join(dir, KubeletUnit+".d"))
	}
	dropins, errs := nodefs.DropIns(r, dropDirs, ".conf")
	for _, err := range errs {
		problem("", 0, err.Error())
	}
	var ufs []systemd.UnitFile
	for _, p := range append([]string{d.unit}, dropInPaths(dropins)...) {
		data, err := r.ReadFile(p, nodefs.Config)
		if err != nil {
			problem(p, 0, err.Error())
			continue
		}
		if p != d.unit {
			d.dropIns = append(d.dropIns, p)
		}
		ufs = append(ufs, systemd.UnitFile{Path: p, Data: data})
	}
	u := systemd.ParseServiceUnit(KubeletUnit, ufs)
	if u.Err != nil {
		// systemd refuses to load the unit: it does not start kubelet, whatever it names.
		problem(d.unit, 0, u.Err.Error())
		return KubeletFound{}, false
	}
	lists := [][]systemd.EnvVar{u.Environment}
	for _, ef := range u.EnvironmentFiles {
		d.envFiles = append(d.envFiles, ef.Path)
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
	ref, ok := systemd.FindKubeletConfig(u, systemd.MergeEnv(lists...))
	if !ok {
		return KubeletFound{}, false
	}
	found := KubeletFound{Path: absFromRoot(ref.Config)}
	if ref.HasConfigDir {
		found.ConfigDir = absFromRoot(ref.ConfigDir)
	}
	switch {
	case ref.Var != "" && ref.Referenced:
		found.How = fmt.Sprintf("--config in $%s (%s) of %s", ref.Var, ref.Source, d.unit)
	case ref.Var != "":
		found.How = fmt.Sprintf("%s (%s) of %s", ref.Var, ref.Source, d.unit)
	default:
		found.How = fmt.Sprintf("--config in ExecStart= (%s) of %s", ref.Source, d.unit)
	}
	return found, true
}

// absFromRoot makes a relative --config absolute: systemd starts kubelet in / unless
// WorkingDirectory= says otherwise, and no kubelet unit seen (kubespray, kubeadm) sets it.
func absFromRoot(p string) string {
	if p == "" || path.IsAbs(p) {
		return path.Clean(p)
	}
	return path.Join("/", p)
}

func dropInPaths(ds []nodefs.DropIn) []string {
	out := make([]string, 0, len(ds))
	for _, d := range ds {
		out = append(out, d.Path)
	}
	return out
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

// readKubelet finds kubelet's config from the node's files and reads it.
func (s *Snapshot) readKubelet(r nodefs.Reader, cfg config.Config) {
	found, d, ps := findKubeletConfig(r, cfg)
	s.Problems = append(s.Problems, ps...)
	s.kubeletInputs = d
	s.loadKubelet(r, found)
}

// loadKubelet reads the config found and its --config-dir drop-ins.
func (s *Snapshot) loadKubelet(r nodefs.Reader, found KubeletFound) {
	s.Kubelet = Kubelet{Path: found.Path, ResolvConf: KubeletDefaultResolvConf, How: found.How, ConfigDir: found.ConfigDir}
	fail := func(err error) {
		s.Kubelet.Err = err
		p, line := s.Kubelet.Path, 0
		var ke *KubeletError
		if errors.As(err, &ke) {
			p, line = ke.Path, ke.Line
		}
		msg := err.Error()
		if ke != nil {
			msg = ke.Msg
		}
		s.problem(SourceKubelet, p, line, msg)
	}
	if found.Path != "" {
		data, err := r.ReadFile(found.Path, nodefs.Config)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			s.Kubelet.Exists = true
			fail(err)
			return
		default:
			k, err := ParseKubelet(data, found.Path)
			k.How, k.ConfigDir = found.How, found.ConfigDir
			s.Kubelet = k
			if err != nil {
				fail(err)
				return
			}
		}
	}
	if found.ConfigDir == "" {
		return
	}
	// kubelet 1.28+ merges every *.conf of --config-dir over the config, in file name order
	// (kubelet's mergeKubeletConfigurations): each can set resolvConf, clusterDNS, clusterDomain.
	es, err := r.ReadDir(found.ConfigDir)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		fail(err)
		return
	}
	names := make([]string, 0, len(es))
	for _, e := range es {
		if strings.HasSuffix(e.Name(), ".conf") && !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	for _, n := range names {
		p := path.Join(found.ConfigDir, n)
		data, err := r.ReadFile(p, nodefs.Config)
		if err != nil {
			fail(err)
			return
		}
		f, err := parseKubeletFile(data, p)
		if err != nil {
			fail(err)
			return
		}
		f.apply(&s.Kubelet)
	}
}

// UseKubeletConfig replaces the kubelet config Observe found in the node's files by the one found
// (the running kubelet's --config, read by the live node's edges), reading it and the resolv.conf it
// names through the snapshot's reader. Problems of the config read before are dropped with it.
func (s *Snapshot) UseKubeletConfig(found KubeletFound) {
	if found.Path == s.Kubelet.Path && found.ConfigDir == s.Kubelet.ConfigDir {
		s.Kubelet.How = found.How
		return
	}
	kept := s.Problems[:0]
	for _, p := range s.Problems {
		if p.Source != SourceKubelet {
			kept = append(kept, p)
		}
	}
	s.Problems = kept
	before := s.Kubelet.ResolvConf
	s.loadKubelet(s.Files, found)
	if s.Kubelet.ResolvConf == before {
		return
	}
	s.KubeletResolv = ResolvFile{}
	if s.Kubelet.ResolvConf == "" {
		return
	}
	for _, rf := range []ResolvFile{s.ResolvConf, s.ResolvedResolv, s.ResolvedStub, s.NodednsResolv} {
		if rf.Path == path.Clean(s.Kubelet.ResolvConf) {
			s.KubeletResolv = rf
			return
		}
	}
	s.KubeletResolv = s.readResolv(s.Files, s.Kubelet.ResolvConf)
}

// KubeletSources are the node paths (files and directories) that decided which kubelet config was
// read, for the daemon's watches: the kubelet unit and drop-ins, their environment files, the
// config and its --config-dir.
func (s *Snapshot) KubeletSources() (paths, dirs []string) {
	d := s.kubeletInputs
	if d.unit != "" {
		paths = append(paths, d.unit)
	}
	paths = append(paths, d.dropIns...)
	paths = append(paths, d.envFiles...)
	if s.Kubelet.Path != "" {
		paths = append(paths, s.Kubelet.Path)
	}
	if s.Kubelet.ConfigDir != "" {
		dirs = append(dirs, s.Kubelet.ConfigDir)
	}
	return paths, dirs
}
