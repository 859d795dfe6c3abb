package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodedns/nodedns/internal/testutil/golden"

	"github.com/google/go-cmp/cmp"
)

// TestSeeds drives check, plan, apply, check, plan, restore over fixture roots built from the files
// the incident reports quote (docs/incidents.md). What this version cannot fix from files alone is
// listed in after, with the reason, and checked as strictly as what it does fix.
func TestSeeds(t *testing.T) {
	tests := []struct {
		seed   string
		before []string // check's problem ids on the untouched node
		after  []string // problem ids left after apply
		// want / notWant: node path -> substrings of that file after apply.
		want, notWant map[string][]string
		keptOnRestore []string
		// pending: what the second plan still lists for the problems left (docs/contract.md
		// "Check and plan agree"); none when after is empty.
		pending []string
	}{
		{
			// Seed 001: kubespray's resolved drop-in DNS=169.254.25.10, DHCP domain example.org from a
			// networkd link, kubelet reading resolved's uplink file. apply writes netplan's override
			// (netplan.mode defaults to override: 50-cloud-init.yaml has a DHCP interface), so
			// dhcp.search is fixed for good. Left after apply, all runtime state that only the live
			// node refreshes: networkd's links file still lists example.org until `netplan apply` /
			// `networkctl reload` (resolved.domains), resolved's stub file still searches it until
			// resolved hears from networkd (resolvconf.search), and kubelet still reads resolved's
			// uplink file, which carries it too: kubelet must be pointed at nodedns's file. resolved's
			// own resolv.conf still lists the cache until resolved restarts (resolved.dns).
			seed:   "001",
			before: []string{"dhcp.search", "kubelet.resolvconf", "resolvconf.search", "resolved.dns", "resolved.domains"},
			after:  []string{"kubelet.resolvconf", "resolvconf.search", "resolved.dns", "resolved.domains"},
			want: map[string][]string{
				"/etc/netplan/90-nodedns.yaml":                 {"# Managed by nodedns", "    enp1s0:\n      dhcp4-overrides:\n        use-domains: false\n"},
				"/etc/systemd/resolved.conf.d/zz-nodedns.conf": {"# Managed by nodedns", "[Resolve]\nDNS=\n", "kubespray.conf:2"},
				"/var/lib/nodedns/resolv.conf":                 {"# Managed by nodedns", "nameserver 192.168.1.1\n", "options edns0\n"},
			},
			notWant: map[string][]string{
				"/etc/systemd/resolved.conf.d/zz-nodedns.conf": {"DNS=169.254.25.10"},
				"/var/lib/nodedns/resolv.conf":                 {"169.254.25.10", "example.org", "trust-ad", "127.0.0.53", "svc.cluster.local"},
			},
			pending: []string{
				"# pending systemd-resolved.service: restart it",
				"# pending /etc/netplan/90-nodedns.yaml: `netplan apply` (or a reboot), then the next DHCP renewal (link enp1s0",
				"# pending /var/lib/kubelet/config.yaml: set resolvConf: /var/lib/nodedns/resolv.conf there",
				"nodedns: nothing for apply to change; 3 step(s) pending",
			},
		},
		{
			// Seed 002: kubespray host_resolvconf rewrote a regular /etc/resolv.conf to the cache only;
			// dhclient's lease still knows the real server. The cluster search domains go with the
			// cache (docs/contract.md "Cluster search domains on the host"): no host resolver
			// answers for cluster.local any more.
			seed:   "002",
			before: []string{"kubelet.resolvconf", "resolvconf.loop", "resolvconf.search"},
			after:  nil,
			want: map[string][]string{
				"/etc/resolv.conf":                         {"# Edited by nodedns", "nameserver 192.168.2.1\n"},
				"/var/lib/nodedns/resolv.conf":             {"nameserver 192.168.2.1\n"},
				"/etc/dhcp/dhclient-enter-hooks.d/nodedns": {"# Managed by nodedns", "169.254.25.10", `nodedns_cluster='cluster.local'`},
			},
			notWant: map[string][]string{
				"/etc/resolv.conf":             {"nameserver 169.254.25.10", "cluster.local", "domain "},
				"/var/lib/nodedns/resolv.conf": {"169.254.25.10", "cluster.local"},
			},
		},
		{
			// Seed 003: static netplan with search example.com behind resolved's stub; kubelet points
			// at nodedns's file, which does not exist yet. (The NODATA answer itself is a live probe.)
			seed:   "003",
			before: []string{"kubelet.resolvconf"},
			after:  nil,
			want: map[string][]string{
				"/var/lib/nodedns/resolv.conf": {"nameserver 10.0.2.6\n", "search example.com\n", "options edns0\n"},
			},
			notWant: map[string][]string{
				"/var/lib/nodedns/resolv.conf": {"127.0.0.53"},
			},
			keptOnRestore: []string{"/var/lib/nodedns/resolv.conf"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.seed, func(t *testing.T) {
			if _, err := exec.LookPath("netplan"); err != nil && tc.seed == "001" {
				// nodedns keeps no netplan file netplan has not validated: without netplan the override is blocked.
				t.Skip("netplan is not installed (apt-get install --no-install-recommends netplan.io)")
			}
			root := copyTree(t, filepath.Join("testdata/seeds", tc.seed))
			orig := treeState(t, root)

			rep, r := checkReport(t, root)
			if diff := cmp.Diff(tc.before, problems(rep)); diff != "" {
				t.Errorf("check before apply: problem ids (-want +got):\n%s\n%s", diff, r.stdout)
			}
			if r.code != 1 {
				t.Errorf("check before apply: exit %d, want 1", r.code)
			}

			plan := nodedns(t, "--root", root, "plan")
			if plan.code != 0 {
				t.Fatalf("plan: exit %d\n%s%s", plan.code, plan.stdout, plan.stderr)
			}
			golden.Check(t, filepath.Join("testdata", "seeds", tc.seed+".plan.golden"), []byte(plan.stdout))
			if d := nodedns(t, "--root", root, "plan", "--detailed-exitcode"); d.code != 2 {
				t.Errorf("plan --detailed-exitcode before apply: exit %d, want 2", d.code)
			}

			ap := nodedns(t, "--root", root, "apply")
			if ap.code != 0 {
				t.Fatalf("apply: exit %d\n%s%s", ap.code, ap.stdout, ap.stderr)
			}
			fileHas(t, root, tc.want, tc.notWant)

			rep, r = checkReport(t, root)
			if diff := cmp.Diff(tc.after, problems(rep)); diff != "" {
				t.Errorf("check after apply: problem ids (-want +got):\n%s\n%s", diff, r.stdout)
			}
			again := nodedns(t, "--root", root, "plan", "--detailed-exitcode")
			if again.code != 0 {
				t.Errorf("second plan after apply: exit %d, want 0:\n%s%s", again.code, again.stdout, again.stderr)
			}
			if len(tc.after) == 0 && !strings.Contains(again.stdout, "nodedns: nothing to change\n") {
				t.Errorf("second plan after apply: want nothing to change:\n%s", again.stdout)
			}
			// check still reports problems: plan must say what is pending, never "nothing to change".
			for _, want := range tc.pending {
				contains(t, "second plan after apply", again.stdout, want)
			}
			if len(tc.after) > 0 && strings.Contains(again.stdout, "nothing to change\n") {
				t.Errorf("second plan says nothing to change while check reports %v:\n%s", tc.after, again.stdout)
			}

			rs := nodedns(t, "--root", root, "restore")
			if rs.code != 0 {
				t.Fatalf("restore: exit %d\n%s%s", rs.code, rs.stdout, rs.stderr)
			}
			for _, k := range tc.keptOnRestore {
				contains(t, "restore output", rs.stdout, "kept "+k)
			}
			if diff := cmp.Diff(orig, treeState(t, root)); diff != "" {
				t.Errorf("restore did not give back the original tree (-orig +now):\n%s", diff)
			}
		})
	}
}
