package probes

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/internal/policy"
)

// TestCheckShowsTheDaemonsBackoff reads a writers state as `nodedns run` leaves it and expects the
// check of the target to report the backoff; a state whose daemon is gone is ignored.
func TestCheckShowsTheDaemonsBackoff(t *testing.T) {
	tests := []struct {
		name       string
		pid        int
		target     string
		wantID     string
		wantStatus Status
	}{
		{"running daemon, resolv.conf", os.Getpid(), "/etc/resolv.conf", "resolvconf.loop", Problem},
		{"running daemon, kubelet file", os.Getpid(), config.DefaultKubeletResolvConf, "kubelet.resolvconf", Problem},
		{"stale state (daemon gone)", 0x7ffffff0, "/etc/resolv.conf", "resolvconf.loop", OK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			writeUnder(t, root, "/etc/resolv.conf", "nameserver 10.0.0.2\n")
			writeUnder(t, root, config.DefaultKubeletResolvConf, string(policy.KubeletResolvConf(policy.Facts{}, nil, nil)))
			data, err := node.MarshalWritersState(node.WritersState{PID: tc.pid, Backoffs: []node.Backoff{{
				Path: tc.target, Since: time.Now(), Rewrites: 11, Window: node.Duration(time.Minute), LastForeign: time.Now(),
			}}})
			if err != nil {
				t.Fatal(err)
			}
			writeUnder(t, root, node.WritersStatePath, string(data))
			cfg := config.Default()
			r := nodefs.NewReader(root)
			s := node.Observe(r, cfg, time.Now())
			env := &Env{Snapshot: s, Config: cfg, Plan: policy.Compute(s, cfg), Files: r}
			rep := Run(context.Background(), env, []Check{resolvConfLoop{}, kubeletResolvConf{}})
			for _, c := range rep.Checks {
				if c.ID != tc.wantID {
					continue
				}
				if c.Status != tc.wantStatus {
					t.Errorf("%s: status %s, want %s (%s)", c.ID, c.Status, tc.wantStatus, c.Message)
				}
				has := strings.Contains(c.Message, "another writer rewrote "+tc.target+" 11 times within 1m0s")
				if has != (tc.wantStatus == Problem) {
					t.Errorf("%s: message %q", c.ID, c.Message)
				}
			}
		})
	}
}

func writeUnder(t *testing.T, root, p, data string) {
	t.Helper()
	full := filepath.Join(root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
