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
	"strings"

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
	// ConfigDir is kubelet's --config-dir (drop-ins merged over Path), "" when none.
	ConfigDir string
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
	f.apply(&k)
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

func (f configFile) apply(k *Config) {
	if f.resolvConf != nil {
		k.ResolvConf, k.ResolvConfSet = *f.resolvConf, true
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

// Load reads the config found and its --config-dir drop-ins through r. A config that cannot be read
// or parsed leaves kubelet's defaults with Err set (an *Error when it has a file and line): the
// first such error stops the reading.
func Load(r nodefs.Reader, found Found) Config {
	k := Config{Path: found.Path, ResolvConf: DefaultResolvConf, How: found.How, ConfigDir: found.ConfigDir}
	if found.Path != "" {
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
	// kubelet 1.28+ merges every *.conf of --config-dir over the config, in file name order
	// (kubelet's mergeKubeletConfigurations): each can set resolvConf, clusterDNS, clusterDomain.
	es, err := r.ReadDir(found.ConfigDir)
	if errors.Is(err, fs.ErrNotExist) {
		return k
	}
	if err != nil {
		k.Err = err
		return k
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
			k.Err = err
			return k
		}
		f, err := parseFile(data, p)
		if err != nil {
			k.Err = err
			return k
		}
		f.apply(&k)
	}
	return k
}
