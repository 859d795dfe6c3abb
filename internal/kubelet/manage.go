package kubelet

// manage.go decides, for kubelet.manage (docs/contract.md "kubelet.manage"), the one place whose
// value wins for kubelet's resolv.conf, in the shape's own way, and the edit that points it at
// nodedns's file. It reads through a nodefs.Reader and never writes: policy plans the edit as a
// normal change (backed up, given back by restore).

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"github.com/nodedns/nodedns/internal/nodefs"
)

// Where a --resolv-conf (or RKE2's and k3s's own choice) comes from (Found.ResolvOrigin).
const (
	OriginExecStart     = "execstart"        // written in the unit's ExecStart=
	OriginUnitEnv       = "unit-environment" // a variable of Environment= in the unit or a drop-in
	OriginEnvFile       = "env-file"         // a variable of an EnvironmentFile=
	OriginProcess       = "process"          // only the running process says so
	OriginRancherArg    = "kubelet-arg"      // RKE2/k3s kubelet-arg resolv-conf= in a config file
	OriginRancherKey    = "resolv-conf"      // RKE2/k3s resolv-conf: in a config file
	OriginRancherChoice = "choice"           // RKE2/k3s chose a file themselves
)

// Origin is where the resolv.conf kubelet gets is set, when a flag (or RKE2's and k3s's choice)
// decides it: Kind, the file and line, the variable that carries it.
type Origin struct {
	Kind string
	Path string
	Line int
	Var  string // the variable that carries it; for a kubelet-arg, the entry's name as written
}

// originAt makes an Origin from a "path:line" (RKE2's and k3s's config files); anything else is
// the running process's own.
func originAt(kind, at string) Origin {
	i := strings.LastIndexByte(at, ':')
	if i > 0 && strings.HasPrefix(at, "/") {
		if n, err := strconv.Atoi(at[i+1:]); err == nil {
			return Origin{Kind: kind, Path: at[:i], Line: n}
		}
	}
	return Origin{Kind: OriginProcess}
}

// DropInName is nodedns's own --config-dir drop-in: kubelet walks the directory in lexical order,
// and "zz-" sorts after the numbered names kubeadm's documentation and RKE2/k3s use.
const DropInName = "zz-nodedns.conf"

// DropInHeader starts nodedns's drop-in.
const DropInHeader = "Managed by nodedns (kubelet.manage): points kubelet at nodedns's loop-free resolv.conf. Sorts after every other drop-in; `nodedns restore` removes it."

// AddedComment is the comment line nodedns puts above a key it adds to a file of another owner.
const AddedComment = "Added by nodedns (kubelet.manage); `nodedns restore` gives the file back."

// envFilePatterns are the environment files of the shapes nodedns may edit: kubespray's
// kubelet.env, kubeadm's kubeadm-flags.env, the distributions' /etc/default and /etc/sysconfig
// files, and the one k3s's installer writes for its unit. RKE2's own rke2-*.env live under /usr,
// which the packaged unit cannot write (ProtectSystem=strict): a variable set there is blocked.
var envFilePatterns = []string{
	"/etc/kubernetes/kubelet.env", "/var/lib/kubelet/kubeadm-flags.env", "/etc/default/kubelet", "/etc/sysconfig/kubelet",
	"/etc/systemd/system/k3s*.service.env", "/etc/default/k3s*", "/etc/sysconfig/k3s*",
	"/etc/default/rke2-*", "/etc/sysconfig/rke2-*",
}

