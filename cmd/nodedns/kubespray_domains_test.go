package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKubesprayResolvedClusterDomains: kubespray's resolved.conf.d/kubespray.conf sets
// `Domains=default.svc.cluster.local svc.cluster.local` on the global scope. While a link has a
// server the global scope gets none from nodedns and the domains stay (lookups fail locally); once
// no link has one and nodedns gives the global scope the upstreams, the drop-in resets Domains= too
// (docs/contract.md "Cluster search domains on the host"), and a second plan is settled.
func TestKubesprayResolvedClusterDomains(t *testing.T) {
	for _, tt := range []struct {
		name     string
		linkDNS  string
		upstream string
		domains  bool // the drop-in resets Domains=
	}{
		{"a link has a server", "DNS=10.66.0.53", "", false},
		{"no link has a server", "DNS=", "upstreams: [10.66.0.53]\n", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := copyTree(t, "testdata/kubespray/resolved")
			link := filepath.Join(root, "run/systemd/netif/links/2")
			data, err := os.ReadFile(link)
			must(t, err)
			must(t, os.WriteFile(link, []byte(strings.Replace(string(data), "DNS=10.66.0.53\n", tt.linkDNS+"\n", 1)), 0o644))
			must(t, os.MkdirAll(filepath.Join(root, "etc/nodedns"), 0o755))
			must(t, os.WriteFile(filepath.Join(root, "etc/nodedns/config.yaml"), []byte("kubelet:\n  config: /etc/kubernetes/kubelet-config.yaml\n"+tt.upstream), 0o644))
			ap := nodedns(t, "--root", root, "apply")
			if ap.code != 0 {
				t.Fatalf("apply: exit %d\n%s%s", ap.code, ap.stdout, ap.stderr)
			}
			dropIn := readFile(t, root, "/etc/systemd/resolved.conf.d/zz-nodedns.conf")
			if tt.domains {
				contains(t, "zz-nodedns.conf", dropIn, "DNS=10.66.0.53\n")
				contains(t, "zz-nodedns.conf", dropIn, "\nDomains=\n")
				for _, l := range strings.Split(dropIn, "\n") {
					if strings.HasPrefix(l, "Domains=") && strings.Contains(l, "cluster.local") {
						t.Errorf("zz-nodedns.conf keeps a cluster domain: %q", l)
					}
				}
			} else {
				notContains(t, "zz-nodedns.conf", dropIn, "Domains=")
			}
			if d := nodedns(t, "--root", root, "plan", "--detailed-exitcode"); d.code != 0 {
				t.Errorf("plan after apply: exit %d, want 0\n%s%s", d.code, d.stdout, d.stderr)
			}
		})
	}
}
