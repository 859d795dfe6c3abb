package kubelet

import (
	"fmt"
	"path"
	"strings"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/systemd"
	"go.yaml.in/yaml/v3"
)

// Where kubespray and kubeadm put kubelet's config, in the order `kubelet.config: auto` tries them
// when neither a running kubelet nor its unit names one.
const (
	// KubesprayConfig is named by --config in /etc/kubernetes/kubelet.env (kubespray's
	// roles/kubernetes/node/templates/kubelet.env.v1beta1.j2).
	KubesprayConfig = "/etc/kubernetes/kubelet-config.yaml"
	// KubeadmConfig is named by KUBELET_CONFIG_ARGS in kubeadm's 10-kubeadm.conf.
	KubeadmConfig = "/var/lib/kubelet/config.yaml"
	// Unit is the unit that starts kubelet on both, and on kubeadm's packages.
	Unit = "kubelet.service"
)

// Units are the units that start kubelet, in the order Find tries them: kubelet.service (kubespray,
// kubeadm), then the units of RKE2 (which runs kubelet as its child) and of k3s (which runs kubelet
// inside its own process). A node runs one of them; an enabled one is taken before one only
// installed (RKE2 ships both of its units).
var Units = []string{Unit, "rke2-server.service", "rke2-agent.service", "k3s.service", "k3s-agent.service"}

// Shapes: who starts kubelet, for the hints (each speaks its shape's language).
const (
	ShapeKubelet = "kubelet" // kubelet.service: kubespray, kubeadm, a unit of the user's own
	ShapeRKE2    = "rke2"
	ShapeK3s     = "k3s"
)

// ConfigPaths are the known places, in the order auto tries them.
var ConfigPaths = []string{KubesprayConfig, KubeadmConfig}

// envFiles are the environment files kubespray's and kubeadm's units name, watched before any unit
// is read so that one written after nodedns started is seen.
var envFiles = []string{"/etc/kubernetes/kubelet.env", "/var/lib/kubelet/kubeadm-flags.env", "/etc/default/kubelet", "/etc/sysconfig/kubelet"}

// Found is where kubelet's config is and how that was found.
type Found struct {
	// Path is the node path of the config file; "" when kubelet runs without one (its defaults).
	Path string
	// ConfigDir is --config-dir, "" when none.
	ConfigDir string
	// How is the reason, for `check`.
	How string
	// Unit is the unit that starts kubelet (one of Units), "" when none was found.
	Unit string
	// Shape is who starts kubelet (ShapeKubelet, ShapeRKE2, ShapeK3s); "" is ShapeKubelet.
	Shape string
	// ResolvConf is the resolv.conf a flag sets (--resolv-conf, or RKE2's and k3s's own choice,
	// which they pass to kubelet as that flag): it wins over the config and its drop-ins.
	ResolvConf    string
	HasResolvConf bool
	// ResolvConfHow says where ResolvConf comes from, for `check`.
	ResolvConfHow string
	// ResolvOrigin is where ResolvConf is set, for kubelet.manage (manage.go); zero when no flag
	// sets it.
	ResolvOrigin Origin
	// PID is the running kubelet's (or k3s's) process, 0 when read from files.
	PID int
	// RancherConfig is RKE2's or k3s's config.yaml, where their hints point.
	RancherConfig string
	// Kubeadm: kubelet.service is kubeadm's (its 10-kubeadm.conf drop-in or kubeadm-flags.env).
	Kubeadm bool
	// process is what a running k3s process said itself; Complete adds its config files.
	process *rancherProcess
}

// rancherProcess is a running k3s's own flags and environment.
type rancherProcess struct {
	pid           int
	resolvConf    string
	hasResolvConf bool
	dataDir, env  string
	kubeletArgs   []string
}

// Inputs is what finding kubelet's config read: the inputs the daemon must watch.
type Inputs struct {
	Unit     string   // the kubelet unit file found, "" when none
	Rancher  []string // RKE2's or k3s's config.yaml and config.yaml.d files read
	DropIns  []string // its drop-ins, in systemd's order
	EnvFiles []string // the environment files they name (globs as written)
}

// Problem is a file of the kubelet unit that could not be used (file:line: reason; Line 0 is the
// whole file, Path "" a directory listing). It never stops the search.
type Problem struct {
	Path string
	Line int
	Msg  string
}