// Writes are the node paths kubelet.manage may change (path.Match patterns): kubelet's config where
// kubespray and kubeadm keep it, nodedns's drop-in in a --config-dir under /etc/kubernetes or
// /var/lib/kubelet, the environment files above, RKE2's and k3s's config.yaml and the drop-ins of
// config.yaml.d they read (RancherDropIn: .yaml and .yml in any letter case).
// A place outside them is never edited (the plan blocks it, naming the file): restore may change
// only what is declared.
func Writes() []string {
	ws := append([]string{}, ConfigPaths...)
	ws = append(ws,
		path.Join("/etc/kubernetes/*", DropInName), path.Join("/var/lib/kubelet/*", DropInName),
		path.Join("/etc/kubernetes/*/*", DropInName), path.Join("/var/lib/kubelet/*/*", DropInName))
	ws = append(ws, envFilePatterns...)
	for _, sh := range []string{ShapeRKE2, ShapeK3s} {
		ws = append(ws, RancherConfig(sh))
		for _, pat := range rancherDropInPatterns {
			ws = append(ws, path.Join(rancherDropInDir(sh), pat))
		}
	}
	return ws
}

// declared reports whether kubelet.manage may change p.
func declared(p string) bool {
	for _, pat := range Writes() {
		if ok, _ := path.Match(pat, p); ok {
			return true
		}
	}
	return false
}

// Edit is the one change kubelet.manage makes, or why it cannot.
type Edit struct {
	// Path is the file to write; Before its content (nil: it does not exist), After the new one,
	// Mode its mode.
	Path   string
	Before []byte
	After  []byte
	Mode   fs.FileMode
	// Reason says what the edit does, for the plan.
	Reason string
	// Blocked, when set, is why nothing can be changed; Target is what it is about.
	Blocked string
	Target  string
}

