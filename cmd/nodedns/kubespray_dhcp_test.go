package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodedns/nodedns/internal/testutil/nstest"
)

// debianScript stands in for Debian's dhclient-script (isc-dhcp-client 4.4.3-P1, never the stock
// one: it writes the host's /etc): it sources every file of ROOT/etc/dhcp/dhclient-enter-hooks.d as
// dhclient-script's run_hookdir does, then, on BOUND, RENEW, REBIND and REBOOT, calls
// make_resolv_conf: Debian's own, writing ROOT/etc/resolv.conf from scratch, unless a hook
// replaced it. nodedns_resolv_conf points nodedns's hook at the same file.
const debianScript = `#!/bin/sh
ROOT='%s'
nodedns_resolv_conf=$ROOT/etc/resolv.conf
make_resolv_conf() {
	resolv_conf=$ROOT/etc/resolv.conf
	if [ -n "$new_domain_search" ] || [ -n "$new_domain_name" ] || [ -n "$new_domain_name_servers" ]; then
		new_resolv_conf="${resolv_conf}.dhclient-new.$$"
		rm -f "$new_resolv_conf"
		if [ -n "$new_domain_name" ]; then
			echo domain ${new_domain_name%%%% *} >>"$new_resolv_conf"
		fi
		if [ -n "$new_domain_search" ]; then
			if [ -n "$new_domain_name" ]; then
				domain_in_search_list=""
				for domain in $new_domain_search; do
					if [ "$domain" = "${new_domain_name}" ] || [ "$domain" = "${new_domain_name}." ]; then
						domain_in_search_list="Yes"
					fi
				done
				if [ -z "$domain_in_search_list" ]; then
					new_domain_search="$new_domain_name $new_domain_search"
				fi
			fi
			echo "search ${new_domain_search}" >>"$new_resolv_conf"
		elif [ -n "$new_domain_name" ]; then
			echo "search ${new_domain_name}" >>"$new_resolv_conf"
		fi
		if [ -n "$new_domain_name_servers" ]; then
			for nameserver in $new_domain_name_servers; do
				echo nameserver $nameserver >>"$new_resolv_conf"
			done
		else
			sed -n /^\w*[Nn][Aa][Mm][Ee][Ss][Ee][Rr][Vv][Ee][Rr]/p "$resolv_conf" >>"$new_resolv_conf"
		fi
		cat "$new_resolv_conf" >"$resolv_conf"
		rm -f "$new_resolv_conf"
	fi
}
for h in "$ROOT"/etc/dhcp/dhclient-enter-hooks.d/*; do
	[ -f "$h" ] && . "$h"
done
case "$reason" in
BOUND | RENEW | REBIND | REBOOT) make_resolv_conf ;;
esac
echo "$reason" >>"$ROOT/../script-runs"
exit 0
`

// TestKubesprayDhclientRenewal: a real dhclient 4.4 with kubespray's dhclient.conf (its supersede
// line) renews after apply, with nodedns's enter hook sourced as Debian's dhclient-script sources
// it: /etc/resolv.conf then holds no loop address and no cluster search domain, and plan has
// nothing to change (docs/contract.md "Cluster search domains on the host": apply and the hook reach
// one fixed point). On the loop-only node the renewal is dhclient's second restart, after which its
// lease file no longer shows the server DHCP offered: nodedns's record still does.
func TestKubesprayDhclientRenewal(t *testing.T) { nstest.Suites(t, testKubesprayDhclientRenewal) }

