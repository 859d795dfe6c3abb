package kubelet

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"path"
	"regexp"
	"slices"
	"strconv"

	"github.com/nodedns/nodedns/internal/nodefs"

	"go.yaml.in/yaml/v3"
)

// DefaultResolvConf is kubelet's own default for resolvConf (KubeletConfiguration v1beta1).
const DefaultResolvConf = "/etc/resolv.conf"

// Config is what nodedns needs from the kubelet config file.
type Config struct {
	Path   string // node path of the config file; "" when nothing names one
	Exists bool
	// ResolvConf is the file kubelet hands to pods with dnsPolicy Default and uses as the base of
	// ClusterFirst pods' search list. kubelet's default is /etc/resolv.conf; "" in the file disables it.
	ResolvConf    string
	ResolvConfSet bool
	ClusterDNS    []netip.Addr
	ClusterDomain string

	// How says how Path was found (docs/contract.md "Kubelet's config"), for `check`.
	How string
	// ConfigDir is kubelet's --config-dir (drop-ins merged over Path), "" when none;
	// ConfigSubdirs the directories under it that were walked (kubelet reads them too).
	ConfigDir     string
	ConfigSubdirs []string
	// ResolvConfFrom is the file (config or drop-in, file:line when known) or flag that decided
	// ResolvConf, "" when kubelet's default.
	ResolvConfFrom string
	// ResolvOrigin is where a flag (or RKE2's and k3s's choice) sets ResolvConf, for
	// kubelet.manage; zero when kubelet's config or a drop-in decides.
	ResolvOrigin Origin
	// PID is the running kubelet's (k3s's) process when it was read from /proc, else 0.
	PID int
	// Unit, Shape and RancherConfig are Found's: who starts kubelet, for boot.persistence and hints.
	Unit, Shape, RancherConfig string
	Kubeadm                    bool
	// Err is why the config (or a drop-in of ConfigDir) could not be read or parsed: then nothing
	// that depends on it is changed (docs/contract.md, invariant 5). Its message names file and line.
	Err error
}

// Error is a kubelet config that cannot be used, with the line it is about (0: the file).
type Error struct {
	Path string
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.Path, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.Path, e.Msg)
}