// Manage plans pointing kubelet at file (kubelet.manage), from k as read from the node's files
// (Load of Find: what kubelet reads when it starts next). ok is false when there is nothing to do:
// kubelet reads file already, its config cannot be used (then nothing is changed anyway), its
// config disables resolvConf (""), or no kubelet is found at all (no unit, no config).
func Manage(r nodefs.Reader, k Config, file string) (e Edit, ok bool) {
	if k.Err != nil || k.ResolvConf == "" || path.Clean(k.ResolvConf) == path.Clean(file) {
		return Edit{}, false
	}
	o := k.ResolvOrigin
	block := func(target, format string, args ...any) (Edit, bool) {
		return Edit{Target: target, Blocked: fmt.Sprintf(format, args...)}, true
	}
	switch o.Kind {
	case OriginExecStart:
		return block(o.Path, "kubelet's --resolv-conf=%s is written in the ExecStart= of %s (%s:%d), which nodedns does not edit: set --resolv-conf=%s there (or move the flag to an environment file), then restart %s", k.ResolvConf, unitOr(k), o.Path, o.Line, file, unitOr(k))
	case OriginUnitEnv:
		return block(o.Path, "%s comes from Environment= in %s:%d, a unit file nodedns does not edit: set it to %s there, then restart %s", flagOrVar(o), o.Path, o.Line, file, unitOr(k))
	case OriginProcess:
		what := "--resolv-conf"
		if o.Var != "" {
			what = o.Var
		}
		return block(unitOr(k), "the running %s sets %s=%s, which no file nodedns reads says: it was started by hand or by another supervisor; point it at %s where it is started", shapeName(k), what, k.ResolvConf, file)
	case OriginEnvFile:
		if k.Shape == ShapeRKE2 || k.Shape == ShapeK3s {
			return edit(r, o.Path, func(data []byte, _ bool) ([]byte, error) { return SetEnvVar(o.Path, data, o.Var, o.Line, file) },
				fmt.Sprintf("%s=%s: %s hands it to kubelet as its resolvConf", o.Var, file, k.Shape))
		}
		return edit(r, o.Path, func(data []byte, _ bool) ([]byte, error) { return SetEnvFlag(o.Path, data, o.Var, file) },
			fmt.Sprintf("--resolv-conf=%s in %s: the flag wins over kubelet's config", file, o.Var))
	case OriginRancherArg:
		// The entry keeps its name as written (Var): its spelling decides where k3s passes it.
		name := o.Var
		if name == "" {
			name = "resolv-conf"
		}
		return edit(r, o.Path, func(data []byte, _ bool) ([]byte, error) {
			return SetYAMLListItem(data, "kubelet-arg", o.Line, name+"="+file)
		}, fmt.Sprintf("kubelet-arg %s=%s: %s passes it to kubelet last, over its own choice", name, file, k.Shape))
	case OriginRancherKey:
		return edit(r, o.Path, func(data []byte, _ bool) ([]byte, error) { return SetYAMLKey(data, "resolv-conf", file, AddedComment) },
			fmt.Sprintf("resolv-conf: %s: %s hands it to kubelet as its resolvConf", file, k.Shape))
	case OriginRancherChoice:
		p := rancherConfigOf(k)
		return edit(r, p, func(data []byte, _ bool) ([]byte, error) { return SetYAMLKey(data, "resolv-conf", file, AddedComment) },
			fmt.Sprintf("resolv-conf: %s: %s hands it to kubelet as its resolvConf instead of the file it chooses itself", file, k.Shape))
	}
	if (k.Shape == ShapeRKE2 || k.Shape == ShapeK3s) && k.ConfigDir != "" {
		// A drop-in after RKE2's or k3s's own decides (rancher.go laterDropIn): their drop-in
		// directory is theirs, and nothing their config says wins over it.
		return block(k.ResolvConfFrom, "%s sets resolvConf: %s in %s's kubelet --config-dir, after %s's own %s: it wins over %s's resolv-conf, which nodedns would set; set resolvConf: %s there, or remove it, or add `kubelet-arg: [resolv-conf=%s]` to %s (a kubelet-arg wins over every drop-in), then restart %s",
			k.ResolvConfFrom, k.ResolvConf, k.Shape, k.Shape, path.Base(RancherDefaults(k.ConfigDir, k.Shape)), k.Shape, file, file, rancherConfigOf(k), unitOr(k))
	}
	if k.ConfigDir != "" {
		return dropIn(r, k, file)
	}
	if k.Path == "" && k.Unit == "" {
		return Edit{}, false // no kubelet on this node (an image build, a node not joined yet)
	}
	if k.Path == "" {
		return block("kubelet's config", "kubelet runs without a config file (%s): there is no resolvConf to set; give kubelet a --config or set kubelet.config", k.How)
	}
	reason := fmt.Sprintf("resolvConf: %s in kubelet's config", file)
	if k.Kubeadm {
		reason += " (kubeadm init/join/upgrade rewrites this file: set it in kubeadm's KubeletConfiguration too)"
	}
	return edit(r, k.Path, func(data []byte, exists bool) ([]byte, error) {
		if !exists {
			return nil, errors.New("kubelet's config does not exist")
		}
		return SetYAMLKey(data, "resolvConf", file, AddedComment)
	}, reason)
}

// dropIn writes nodedns's drop-in into kubelet's --config-dir: the drop-ins are merged over the
// config file, so the last one that sets resolvConf wins.
func dropIn(r nodefs.Reader, k Config, file string) (Edit, bool) {
	p := path.Join(k.ConfigDir, DropInName)
	if from := k.ResolvConfFrom; from != "" && after(k.ConfigDir, from, p) {
		return Edit{Target: from, Blocked: fmt.Sprintf("%s sets resolvConf: %s and sorts after nodedns's drop-in %s in kubelet's order (depth first, by name): nodedns's drop-in would not win; remove resolvConf there or rename that file", from, k.ResolvConf, p)}, true
	}
	data := fmt.Sprintf("# %s\napiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nresolvConf: %s\n", DropInHeader, file)
	if !safeValue(file) {
		return Edit{Target: p, Blocked: fmt.Sprintf("%q cannot be written as a plain YAML value", file)}, true
	}
	return edit(r, p, func([]byte, bool) ([]byte, error) { return []byte(data), nil },
		fmt.Sprintf("resolvConf: %s in a drop-in of kubelet's --config-dir that sorts after every other", file))
}

