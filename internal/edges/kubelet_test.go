package edges

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/nodefs"
)

// TestKubeletProcessSource: the running kubelet's --config (a /proc-shaped tree here; the real /proc
// is internal/kubelet's TestProcessLive) replaces what the node's files name, unless nodedns's
// config names the file itself.
func TestKubeletProcessSource(t *testing.T) {
	proc := t.TempDir()
	d := filepath.Join(proc, "812")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"comm": "kubelet\n", "cmdline": "kubelet\x00--config=/srv/kubelet.yaml\x00"} {
		if err := os.WriteFile(filepath.Join(d, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, config, want string
	}{
		{"the running kubelet wins over the files", "", "/srv/kubelet.yaml"},
		{"a path in the config wins", "/etc/kubelet/explicit.yaml", "/etc/kubelet/explicit.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			if tc.config != "" {
				cfg.Kubelet.Config = tc.config
			}
			r := nodefs.NewReader(t.TempDir())
			s := node.Observe(r, cfg, time.Now())
			if err := (kubeletProcess{cfg: cfg, proc: proc, files: r}).Observe(context.Background(), s); err != nil {
				t.Fatal(err)
			}
			if s.Kubelet.Path != tc.want {
				t.Errorf("kubelet config %q (%s), want %q", s.Kubelet.Path, s.Kubelet.How, tc.want)
			}
		})
	}
}

// TestKubeletProcessStarted: with kubelet.manage the live source reads when the running kubelet
// started (docs/contract.md "kubelet.manage"), which the plan compares with nodedns's record.
func TestKubeletProcessStarted(t *testing.T) {
	proc := t.TempDir()
	d := filepath.Join(proc, "812")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	for p, data := range map[string]string{
		"812/comm":    "kubelet\n",
		"812/cmdline": "kubelet\x00--config=/srv/kubelet.yaml\x00",
		"812/stat":    "812 (kubelet) S 1 812 812 0 -1 0 0 0 0 0 0 0 0 0 20 0 12 0 500 0 0\n",
		"stat":        "btime 1700000000\n",
	} {
		if err := os.WriteFile(filepath.Join(proc, p), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, manage := range []bool{false, true} {
		cfg := config.Default()
		cfg.Kubelet.Manage = manage
		r := nodefs.NewReader(t.TempDir())
		s := node.Observe(r, cfg, time.Now())
		if err := (kubeletProcess{cfg: cfg, proc: proc, files: r}).Observe(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		want := time.Time{}
		if manage {
			want = time.Unix(1700000005, 0)
		}
		if !s.KubeletStarted.Equal(want) || s.Kubelet.PID != 812 {
			t.Errorf("kubelet.manage %v: started %v, pid %d; want %v, 812", manage, s.KubeletStarted, s.Kubelet.PID, want)
		}
	}
}
