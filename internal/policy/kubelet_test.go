package policy

import (
	"slices"
	"strings"
	"testing"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/kubelet"
	"github.com/nodedns/nodedns/internal/node"
)

// TestBrokenKubeletConfigBlocksEverything: with kubelet's config unreadable the cache address it
// lists is unknown, so no file that filters loop addresses is written from a guess (docs/contract.md
// "Kubelet's config", invariant 5): every target is blocked with the file's own error.
func TestBrokenKubeletConfigBlocksEverything(t *testing.T) {
	s := &node.Snapshot{
		Now:          now,
		ResolvConf:   resolvFile(t, node.EtcResolvConf, "nameserver 169.254.99.99\nnameserver 10.0.0.2\n"),
		DhclientConf: true,
		Kubelet: kubelet.Config{Path: kubelet.KubesprayConfig, Exists: true, ResolvConf: "/etc/resolv.conf",
			Err: &kubelet.Error{Path: kubelet.KubesprayConfig, Line: 4, Msg: "YAML: mapping values are not allowed in this context"}},
	}
	cfg := config.Default()
	p := Compute(s, cfg)
	if len(p.Changes) != 0 || len(p.Actions) != 0 {
		t.Errorf("changes %v, actions %v: want none while kubelet's config is unreadable", p.Changes, p.Actions)
	}
	var targets []string
	for _, b := range p.Blocked {
		targets = append(targets, b.Target)
		if !strings.Contains(b.Reason, "/etc/kubernetes/kubelet-config.yaml:4: YAML: mapping values") {
			t.Errorf("blocked %s: reason %q does not name the file, line and reason", b.Target, b.Reason)
		}
	}
	for _, want := range []string{cfg.Kubelet.ResolvConf, node.EtcResolvConf, node.DhclientHook} {
		if !slices.Contains(targets, want) {
			t.Errorf("%s not blocked (blocked: %v)", want, targets)
		}
	}
	// The same node with a readable config is fixed: the block is the kubelet file's doing.
	s.Kubelet.Err = nil
	if p := Compute(s, cfg); len(p.Changes) == 0 || len(p.Blocked) != 0 {
		t.Errorf("with a readable config: %d changes, blocked %v", len(p.Changes), p.Blocked)
	}
}
