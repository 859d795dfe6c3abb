package probes

import (
	"context"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/kubelet"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/nodefs"
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
	ignored := []string{"pid 47 (uid 65534) calls itself kubelet: ignored (not root's)"}
	tests := []struct {
		name    string
		k       kubelet.Config
		ignored []string
		want    Status
		message []string
	}{
		{"found through kubelet.env", kubelet.Config{Path: kubelet.KubesprayConfig, Exists: true, ResolvConf: "/var/lib/nodedns/resolv.conf", How: how}, nil,
			OK, []string{"kubelet's config /etc/kubernetes/kubelet-config.yaml (" + how + ")"}},
		// docs/contract.md "Kubelet's config": a process that only calls itself kubelet is named.
		{"beside nobody's process named kubelet", kubelet.Config{Path: kubelet.KubesprayConfig, Exists: true, ResolvConf: "/var/lib/nodedns/resolv.conf", How: "--config of the running kubelet, pid 49"}, ignored,
			OK, []string{"(--config of the running kubelet, pid 49); " + ignored[0]}},
		{"an untrusted --config", kubelet.Config{Path: "/var/tmp/x/config.yaml", Exists: true, ResolvConf: "/etc/resolv.conf", How: "--config of the running kubelet, pid 49",
			Err: &nodefs.UntrustedReadError{Path: "/var/tmp/x/config.yaml", At: "/var/tmp", Dir: true, Mode: fs.ModeDir | fs.ModeSticky | 0o777}}, nil,
			Unknown, []string{"kubelet's config /var/tmp/x/config.yaml (--config of the running kubelet, pid 49) cannot be used: refusing to read /var/tmp/x/config.yaml: the directory /var/tmp on the way to it is writable by others"}},
		{"malformed", kubelet.Config{Path: kubelet.KubesprayConfig, Exists: true, ResolvConf: "/etc/resolv.conf", How: how,
			Err: &kubelet.Error{Path: kubelet.KubesprayConfig, Line: 4, Msg: "YAML: mapping values are not allowed in this context"}}, nil,
			Unknown, []string{"/etc/kubernetes/kubelet-config.yaml:4: YAML: mapping values", "cannot be used"}},
		{"none", kubelet.Config{ResolvConf: "/var/lib/nodedns/resolv.conf", How: "kubelet's defaults"}, nil, OK, []string{"no kubelet config (kubelet's defaults)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &node.Snapshot{Kubelet: tc.k, KubeletResolv: file, NodednsResolv: file, KubeletIgnored: tc.ignored}
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

// TestKubeletResolvConfRestartOwed (docs/contract.md "kubelet.manage"): once nodedns pointed
// kubelet's files at its file, the check judges that file (what kubelet reads after its restart)
// but is a problem while the running kubelet, started before the change, still reads its old one;
// once a kubelet started after the change runs, the check judges what it runs with (here a stub,
// as a kubelet started by hand with another flag would).
func TestKubeletResolvConfRestartOwed(t *testing.T) {
	good, err := resolvconf.Parse([]byte("nameserver 10.66.0.53\n"))
	if err != nil {
		t.Fatal(err)
	}
	stub, err := resolvconf.Parse([]byte("nameserver 127.0.0.53\n"))
	if err != nil {
		t.Fatal(err)
	}
	ours := node.ResolvFile{Path: "/var/lib/nodedns/resolv.conf", Target: "/var/lib/nodedns/resolv.conf", Exists: true, File: good, Data: []byte("nameserver 10.66.0.53\n")}
	old := node.ResolvFile{Path: "/etc/resolv.conf", Target: "/etc/resolv.conf", Exists: true, File: stub, Data: []byte("nameserver 127.0.0.53\n")}
	changed := time.Date(2026, 11, 27, 4, 0, 0, 0, time.UTC)
	cfg := config.Default()
	cfg.Kubelet.Manage = true
	for _, tc := range []struct {
		name    string
		started time.Time
		want    Status
		message string
	}{
		{"kubelet started before the change", changed.Add(-time.Hour), Problem, "kubelet's resolvConf /var/lib/nodedns/resolv.conf (/etc/default/kubelet) is loop-free (nameservers: 10.66.0.53); but the running kubelet still reads /etc/resolv.conf until it restarts"},
		{"kubelet started after the change: judged as it runs", changed.Add(time.Minute), Problem, "kubelet's resolvConf /etc/resolv.conf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := kubelet.Config{Path: kubelet.KubeadmConfig, Exists: true, ResolvConf: "/var/lib/nodedns/resolv.conf", ResolvConfFrom: "/etc/default/kubelet", Unit: kubelet.Unit, Shape: kubelet.ShapeKubelet,
				ResolvOrigin: kubelet.Origin{Kind: kubelet.OriginEnvFile, Path: "/etc/default/kubelet", Line: 1, Var: "KUBELET_EXTRA_ARGS"}}
			running := files
			running.ResolvConf, running.ResolvConfFrom, running.ResolvOrigin, running.PID = "/etc/resolv.conf", "--resolv-conf of the running kubelet, pid 812", kubelet.Origin{Kind: kubelet.OriginProcess}, 812
			s := &node.Snapshot{Now: changed.Add(2 * time.Hour), Kubelet: running, KubeletFiles: files, KubeletResolv: old, NodednsResolv: ours, ResolvConf: old,
				KubeletRestart: &node.KubeletRestart{Unit: kubelet.Unit, File: "/etc/default/kubelet", Changed: changed}, KubeletStarted: tc.started}
			env := &Env{Snapshot: s, Config: cfg, Plan: policy.Compute(s, cfg)}
			r := kubeletResolvConf{}.Run(context.Background(), env)
			if r.Status != tc.want || !strings.HasPrefix(r.Message, tc.message) {
				t.Errorf("%s %q; want %s %q", r.Status, r.Message, tc.want, tc.message)
			}
			if tc.started.Before(changed) && !strings.Contains(r.Hint, "`systemctl restart kubelet.service`") {
				t.Errorf("hint %q does not name the restart", r.Hint)
			}
		})
	}
}
