package edges

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/internal/testutil/fakeproc"
)

// TestKubeletProcessSource: the running kubelet's --config (a /proc-shaped tree here; the real /proc
// is internal/kubelet's TestProcessLive) replaces what the node's files name, unless nodedns's
// config names the file itself.
func TestKubeletProcessSource(t *testing.T) {
	proc := fakeproc.Write(t, map[int]fakeproc.Proc{
		812: {Comm: "kubelet", Argv: []string{"kubelet", "--config=/srv/kubelet.yaml"}},
		// nobody's process named kubelet, with a lower PID: not root's, so it decides nothing.
		700: {Comm: "kubelet", Argv: []string{"/bin/sh", "/var/tmp/x/kubelet", "--config=/var/tmp/x/config.yaml"}, UID: 65534},
	})
	for _, tc := range []struct {
		name, config, want string
		ignored            []string
	}{
		{"the running kubelet wins over the files", "", "/srv/kubelet.yaml", []string{"pid 700 (uid 65534) calls itself kubelet: ignored (not root's)"}},
		{"a path in the config wins", "/etc/kubelet/explicit.yaml", "/etc/kubelet/explicit.yaml", nil},
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
			if s.Kubelet.Path != tc.want || !slices.Equal(s.KubeletIgnored, tc.ignored) {
				t.Errorf("kubelet config %q (%s), ignored %q; want %q, %q", s.Kubelet.Path, s.Kubelet.How, s.KubeletIgnored, tc.want, tc.ignored)
			}
		})
	}
}

// TestKubeletProcessStarted: with kubelet.manage the live source reads when the running kubelet
// started (docs/contract.md "kubelet.manage"), which the plan compares with nodedns's record; only
// root's kubelet's start counts, not that of a process of nobody's named kubelet that started later.
func TestKubeletProcessStarted(t *testing.T) {
	proc := fakeproc.Write(t, map[int]fakeproc.Proc{
		812: {Comm: "kubelet", Argv: []string{"kubelet", "--config=/srv/kubelet.yaml"}, Start: 500},
		90:  {Comm: "kubelet", Argv: []string{"/bin/sh", "/var/tmp/x/kubelet"}, UID: 65534, Start: 90000},
	})
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
			want = time.Unix(fakeproc.Btime+5, 0)
		}
		if !s.KubeletStarted.Equal(want) || s.Kubelet.PID != 812 || s.KubeletScanned != manage {
			t.Errorf("kubelet.manage %v: started %v, pid %d, scanned %v; want %v, 812, %v", manage, s.KubeletStarted, s.Kubelet.PID, s.KubeletScanned, want, manage)
		}
	}
	// A path in the config names kubelet's file, but kubelet.manage's restart is still settled by
	// the running kubelet's start. Before, the process was not read at all then: the record of an
	// owed restart was never removed, and with kubelet.restart every pass restarted kubelet.
	cfg := config.Default()
	cfg.Kubelet.Manage, cfg.Kubelet.Config = true, "/etc/kubelet/explicit.yaml"
	r := nodefs.NewReader(t.TempDir())
	s := node.Observe(r, cfg, time.Now())
	if err := (kubeletProcess{cfg: cfg, proc: proc, files: r}).Observe(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if !s.KubeletStarted.Equal(time.Unix(fakeproc.Btime+5, 0)) || !s.KubeletScanned || s.Kubelet.Path != "/etc/kubelet/explicit.yaml" {
		t.Errorf("kubelet.config named: started %v, scanned %v, config %q; want root's kubelet's start and the named file", s.KubeletStarted, s.KubeletScanned, s.Kubelet.Path)
	}
}

// TestKubeletProcessUntrustedPaths (docs/contract.md "Kubelet's config"): root's kubelet's
// --config, --config-dir (and its drop-ins) and --resolv-conf are read only when they, and every
// directory on the way, are root's (or the running user's) and writable by nobody else; else the
// config cannot be used, the error names the path, and what it says is not used.
func TestKubeletProcessUntrustedPaths(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
		open  string // the path made writable by others
		want  string
	}{
		{"--config", []string{"--config=/srv/k/config.yaml"}, "/srv/k/config.yaml", "refusing to read /srv/k/config.yaml: it is writable by others"},
		{"the directory of --config", []string{"--config=/srv/k/config.yaml"}, "/srv/k", "refusing to read /srv/k/config.yaml: the directory /srv/k on the way to it is writable by others"},
		{"--config-dir", []string{"--config-dir=/srv/k/conf.d"}, "/srv/k/conf.d", "refusing to read /srv/k/conf.d: it is writable by others"},
		{"a drop-in of --config-dir", []string{"--config-dir=/srv/k/conf.d"}, "/srv/k/conf.d/sub/10-dns.conf", "refusing to read /srv/k/conf.d/sub/10-dns.conf: it is writable by others"},
		{"--resolv-conf", []string{"--config=/srv/k/config.yaml", "--resolv-conf=/srv/k/resolv.conf"}, "/srv/k/resolv.conf", "--resolv-conf of the running kubelet, pid 812: refusing to read /srv/k/resolv.conf: it is writable by others"},
		{"all root's", []string{"--config=/srv/k/config.yaml", "--config-dir=/srv/k/conf.d", "--resolv-conf=/srv/k/resolv.conf"}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for p, data := range map[string]string{
				"srv/k/config.yaml":            "kind: KubeletConfiguration\nresolvConf: /etc/resolv.conf\n",
				"srv/k/conf.d/sub/10-dns.conf": "kind: KubeletConfiguration\nclusterDNS: [10.43.0.10]\n",
				"srv/k/resolv.conf":            "nameserver 10.0.0.2\n",
			} {
				if err := os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(root, p), []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if tc.open != "" {
				fi, err := os.Stat(filepath.Join(root, tc.open))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(filepath.Join(root, tc.open), fi.Mode().Perm()|0o002); err != nil {
					t.Fatal(err)
				}
			}
			proc := fakeproc.Write(t, map[int]fakeproc.Proc{812: {Comm: "kubelet", Argv: append([]string{"kubelet"}, tc.flags...)}})
			cfg := config.Default()
			r := nodefs.NewReader(root)
			s := node.Observe(r, cfg, time.Now())
			if err := (kubeletProcess{cfg: cfg, proc: proc, files: r}).Observe(context.Background(), s); err != nil {
				t.Fatal(err)
			}
			k := s.Kubelet
			if tc.want == "" {
				if k.Err != nil || k.PID != 812 || k.ResolvConf != "/srv/k/resolv.conf" || len(k.ClusterDNS) != 1 {
					t.Errorf("root's files read as %+v", k)
				}
				return
			}
			var ue *nodefs.UntrustedReadError
			if k.Err == nil || !errors.As(k.Err, &ue) || !strings.Contains(k.Err.Error(), tc.want) {
				t.Fatalf("kubelet's config read as %+v; want an error %q", k, tc.want)
			}
			if k.ResolvConf == "/srv/k/resolv.conf" || len(k.ClusterDNS) > 0 {
				t.Errorf("what an untrusted file says was used: %+v", k)
			}
			if len(s.ProblemsFrom(node.SourceKubelet)) == 0 {
				t.Errorf("no problem of the kubelet source: %v", s.Problems)
			}
		})
	}
}
