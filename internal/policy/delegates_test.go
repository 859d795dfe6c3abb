package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/nodefs"
)

// TestDNSDelegates reads a node tree with resolved 258+'s DNS delegates, computes the plan, writes
// its changes into the tree as apply would, and reads it again: the loop is gone from what resolved
// would load, the second plan changes nothing, and nothing else was touched.
func TestDNSDelegates(t *testing.T) {
	const (
		etc    = "/etc/systemd/dns-delegate.d/kubespray.dns-delegate"
		lib    = "/usr/lib/systemd/dns-delegate.d/kubespray.dns-delegate"
		lib262 = "/usr/lib/x86_64-linux-gnu/systemd/libsystemd-shared-262.so"
		lib257 = "/usr/lib/x86_64-linux-gnu/systemd/libsystemd-shared-257.so"
		ks     = "# kubespray\n[Delegate]\nDNS=169.254.25.10 192.168.1.1\nDomains=~.\nDefaultRoute=yes\n"
	)
	tests := []struct {
		name    string
		files   map[string]string
		written map[string]string // path -> the exact content apply writes
	}{
		{name: "in /etc: edited in place", files: map[string]string{etc: ks, lib262: ""},
			written: map[string]string{etc: "# " + EditedHeader + "\n# kubespray\n[Delegate]\nDNS=192.168.1.1\nDomains=~.\nDefaultRoute=yes\n"}},
		{name: "in /usr/lib: masked by a same-named file in /etc", files: map[string]string{lib: "[Delegate]\nDNS=169.254.25.10:53%eth0\nDomains=~.\n", lib262: ""},
			written: map[string]string{etc: "# Managed by nodedns: this copy masks " + lib + " without its loop addresses; `nodedns restore` removes it.\n[Delegate]\n# DNS=169.254.25.10:53%eth0 (loop address removed by nodedns)\nDomains=~.\n"}},
		{name: "a drop-in in /run: masked by a same-named drop-in in /etc", files: map[string]string{
			lib: "[Delegate]\nDNS=192.168.1.1\n", "/run/systemd/dns-delegate.d/kubespray.dns-delegate.d/10-cache.conf": "[Delegate]\nDNS=10.233.0.3\n", lib262: ""},
			written: map[string]string{"/etc/systemd/dns-delegate.d/kubespray.dns-delegate.d/10-cache.conf": "# Managed by nodedns: this copy masks /run/systemd/dns-delegate.d/kubespray.dns-delegate.d/10-cache.conf without its loop addresses; `nodedns restore` removes it.\n[Delegate]\n# DNS=10.233.0.3 (loop address removed by nodedns)\n"}},
		{name: "systemd 257 reads no delegates: nothing changes", files: map[string]string{etc: ks, lib257: ""}},
		{name: "no loop: nothing changes", files: map[string]string{etc: "[Delegate]\nDNS=192.168.1.1\nDomains=~.\n", lib262: ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			tt.files[node.ResolvedResolvConf] = "nameserver 169.254.25.10\nnameserver 192.168.1.1\n"
			for p, data := range tt.files {
				host := filepath.Join(root, p)
				if err := os.MkdirAll(filepath.Dir(host), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(host, []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cfg := config.Default()
			cfg.ClusterDNS = append(cfg.ClusterDNS, clusterIP)
			r := nodefs.NewReader(root)
			p := Compute(node.Observe(r, cfg, now), cfg)
			got := map[string]string{}
			for _, c := range p.Changes {
				if strings.Contains(c.Path, "dns-delegate") {
					got[c.Path] = string(c.After)
				}
			}
			if len(got) != len(tt.written) {
				t.Fatalf("delegate changes %v, want %v", got, tt.written)
			}
			for path, want := range tt.written {
				if got[path] != want {
					t.Errorf("%s:\n%q\nwant\n%q", path, got[path], want)
				}
			}
			if restart := p.HasAction(RestartResolved{}.Kind()); restart != (len(tt.written) > 0) {
				t.Errorf("restart-resolved planned = %v with %d delegate changes", restart, len(tt.written))
			}
			for path, data := range got {
				host := filepath.Join(root, path)
				if err := os.MkdirAll(filepath.Dir(host), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(host, []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			s2 := node.Observe(r, cfg, now)
			if s2.DNSDelegates != nil {
				for _, d := range s2.DNSDelegates.Delegates {
					for _, sv := range d.DNS {
						if p.Facts.IsLoop(sv.Addr, false) {
							t.Errorf("after apply delegate %s still lists %s", d.ID, sv.Raw)
						}
					}
				}
			}
			for _, c := range Compute(s2, cfg).Changes {
				if strings.Contains(c.Path, "dns-delegate") {
					t.Errorf("second plan changes %s again", c.Path)
				}
			}
		})
	}
}
