package node

import (
	"fmt"
	"net/netip"

	"go.yaml.in/yaml/v3"
)

// KubeletDefaultResolvConf is kubelet's own default for resolvConf (KubeletConfiguration v1beta1).
const KubeletDefaultResolvConf = "/etc/resolv.conf"

// Kubelet is what nodedns needs from the kubelet config file.
type Kubelet struct {
	Path   string // node path of the config file
	Exists bool
	// ResolvConf is the file kubelet hands to pods with dnsPolicy Default and uses as the base of
	// ClusterFirst pods' search list. kubelet's default is /etc/resolv.conf; "" in the file disables it.
	ResolvConf    string
	ResolvConfSet bool
	ClusterDNS    []netip.Addr
	ClusterDomain string
}

// kubeletFile is the subset of KubeletConfiguration we read. Unknown fields are fine: the kubelet
// config has dozens of fields we do not care about.
type kubeletFile struct {
	Kind          string   `yaml:"kind"`
	ResolvConf    *string  `yaml:"resolvConf"`
	ClusterDNS    []string `yaml:"clusterDNS"`
	ClusterDomain string   `yaml:"clusterDomain"`
}

// ParseKubelet parses a KubeletConfiguration YAML document.
func ParseKubelet(data []byte, path string) (Kubelet, error) {
	k := Kubelet{Path: path, Exists: true, ResolvConf: KubeletDefaultResolvConf}
	var f kubeletFile
	if err := yaml.Unmarshal(data, &f); err != nil {
		return k, fmt.Errorf("%s: %w", path, err)
	}
	if f.Kind != "" && f.Kind != "KubeletConfiguration" {
		return k, fmt.Errorf("%s: kind is %q, not KubeletConfiguration", path, f.Kind)
	}
	if f.ResolvConf != nil {
		k.ResolvConf = *f.ResolvConf
		k.ResolvConfSet = true
	}
	for i, s := range f.ClusterDNS {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return k, fmt.Errorf("%s: clusterDNS[%d]: %q is not an IP address", path, i, s)
		}
		k.ClusterDNS = append(k.ClusterDNS, a.Unmap())
	}
	k.ClusterDomain = f.ClusterDomain
	return k, nil
}