// Find finds kubelet's config from the node's files only (docs/contract.md "Kubelet's config",
// steps 2 and 3; step 1, the running kubelet, is the live node's: FindProcess): an explicit
// kubelet.config; else --config (or KUBELET_CONFIG) as the kubelet unit, its drop-ins and the
// environment files they name start kubelet; else the first of ConfigPaths that exists.
func Find(r nodefs.Reader, cfg config.Config) (Found, Inputs, []Problem) {
	var in Inputs
	if cfg.Kubelet.Config != "" && cfg.Kubelet.Config != config.KubeletConfigAuto {
		return Found{Path: cfg.Kubelet.Config, How: "kubelet.config in nodedns's config"}, in, nil
	}
	var ps []Problem
	problem := func(p string, line int, msg string) {
		ps = append(ps, Problem{Path: p, Line: line, Msg: msg})
	}
	found, ok := in.fromUnit(r, problem)
	if ok || found.Shape == ShapeRKE2 || found.Shape == ShapeK3s {
		return found, in, ps
	}
	for _, p := range ConfigPaths {
		if _, err := r.Stat(p); err == nil {
			why := "no kubelet unit names --config"
			if in.Unit != "" {
				why = in.Unit + " names no --config"
			}
			found.Path, found.How = p, fmt.Sprintf("%s; the first of %s that exists", why, strings.Join(ConfigPaths, ", "))
			return found, in, ps
		}
	}
	found.How = fmt.Sprintf("no kubelet unit names --config and neither %s exists: kubelet's defaults", strings.Join(ConfigPaths, " nor "))
	return found, in, ps
}

// Sources are the node paths (files and directories) that decided which kubelet config was read,
// for the daemon's watches: the kubelet unit and drop-ins, their environment files, the config k
// read and its --config-dir.
func (in Inputs) Sources(k Config) (paths, dirs []string) {
	if in.Unit != "" {
		paths = append(paths, in.Unit)
	}
	paths = append(paths, in.DropIns...)
	paths = append(paths, in.EnvFiles...)
	paths = append(paths, in.Rancher...)
	if k.Path != "" {
		paths = append(paths, k.Path)
	}
	if k.ConfigDir != "" {
		dirs = append(dirs, k.ConfigDir)
	}
	dirs = append(dirs, k.ConfigSubdirs...)
	return paths, dirs
}

// Watches: what decides which kubelet config is read (docs/contract.md "Kubelet's config"): the
// kubelet unit and its drop-in directories in every unit directory, the places kubespray and
// kubeadm keep kubelet's config and environment files, and the paths and dirs a search found
// (Inputs.Sources: an environment file or config elsewhere, a --config-dir). The running kubelet's
// command line is in /proc, which sends no inotify events: the daemon's resync picks up a kubelet
// restarted with another --config.
func Watches(cfg config.Config, paths, dirs []string) []nodefs.Watch {
	var ws []nodefs.Watch
	file := func(p string) nodefs.Watch {
		complete := nodefs.NewlineTerminated
		if strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml") {
			complete = completeYAML
		}
		match := nodefs.Names(path.Base(p))
		if base := path.Base(p); strings.ContainsAny(base, "*?[") {
			// An EnvironmentFile= glob (systemd expands it when the command starts).
			match = func(n string) bool { ok, _ := path.Match(base, n); return ok && !strings.HasPrefix(n, ".") }
		}
		return nodefs.Watch{Dir: path.Dir(p), Match: match, Complete: complete}
	}
	if cfg.Kubelet.Config != "" && cfg.Kubelet.Config != config.KubeletConfigAuto {
		ws = append(ws, file(cfg.Kubelet.Config))
	} else {
		// Enabling a unit (pickUnit prefers the enabled one) links it here.
		ws = append(ws, nodefs.Watch{Dir: "/etc/systemd/system/multi-user.target.wants", Match: nodefs.Names(Units...)})
		for _, d := range systemd.UnitDirs {
			ws = append(ws, nodefs.Watch{Dir: d, Match: nodefs.Names(Units...), Complete: nodefs.NewlineTerminated})
			for _, u := range Units {
				ws = append(ws, nodefs.Watch{Dir: path.Join(d, u+".d"), Match: nodefs.Suffix(".conf"), Complete: nodefs.NewlineTerminated})
			}
		}
		for _, p := range append(append([]string{}, ConfigPaths...), envFiles...) {
			ws = append(ws, file(p))
		}
		for _, sh := range []string{ShapeRKE2, ShapeK3s} {
			ws = append(ws, file(RancherConfig(sh)),
				nodefs.Watch{Dir: rancherDropInDir(sh), Match: RancherDropIn, Complete: completeYAML})
		}
	}
	for _, p := range paths {
		if strings.HasPrefix(p, "/") {
			ws = append(ws, file(p))
		}
	}
	for _, d := range dirs {
		ws = append(ws, nodefs.Watch{Dir: d, Match: nodefs.Suffix(".conf"), Complete: completeYAML})
	}
	return ws
}

// completeYAML: a YAML file is complete when it parses.
func completeYAML(b []byte) error {
	var v any
	return yaml.Unmarshal(b, &v)
}
