package node

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/nodefs"
)

// writeTree writes files (node path: content) under a fresh root.
func writeTree(t *testing.T, tree map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, data := range tree {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const (
	kubeadmDropIn = "[Service]\n" +
		"Environment=\"KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf\"\n" +
		"Environment=\"KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml\"\n" +
		"EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env\n" +
		"EnvironmentFile=-/etc/default/kubelet\n" +
		"ExecStart=\n" +
		"ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS\n"
	kubeletYAML = "kind: KubeletConfiguration\nclusterDNS: [169.254.25.10]\nresolvConf: /run/systemd/resolve/resolv.conf\n"
)

// TestFindKubeletConfig: the file kubelet reads, found from the node's files the way kubelet is
// started there (docs/contract.md "Kubelet's config", steps 2 and 3).
func TestFindKubeletConfig(t *testing.T) {
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
			want: KubesprayKubeletConfig,
			how:  []string{"--config in $KUBELET_ARGS", "/etc/kubernetes/kubelet.env:6", "/etc/systemd/system/kubelet.service"},
		},
		{
			name: "kubeadm: 10-kubeadm.conf",
			tree: map[string]string{
				"/lib/systemd/system/kubelet.service":                   "[Service]\nExecStart=/usr/bin/kubelet\n",
				"/etc/systemd/system/kubelet.service.d/10-kubeadm.conf": kubeadmDropIn,
				"/var/lib/kubelet/config.yaml":                          kubeletYAML,
				// A kubespray leftover kubelet does not read.
				KubesprayKubeletConfig: kubeletYAML,
			},
			want: KubeadmKubeletConfig,
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
				KubeadmKubeletConfig:                  kubeletYAML,
			},
			want: KubeadmKubeletConfig,
			how:  []string{"the first of /etc/kubernetes/kubelet-config.yaml, /var/lib/kubelet/config.yaml that exists"},
		},
		{
			name: "no unit: kubespray's path first",
			tree: map[string]string{KubesprayKubeletConfig: kubeletYAML, KubeadmKubeletConfig: kubeletYAML},
			want: KubesprayKubeletConfig,
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
				root = writeTree(t, tc.tree)
			}
			cfg := config.Default()
			if tc.config != "" {
				cfg.Kubelet.Config = tc.config
			}
			got, ps := FindKubeletConfig(nodefs.NewReader(root), cfg)
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

// TestObserveKubelet: what Observe reads from the config found, a --config-dir merged over it, and
// a config that cannot be read or parsed (an error with file and line, docs/contract.md invariant 5).
func TestObserveKubelet(t *testing.T) {
	unit := map[string]string{
		"/etc/systemd/system/kubelet.service": "[Service]\nEnvironmentFile=-/etc/kubernetes/kubelet.env\nExecStart=/usr/local/bin/kubelet $KUBELET_ARGS\n",
		"/etc/kubernetes/kubelet.env":         "KUBELET_ARGS=\"--config=/etc/kubernetes/kubelet-config.yaml --config-dir=/etc/kubernetes/kubelet.conf.d\"\n",
		"/run/systemd/resolve/resolv.conf":    "nameserver 169.254.25.10\n",
	}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range unit {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	t.Run("drop-ins merged in name order", func(t *testing.T) {
		root := writeTree(t, with(map[string]string{
			KubesprayKubeletConfig:                        kubeletYAML,
			"/etc/kubernetes/kubelet.conf.d/20-dns.conf":  "kind: KubeletConfiguration\nresolvConf: /var/lib/nodedns/resolv.conf\n",
			"/etc/kubernetes/kubelet.conf.d/10-dns.conf":  "kind: KubeletConfiguration\nresolvConf: /etc/resolv.conf\nclusterDNS: [169.254.20.10]\n",
			"/etc/kubernetes/kubelet.conf.d/30-other.txt": "not read",
		}))
		s := Observe(nodefs.NewReader(root), config.Default(), time.Now())
		if s.Kubelet.Err != nil || s.Kubelet.ResolvConf != "/var/lib/nodedns/resolv.conf" || len(s.Kubelet.ClusterDNS) != 1 || s.Kubelet.ClusterDNS[0] != netip.MustParseAddr("169.254.20.10") {
			t.Errorf("kubelet = %+v, want resolvConf from 20-dns.conf and clusterDNS from 10-dns.conf", s.Kubelet)
		}
		if s.KubeletResolv.Path != "/var/lib/nodedns/resolv.conf" {
			t.Errorf("kubelet's resolv.conf read from %q", s.KubeletResolv.Path)
		}
	})
	for _, tc := range []struct {
		name, data string
		mode       os.FileMode
		wantPath   string
		wantLine   int
		wantMsg    string
	}{
		{"malformed", "kind: KubeletConfiguration\nclusterDNS:\n- 169.254.99.99\n  resolvConf: /etc/resolv.conf\n", 0o644, KubesprayKubeletConfig, 4, "YAML: mapping values are not allowed"},
		{"not an address", "kind: KubeletConfiguration\nclusterDNS:\n- 169.254.99.99\n- coredns\n", 0o644, KubesprayKubeletConfig, 4, `clusterDNS[1]: "coredns" is not an IP address`},
		{"unreadable", kubeletYAML, 0, KubesprayKubeletConfig, 0, "read /etc/kubernetes/kubelet-config.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := writeTree(t, with(map[string]string{KubesprayKubeletConfig: tc.data}))
			if tc.mode == 0 {
				// A directory where the file should be: unreadable for root too.
				p := filepath.Join(root, KubesprayKubeletConfig)
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
				if err := os.Mkdir(p, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			s := Observe(nodefs.NewReader(root), config.Default(), time.Now())
			if s.Kubelet.Err == nil {
				t.Fatalf("no error for a %s kubelet config: %+v", tc.name, s.Kubelet)
			}
			ps := s.ProblemsFrom(SourceKubelet)
			if len(ps) != 1 || ps[0].Path != tc.wantPath || ps[0].Line != tc.wantLine || !strings.Contains(ps[0].Msg, tc.wantMsg) {
				t.Errorf("problems = %+v, want one at %s:%d saying %q", ps, tc.wantPath, tc.wantLine, tc.wantMsg)
			}
			if !strings.Contains(s.Kubelet.Err.Error(), tc.wantPath) {
				t.Errorf("error %q does not name the file", s.Kubelet.Err)
			}
		})
	}
}

// TestUseKubeletConfig: the running kubelet's --config replaces what the files said, with the
// resolv.conf it names, and the old file's problems go with it.
func TestUseKubeletConfig(t *testing.T) {
	root := writeTree(t, map[string]string{
		KubesprayKubeletConfig:             "kind: [",
		"/srv/kubelet.yaml":                "kind: KubeletConfiguration\nresolvConf: /run/systemd/resolve/resolv.conf\nclusterDNS: [169.254.20.10]\n",
		"/run/systemd/resolve/resolv.conf": "nameserver 169.254.20.10\n",
	})
	s := Observe(nodefs.NewReader(root), config.Default(), time.Now())
	if s.Kubelet.Err == nil || len(s.ProblemsFrom(SourceKubelet)) != 1 {
		t.Fatalf("the broken kubespray file was not reported: %+v", s.Kubelet)
	}
	s.UseKubeletConfig(KubeletFound{Path: "/srv/kubelet.yaml", How: "--config of the running kubelet (pid 42)"})
	if s.Kubelet.Err != nil || len(s.ProblemsFrom(SourceKubelet)) != 0 || s.Kubelet.How != "--config of the running kubelet (pid 42)" {
		t.Errorf("kubelet = %+v, problems %v", s.Kubelet, s.ProblemsFrom(SourceKubelet))
	}
	if s.KubeletResolv.File == nil || s.KubeletResolv.Path != "/run/systemd/resolve/resolv.conf" || s.KubeletResolv.File.Nameservers()[0] != netip.MustParseAddr("169.254.20.10") {
		t.Errorf("kubelet's resolv.conf = %+v", s.KubeletResolv)
	}
}
