package node

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/testutil/fixture"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/kubelet"
	"github.com/nodedns/nodedns/internal/nodefs"
)

// writeTree writes a node tree under a fresh root (fixture.Tree).
var writeTree = fixture.Tree

const kubeletYAML = "kind: KubeletConfiguration\nclusterDNS: [169.254.25.10]\nresolvConf: /run/systemd/resolve/resolv.conf\n"

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
			kubelet.KubesprayConfig:                       kubeletYAML,
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
		{"malformed", "kind: KubeletConfiguration\nclusterDNS:\n- 169.254.99.99\n  resolvConf: /etc/resolv.conf\n", 0o644, kubelet.KubesprayConfig, 4, "YAML: mapping values are not allowed"},
		{"not an address", "kind: KubeletConfiguration\nclusterDNS:\n- 169.254.99.99\n- coredns\n", 0o644, kubelet.KubesprayConfig, 4, `clusterDNS[1]: "coredns" is not an IP address`},
		{"unreadable", kubeletYAML, 0, kubelet.KubesprayConfig, 0, "read /etc/kubernetes/kubelet-config.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := writeTree(t, with(map[string]string{kubelet.KubesprayConfig: tc.data}))
			if tc.mode == 0 {
				// A directory where the file should be: unreadable for root too.
				p := filepath.Join(root, kubelet.KubesprayConfig)
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
		kubelet.KubesprayConfig:            "kind: [",
		"/srv/kubelet.yaml":                "kind: KubeletConfiguration\nresolvConf: /run/systemd/resolve/resolv.conf\nclusterDNS: [169.254.20.10]\n",
		"/run/systemd/resolve/resolv.conf": "nameserver 169.254.20.10\n",
	})
	r := nodefs.NewReader(root)
	s := Observe(r, config.Default(), time.Now())
	if s.Kubelet.Err == nil || len(s.ProblemsFrom(SourceKubelet)) != 1 {
		t.Fatalf("the broken kubespray file was not reported: %+v", s.Kubelet)
	}
	s.UseKubeletConfig(r, kubelet.Found{Path: "/srv/kubelet.yaml", How: "--config of the running kubelet (pid 42)"})
	if s.Kubelet.Err != nil || len(s.ProblemsFrom(SourceKubelet)) != 0 || s.Kubelet.How != "--config of the running kubelet (pid 42)" {
		t.Errorf("kubelet = %+v, problems %v", s.Kubelet, s.ProblemsFrom(SourceKubelet))
	}
	if s.KubeletResolv.File == nil || s.KubeletResolv.Path != "/run/systemd/resolve/resolv.conf" || s.KubeletResolv.File.Nameservers()[0] != netip.MustParseAddr("169.254.20.10") {
		t.Errorf("kubelet's resolv.conf = %+v", s.KubeletResolv)
	}
}