// yamlLine finds the line yaml.v3 names in its error text ("yaml: line 3: ...", "line 5: cannot
// unmarshal ..."): its errors carry no line field.
var yamlLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): `)

// Parse parses a KubeletConfiguration YAML document. An error is a *Error.
func Parse(data []byte, path string) (Config, error) {
	k := Config{Path: path, Exists: true, ResolvConf: DefaultResolvConf}
	f, err := parseFile(data, path)
	if err != nil {
		return k, err
	}
	if f.kind != "" && f.kind != "KubeletConfiguration" {
		return k, &Error{path, f.kindLine, fmt.Sprintf("kind is %q, not KubeletConfiguration", f.kind)}
	}
	f.apply(&k, path)
	return k, nil
}

// configFile is the subset of KubeletConfiguration we read. Unknown fields are fine: the kubelet
// config has dozens of fields we do not care about.
type configFile struct {
	kind          string
	kindLine      int
	resolvConf    *string
	clusterDNS    []netip.Addr
	hasClusterDNS bool
	clusterDomain *string
}

func (f configFile) apply(k *Config, p string) {
	if f.resolvConf != nil {
		k.ResolvConf, k.ResolvConfSet, k.ResolvConfFrom = *f.resolvConf, true, p
	}
	if f.hasClusterDNS {
		k.ClusterDNS = f.clusterDNS
	}
	if f.clusterDomain != nil {
		k.ClusterDomain = *f.clusterDomain
	}
}

func parseFile(data []byte, path string) (configFile, error) {
	var f configFile
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return f, yamlError(path, err)
	}
	if len(doc.Content) == 0 {
		return f, nil // an empty file: kubelet's defaults
	}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode {
		return f, &Error{path, top.Line, "not a YAML mapping"}
	}
	for i := 0; i+1 < len(top.Content); i += 2 {
		key, val := top.Content[i], deref(top.Content[i+1])
		// kubelet decodes its config with a case-sensitive, strict-for-known-fields decoder: the
		// names below are exact.
		switch key.Value {
		case "kind":
			var s string
			if err := val.Decode(&s); err != nil {
				return f, yamlError(path, err)
			}
			f.kind, f.kindLine = s, val.Line
		case "resolvConf":
			var s string
			if err := val.Decode(&s); err != nil {
				return f, yamlError(path, err)
			}
			f.resolvConf = &s
		case "clusterDomain":
			var s string
			if err := val.Decode(&s); err != nil {
				return f, yamlError(path, err)
			}
			f.clusterDomain = &s
		case "clusterDNS":
			f.hasClusterDNS = true
			if val.Tag == "!!null" {
				continue
			}
			if val.Kind != yaml.SequenceNode {
				return f, &Error{path, val.Line, "clusterDNS is not a list"}
			}
			for j, item := range val.Content {
				item = deref(item)
				var s string
				if err := item.Decode(&s); err != nil {
					return f, yamlError(path, err)
				}
				a, err := netip.ParseAddr(s)
				if err != nil {
					return f, &Error{path, item.Line, fmt.Sprintf("clusterDNS[%d]: %q is not an IP address", j, s)}
				}
				f.clusterDNS = append(f.clusterDNS, a.Unmap())
			}
		}
	}
	return f, nil
}

// deref follows a YAML alias (*a) to the node it names.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 16; i++ {
		n = n.Alias
	}
	return n
}

func yamlError(path string, err error) *Error {
	msg := err.Error()
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	line := 0
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = "YAML: " + msg[len(m[0]):]
	}
	return &Error{path, line, msg}
}

// Load reads the config found and its --config-dir drop-ins through r, then a --resolv-conf flag
// over them (kubelet's flag precedence). A config that cannot be read or parsed leaves kubelet's
// defaults with Err set (an *Error when it has a file and line): the first such error stops the
// reading. The paths a running process named (found.PID set: its --config, --config-dir and every
// drop-in there, its --resolv-conf) are read only when nodefs.CheckTrusted says root's; else Err is
// its *nodefs.UntrustedReadError and nothing of them is used (docs/contract.md "Kubelet's config").
func Load(r nodefs.Reader, found Found) Config {
	k := load(r, found)
	k.Unit, k.Shape, k.RancherConfig, k.Kubeadm = found.Unit, found.Shape, found.RancherConfig, found.Kubeadm
	if k.Shape == "" {
		k.Shape = ShapeKubelet
	}
	if found.HasResolvConf && k.Err == nil {
		if err := found.trusted(r, found.ResolvConf); err != nil {
			k.Err = fmt.Errorf("%s: %w", found.ResolvConfHow, err)
		} else {
			k.ResolvConf, k.ResolvConfSet, k.ResolvConfFrom = found.ResolvConf, true, found.ResolvConfHow
			k.ResolvOrigin = found.ResolvOrigin
		}
	}
	k.PID = found.PID
	return k
}

// trusted: a path a running process named is read only when it is root's (nodefs.CheckTrusted);
// the paths of the node's files (unit files, environment files, the known places) are root's choice
// already.
func (f Found) trusted(r nodefs.Reader, p string) error {
	if f.PID == 0 {
		return nil
	}
	return nodefs.CheckTrusted(r, p)
}

func load(r nodefs.Reader, found Found) Config {
	k := Config{Path: found.Path, ResolvConf: DefaultResolvConf, How: found.How, ConfigDir: found.ConfigDir}
	if found.Path != "" {
		if err := found.trusted(r, found.Path); err != nil {
			k.Exists, k.Err = true, err
			return k
		}
		data, err := r.ReadFile(found.Path, nodefs.Config)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			k.Exists, k.Err = true, err
			return k
		default:
			parsed, err := Parse(data, found.Path)
			parsed.How, parsed.ConfigDir = found.How, found.ConfigDir
			k = parsed
			if err != nil {
				k.Err = err
				return k
			}
		}
	}
	if found.ConfigDir == "" {
		return k
	}
	if err := found.trusted(r, found.ConfigDir); err != nil {
		k.Err = err
		return k
	}
	// kubelet 1.28+ merges every *.conf under --config-dir over the config (kubelet's
	// mergeKubeletConfigurations): each can set resolvConf, clusterDNS, clusterDomain.
	names, subdirs, err := dropIns(r, found.ConfigDir)
	k.ConfigSubdirs = subdirs
	if errors.Is(err, fs.ErrNotExist) {
		return k
	}
	if err != nil {
		k.Err = err
		return k
	}
	for _, p := range names {
		if err := found.trusted(r, p); err != nil {
			k.Err = err
			return k
		}
		data, err := r.ReadFile(p, nodefs.Config)
		if err != nil {
			k.Err = err
			return k
		}
		f, err := parseFile(data, p)
		if err != nil {
			k.Err = err
			return k
		}
		f.apply(&k, p)
	}
	return k
}

// dropIns lists the *.conf files under dir in the order kubelet merges them: it walks the
// directory with filepath.WalkDir, which goes depth first in lexical order (a subdirectory's files
// come where its name sorts, before the names that sort after it).
func dropIns(r nodefs.Reader, dir string) (files, subdirs []string, err error) {
	var out []string
	var walk func(d string, depth int) error
	walk = func(d string, depth int) error {
		if depth > 32 {
			return fmt.Errorf("%s: directories nested too deep", d)
		}
		es, err := r.ReadDir(d)
		if err != nil {
			return err
		}
		names := make([]string, 0, len(es))
		dirs := map[string]bool{}
		for _, e := range es {
			names = append(names, e.Name())
			dirs[e.Name()] = e.IsDir()
		}
		slices.Sort(names)
		for _, n := range names {
			p := path.Join(d, n)
			switch {
			case dirs[n]:
				subdirs = append(subdirs, p)
				if err := walk(p, depth+1); err != nil {
					return err
				}
			case path.Ext(n) == ".conf":
				out = append(out, p)
			}
		}
		return nil
	}
	err = walk(dir, 0)
	return out, subdirs, err
}
