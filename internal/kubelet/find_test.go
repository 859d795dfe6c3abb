package kubelet

import (
	"strings"
	"testing"

	"github.com/nodedns/nodedns/internal/testutil/fixture"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/nodefs"
)

const (
	kubeadmDropIn = "[Service]\n" +
		"Environment=\"KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-conf --kubeconfig=/etc/kubernetes/conf\"\n" +
		"Environment=\"KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml\"\n" +
		"EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env\n" +
		"EnvironmentFile=-/etc/default/kubelet\n" +
		"ExecStart=\n" +
		"ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS\n"
	kubeletYAML = "kind: KubeletConfiguration\nclusterDNS: [169.254.25.10]\nresolvConf: /run/systemd/resolve/resolv.conf\n"
)

// TestFind: the file kubelet reads, found from the node's files the way kubelet is
// started there (docs/contract.md "Kubelet's config", steps 2 and 3).
func TestFind(t *testing.T) {
	tests := []struct {
		name    string
		root    string // a fixture tree, or
		tree    map[string]string
		config  string // kubelet.config; "" is auto
		want    string
		how     []string // substrings of How
		wantDir string
	}{
		{
			name: "kubespray: kubelet.service and kubelet.env",
			root: "../../cmd/nodedns/testdata/kubespray/dhclient",
			want: KubesprayConfig,
			how:  []string{"--config in $KUBELET_ARGS", "/etc/kubernetes/kubelet.env:6", "/etc/systemd/system/kubelet.service"},
		},
		{
			name: "kubeadm: 10-kubeadm.conf",
			tree: map[string]string{
				"/lib/systemd/system/kubelet.service":                   "[Service]\nExecStart=/usr/bin/kubelet\n",
				"/etc/systemd/system/kubelet.service.d/10-kubeadm.conf": kubeadmDropIn,
				"/var/lib/kubelet/config.yaml":                          kubeletYAML,
				// A kubespray leftover kubelet does not read.
				KubesprayConfig: kubeletYAML,
			},
			want: KubeadmConfig,
			how:  []string{"$KUBELET_CONFIG_ARGS", "10-kubeadm.conf:3"},
		},
		{
			name: "--config written in ExecStart, relative, with --config-dir",
			tree: map[string]string{
				"/etc/systemd/system/kubelet.service": "[Service]\nExecStart=/usr/bin/kubelet --config etc/k/config.yaml --config-dir=/etc/k/conf.d\n",
			},
			want:    "/etc/k/config.yaml",
			how:     []string{"ExecStart= (/etc/systemd/system/kubelet.service:2)"},
			wantDir: "/etc/k/conf.d",
		},
		{
			name: "a drop-in in /etc shadows the package's",
			tree: map[string]string{
				"/lib/systemd/system/kubelet.service":                   "[Service]\nExecStart=/usr/bin/kubelet\n",
				"/lib/systemd/system/kubelet.service.d/10-kubeadm.conf": kubeadmDropIn,
				"/etc/systemd/system/kubelet.service.d/10-kubeadm.conf": "[Service]\nExecStart=\nExecStart=/usr/bin/kubelet --config=/etc/mine.yaml\n",
			},
			want: "/etc/mine.yaml",
		},
		{
			name: "a unit systemd refuses: the known paths",
			tree: map[string]string{
				"/etc/systemd/system/kubelet.service": "[Service]\nExecStart=/usr/bin/kubelet --config=/x.yaml\nExecStart=/usr/bin/kubelet --config=/y.yaml\n",
				KubeadmConfig:                         kubeletYAML,
			},
			want: KubeadmConfig,
			how:  []string{"the first of /etc/kubernetes/kubelet-config.yaml, /var/lib/kubelet/config.yaml that exists"},
		},
		{
			name: "no unit: kubespray's path first",
			tree: map[string]string{KubesprayConfig: kubeletYAML, KubeadmConfig: kubeletYAML},
			want: KubesprayConfig,
			how:  []string{"no kubelet unit names --config"},
		},
		{
			name: "nothing at all",
			tree: map[string]string{"/etc/resolv.conf": "nameserver 10.0.0.2\n"},
			want: "",
			how:  []string{"kubelet's defaults"},
		},
		{
			name:   "a path in the config wins",
			root:   "../../cmd/nodedns/testdata/kubespray/dhclient",
			config: "/srv/kubelet.yaml",
			want:   "/srv/kubelet.yaml",
			how:    []string{"kubelet.config in nodedns's config"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := tc.root
			if root == "" {
				root = fixture.Tree(t, tc.tree)
			}
			cfg := config.Default()
			if tc.config != "" {
				cfg.Kubelet.Config = tc.config
			}
			got, _, ps := Find(nodefs.NewReader(root), cfg)
			if got.Path != tc.want || got.ConfigDir != tc.wantDir {
				t.Errorf("found %q (config-dir %q), want %q (%q); how: %s; problems %v", got.Path, got.ConfigDir, tc.want, tc.wantDir, got.How, ps)
			}
			for _, h := range tc.how {
				if !strings.Contains(got.How, h) {
					t.Errorf("how = %q, want it to say %q", got.How, h)
				}
			}
		})
	}
}