// after reports whether from (a drop-in under dir) comes after p in kubelet's walk: depth first,
// each directory's names in lexical order, compared component by component.
func after(dir, from, p string) bool {
	rel := func(x string) []string {
		return strings.Split(strings.TrimPrefix(strings.TrimPrefix(x, strings.TrimSuffix(dir, "/")), "/"), "/")
	}
	a, b := rel(from), rel(p)
	if !strings.HasPrefix(from, strings.TrimSuffix(dir, "/")+"/") {
		return false // the config file itself: the drop-ins are merged over it
	}
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return a[i] > b[i]
		}
	}
	return len(a) > len(b)
}

// edit reads p and builds the edit with change, refusing a path kubelet.manage does not declare.
func edit(r nodefs.Reader, p string, change func(data []byte, exists bool) ([]byte, error), reason string) (Edit, bool) {
	if !declared(p) {
		return Edit{Target: p, Blocked: fmt.Sprintf("%s decides kubelet's resolv.conf, but is not among the files kubelet.manage may change (%s): point it at nodedns's file there yourself", p, strings.Join(Writes(), ", "))}, true
	}
	// The file and every directory on the way to it (the targets of symlinks included) must be
	// root's and writable by nobody else: another user could otherwise change what nodedns reads
	// there between plan and write, plant a link that turns the write against another file, or own
	// the file nodedns would hand back to them (docs/contract.md "kubelet.manage"). The store
	// refuses a write in a directory of another user's too; a file of another user's it would
	// rewrite, keeping its owner.
	if err := nodefs.CheckTrusted(r, p); err != nil {
		return Edit{Target: p, Blocked: fmt.Sprintf("%s decides kubelet's resolv.conf, but another user could change it (%v): nodedns points kubelet at its file only in root's files; make it and the directories on the way root's and writable by root only, then apply again", p, err)}, true
	}
	e := Edit{Path: p, Mode: 0o644, Reason: reason}
	data, err := r.ReadFile(p, nodefs.Config)
	exists := true
	switch {
	case errors.Is(err, fs.ErrNotExist):
		exists, data = false, nil
	case err != nil:
		return Edit{Target: p, Blocked: fmt.Sprintf("cannot read %s: %v", p, err)}, true
	default:
		if fi, err := r.Stat(p); err == nil {
			e.Mode = fi.Mode().Perm()
		}
		e.Before = data
	}
	after, err := change(data, exists)
	if err != nil {
		return Edit{Target: p, Blocked: fmt.Sprintf("cannot point kubelet at nodedns's file in %s: %v; left as it is", p, err)}, true
	}
	e.After = after
	return e, true
}

// rancherConfigOf is the config.yaml of k's RKE2 or k3s.
func rancherConfigOf(k Config) string {
	if k.RancherConfig != "" {
		return k.RancherConfig
	}
	return RancherConfig(k.Shape)
}

func unitOr(k Config) string {
	if k.Unit != "" {
		return k.Unit
	}
	return "kubelet"
}

func shapeName(k Config) string {
	if k.Shape == ShapeK3s {
		return "k3s"
	}
	return "kubelet"
}

func flagOrVar(o Origin) string {
	if o.Var != "" {
		return "$" + o.Var
	}
	return "--resolv-conf"
}

// SetBy is the file whose value decides kubelet's resolv.conf (an environment file, RKE2's or
// k3s's config file, a --config-dir drop-in, kubelet's config), "" when no file does (kubelet's
// default, a flag of the process or of ExecStart=).
func (k Config) SetBy() string {
	switch k.ResolvOrigin.Kind {
	case OriginEnvFile, OriginRancherArg, OriginRancherKey:
		return k.ResolvOrigin.Path
	case "":
		if strings.HasPrefix(k.ResolvConfFrom, "/") {
			return k.ResolvConfFrom
		}
	}
	return ""
}
