package probes

import (
	"context"
	"strings"
	"testing"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/kubelet"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/policy"
	"github.com/nodedns/nodedns/resolvconf"
)

// TestKubeletResolvConfNamesTheConfig: the check says which kubelet config it read and why, and a
// config it cannot use makes it unknown (never ok) with the file, line and reason.
func TestKubeletResolvConfNamesTheConfig(t *testing.T) {
	rf, err := resolvconf.Parse([]byte("nameserver 10.66.0.53\n"))
	if err != nil {
		t.Fatal(err)
	}
	file := node.ResolvFile{Path: "/var/lib/nodedns/resolv.conf", Target: "/var/lib/nodedns/resolv.conf", Exists: true, File: rf, Data: []byte("nameserver 10.66.0.53\n")}
	how := "--config in $KUBELET_ARGS (/etc/kubernetes/kubelet.env:6) of /etc/systemd/system/kubelet.service"
	tests := []struct {
		name    string
		k       kubelet.Config
		want    Status
		message []string
	}{
		{"found through kubelet.env", kubelet.Config{Path: kubelet.KubesprayConfig, Exists: true, ResolvConf: "/var/lib/nodedns/resolv.conf", How: how},
			OK, []string{"kubelet's config /etc/kubernetes/kubelet-config.yaml (" + how + ")"}},
		{"malformed", kubelet.Config{Path: kubelet.KubesprayConfig, Exists: true, ResolvConf: "/etc/resolv.conf", How: how,
			Err: &kubelet.Error{Path: kubelet.KubesprayConfig, Line: 4, Msg: "YAML: mapping values are not allowed in this context"}},
			Unknown, []string{"/etc/kubernetes/kubelet-config.yaml:4: YAML: mapping values", "cannot be used"}},
		{"none", kubelet.Config{ResolvConf: "/var/lib/nodedns/resolv.conf", How: "kubelet's defaults"}, OK, []string{"no kubelet config (kubelet's defaults)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &node.Snapshot{Kubelet: tc.k, KubeletResolv: file, NodednsResolv: file}
			env := &Env{Snapshot: s, Config: config.Default(), Plan: policy.Compute(s, config.Default())}
			r := kubeletResolvConf{}.Run(context.Background(), env)
			if r.Status != tc.want {
				t.Errorf("status %s, want %s: %s", r.Status, tc.want, r.Message)
			}
			for _, m := range tc.message {
				if !strings.Contains(r.Message, m) {
					t.Errorf("message %q lacks %q", r.Message, m)
				}
			}
		})
	}
}