func testKubesprayDhclientRenewal(t *testing.T, s nstest.Suite) {
	s.Need(t, "apt-get install dnsmasq-base isc-dhcp-client", "dnsmasq", "dhclient")
	for _, tree := range []string{"dhclient", "dhclient-loop-only"} {
		t.Run(tree, func(t *testing.T) {
			srv := nstest.New(t)
			cli := nstest.NewWith(t, nstest.Options{UTSNamespace: true, Suite: s})
			srvIf, cliIf := nstest.Veth(t, srv, cli, "10.66.0.1/24", "10.66.1.2/24")
			srv.StartDHCPServer(t, srvIf, nstest.DHCPOptions{Range: "10.66.0.100,10.66.0.150,255.255.255.0,1h",
				Router: "10.66.0.1", DNS: []string{"10.66.0.53"}, Domain: "example.org"})

			work := t.TempDir()
			root := filepath.Join(work, "node")
			must(t, os.Rename(copyTree(t, filepath.Join("testdata/kubespray", tree)), root))
			must(t, os.Remove(filepath.Join(root, "var/lib/dhcp/dhclient.enp1s0.leases")))
			kubesprayConf := readFile(t, root, "/etc/dhcp/dhclient.conf")
			kubesprayResolv := readFile(t, root, "/etc/resolv.conf")
			// Debian's dhclient.conf before kubespray: its block taken off the top.
			plainConf := kubesprayConf[strings.Index(kubesprayConf, "# Ansible entries END\n")+len("# Ansible entries END\n"):]

			script := filepath.Join(work, "dhclient-script")
			must(t, os.WriteFile(script, []byte(fmt.Sprintf(debianScript, root)), 0o755))
			conf := filepath.Join(root, "etc/dhcp/dhclient.conf")
			leaseFile := filepath.Join(root, "var/lib/dhcp/dhclient."+cliIf+".leases")
			pidFile := filepath.Join(work, "dhclient.pid")
			// Each start is a fresh dhclient (it reads dhclient.conf only when it starts), as after
			// a reboot; the running one is stopped first without releasing its lease.
			start := func(confText string) {
				t.Helper()
				must(t, os.WriteFile(conf, []byte(confText), 0o644))
				cli.Run(t, fmt.Sprintf("dhclient -x -pf %[1]s 2>/dev/null; dhclient -1 -cf %[2]s -sf %[3]s -lf %[4]s -pf %[1]s %[5]s",
					pidFile, conf, script, leaseFile, cliIf))
			}

			// The node's history as testdata/kubespray/README.md measured it: booted before
			// kubespray; kubespray; a reboot with kubespray's dhclient.conf; kubespray run again
			// (its block back on top of what dhclient-script wrote).
			start(plainConf)
			contains(t, "the first lease", readFile(t, root, "/etc/resolv.conf"), "nameserver 10.66.0.53")
			start(kubesprayConf)
			got := readFile(t, root, "/etc/resolv.conf")
			if !strings.Contains(got, "nameserver 169.254.25.10") || !strings.Contains(got, "svc.cluster.local") {
				t.Fatalf("dhclient with kubespray's supersede did not write the cache and the cluster domains (nothing for nodedns to fix):\n%s", got)
			}
			putFile(t, root, "/etc/resolv.conf", kubesprayResolv)

			ap := nodedns(t, "--root", root, "apply")
			if ap.code != 0 {
				t.Fatalf("apply: exit %d\n%s%s", ap.code, ap.stdout, ap.stderr)
			}
			applied := readFile(t, root, "/etc/resolv.conf")
			if pl := nodedns(t, "--root", root, "plan", "--detailed-exitcode"); pl.code != 0 {
				t.Fatalf("plan after apply: exit %d\n%s%s", pl.code, pl.stdout, pl.stderr)
			}

			// The renewal: dhclient's next start with kubespray's dhclient.conf, nodedns's hook in place.
			start(kubesprayConf)
			after := readFile(t, root, "/etc/resolv.conf")
			for _, bad := range []string{"169.254.25.10", "cluster.local", "example.org"} {
				notContains(t, "/etc/resolv.conf after the renewal", after, bad)
			}
			contains(t, "/etc/resolv.conf after the renewal", after, "nameserver 10.66.0.53\n")
			if after != applied {
				t.Errorf("the renewal changed what apply wrote:\n--- apply\n%s--- renewal\n%s", applied, after)
			}
			runs := readFile(t, work, "script-runs")
			if !strings.HasSuffix(runs, "REBOOT\n") && !strings.HasSuffix(runs, "BOUND\n") {
				t.Errorf("dhclient-script's last run: %q", runs)
			}
			if tree == "dhclient-loop-only" {
				if l := readFile(t, root, "/var/lib/dhcp/dhclient."+cliIf+".leases"); strings.Contains(l, "10.66.0.53") {
					t.Fatalf("after the second restart the lease file still shows the offer (nothing to prove):\n%s", l)
				}
			}
			pl := nodedns(t, "--root", root, "plan", "--detailed-exitcode")
			if pl.code != 0 || !strings.Contains(pl.stdout, "nodedns: nothing to change") {
				t.Errorf("plan after the renewal: exit %d, want 0 and nothing to change\n%s%s", pl.code, pl.stdout, pl.stderr)
			}
			contains(t, "kubelet file", readFile(t, root, "/var/lib/nodedns/resolv.conf"), "nameserver 10.66.0.53\n")
		})
	}
}
