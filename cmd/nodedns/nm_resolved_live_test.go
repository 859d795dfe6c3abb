package main

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodedns/nodedns/internal/networkmanager"
	"github.com/nodedns/nodedns/internal/testutil/nstest"
)

// These tests run the real binary on NetworkManager over systemd-resolved (Ubuntu's setup: NM
// 1.42.4 with `dns=systemd-resolved` pushes each link's DNS to a real resolved 252 over D-Bus,
// /etc/resolv.conf is resolved's stub), dnsmasq offering 10.66.0.53 and example.org, renewing
// every 2 s.

// resolvedState is what resolved holds: its global DNS and Domains, and the NM link's DNS and
// Domains, as busctl prints them (addresses as bytes: 10.66.0.53 is "4 10 66 0 53").
func (l *nmLive) resolvedState(t *testing.T) string {
	t.Helper()
	out, err := l.Node.Try(fmt.Sprintf(`for p in DNS Domains; do busctl --system get-property org.freedesktop.resolve1 /org/freedesktop/resolve1 org.freedesktop.resolve1.Manager $p; done
for p in DNS Domains; do busctl --system get-property org.freedesktop.resolve1 /org/freedesktop/resolve1/link/_3%d org.freedesktop.resolve1.Link $p; done`, l.IfIndex(t)))
	if err != nil {
		t.Fatalf("read resolved's state: %v: %s", err, out)
	}
	return out
}

const busLoop = "4 169 254 25 10" // 169.254.25.10 as busctl prints an address

// nmGlobalDNS is NetworkManager's GlobalDnsConfiguration as busctl prints it: the global DNS NM
// merged from its configuration (conf.d and the intern file).
func (l *nmLive) nmGlobalDNS(t *testing.T) string {
	t.Helper()
	out, err := l.Node.Try(`busctl --system get-property org.freedesktop.NetworkManager /org/freedesktop/NetworkManager org.freedesktop.NetworkManager GlobalDnsConfiguration`)
	if err != nil {
		t.Fatalf("read NetworkManager's GlobalDnsConfiguration: %v: %s", err, out)
	}
	return out
}

// TestNMOverResolvedLive: check, apply, an NM restart, a renewal and restore on NM over resolved,
// with and without kubespray's dns.conf. nodedns never sets a link NM pushes in resolved (NM puts
// it back at its next push), resolved never gets the loop address, and restore leaves conf.d as
// it was.
func TestNMOverResolvedLive(t *testing.T) { nstest.Suites(t, testNMOverResolvedLive) }

func testNMOverResolvedLive(t *testing.T, s nstest.Suite) {
	s.Need(t, "apt-get install systemd (busctl reads resolved's state)", "busctl")
	for _, tc := range []struct {
		name      string
		kubespray bool
	}{
		{"dhcp search domain", false},
		{"kubespray dns.conf", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var confD map[string]string
			if tc.kubespray {
				confD = nmKubesprayConfD(t)
			}
			l := startNMLiveWith(t, nstest.NMOptions{ConfD: confD, Resolved: true, Suite: s})
			before := l.confD(t)
			globalBefore := l.nmGlobalDNS(t)
			noLoop := func(when string) string {
				t.Helper()
				st := l.resolvedState(t)
				t.Logf("resolved %s:\n%s", when, st)
				if strings.Contains(st, busLoop) {
					t.Errorf("%s: resolved holds 169.254.25.10:\n%s", when, st)
				}
				return st
			}
			st := noLoop("at start")
			out, code := l.run(t, "check")
			if code != 1 {
				t.Errorf("check exited %d, want 1", code)
			}
			if tc.kubespray && (!strings.Contains(out, "PROBLEM  resolved.dns") || !strings.Contains(out, "/etc/NetworkManager/conf.d/dns.conf")) {
				t.Errorf("check does not name kubespray's dns.conf under resolved.dns:\n%s", out)
			}
			if strings.Contains(st, `"example.org"`) {
				// resolved.domains names the link and NetworkManager as the place to fix it.
				if !strings.Contains(out, "searches DHCP domain example.org") || !strings.Contains(out, "NetworkManager pushes the link's DNS to systemd-resolved") {
					t.Errorf("check does not name the DHCP domain NetworkManager pushes:\n%s", out)
				}
			}
			out, code = l.run(t, "apply")
			if code != 0 {
				t.Fatalf("apply exited %d", code)
			}
			if strings.Contains(out, "set-link-dns") || strings.Contains(out, "set-link-domains") {
				t.Errorf("apply set a link NetworkManager pushes in resolved:\n%s", out)
			}
			// The DHCP server reaches resolved on the NM link, from NetworkManager.
			hasServer := func(when string) {
				t.Helper()
				nstest.WaitFor(t, 10*time.Second, "resolved holding 10.66.0.53 "+when, func() bool { return strings.Contains(l.resolvedState(t), "4 10 66 0 53") })
			}
			if tc.kubespray {
				if !strings.Contains(out, "wrote "+networkmanager.NodeDNSConfPath) {
					t.Errorf("apply did not write %s:\n%s", networkmanager.NodeDNSConfPath, out)
				}
				if got := l.read(t, networkmanager.NodeDNSConfPath); got != string(networkmanager.RenderResolvedOverride()) {
					t.Errorf("%s is\n%s", networkmanager.NodeDNSConfPath, got)
				}
				hasServer("after apply")
				noLoop("after apply")
				if out, code := l.run(t, "check"); strings.Contains(out, "PROBLEM  resolved.dns") {
					t.Errorf("check after apply (exit %d) still finds resolved.dns:\n%s", code, out)
				}
			} else {
				if _, err := os.Stat(l.Path(networkmanager.NodeDNSConfPath)); err == nil {
					t.Errorf("apply wrote %s on a node whose global DNS lists no loop address", networkmanager.NodeDNSConfPath)
				}
				if afterApply := noLoop("after apply"); afterApply != st {
					t.Errorf("apply changed resolved's state though NetworkManager is its source:\nbefore:\n%s\nafter:\n%s", st, afterApply)
				}
			}
			l.Restart(t)
			l.WaitDHCP(t, "the lease after the restart", func(s string) bool { return strings.Contains(s, "dhcp4.ip_address=") })
			hasServer("after an NM restart")
			noLoop("after an NM restart")
			n := l.DHCP.Requests()
			nstest.WaitFor(t, 30*time.Second, "a renewal", func() bool { return l.DHCP.Requests() > n })
			hasServer("after a renewal")
			noLoop("after a renewal")
			if _, code := l.run(t, "restore"); code != 0 {
				t.Errorf("restore exited %d", code)
			}
			if d := cmp.Diff(before, l.confD(t)); d != "" {
				t.Errorf("conf.d after restore (-before +after):\n%s", d)
			}
			if tc.kubespray {
				// restore reloaded NM: kubespray's "*" domain is back in its configuration. NM 1.42
				// does not push to resolved on that Reload (the DHCP servers stay, measured); from
				// its next restart it hands resolved no server again, as before apply.
				// What restore owes is NetworkManager's own configuration, read back over D-Bus: its
				// global DNS is kubespray's again, as before apply. Whether resolved then also
				// drops the link server NM pushed while the override was in force is NM's doing,
				// and varies: the next NM restart cleared it in most runs, not in all (one CI run
				// of this test kept 10.66.0.53 on the link after the restart). It is logged, and
				// the loop address must never be there.
				l.Restart(t)
				l.WaitDHCP(t, "the lease after the restart", func(s string) bool { return strings.Contains(s, "dhcp4.ip_address=") })
				if got := l.nmGlobalDNS(t); got != globalBefore {
					t.Errorf("NetworkManager's GlobalDnsConfiguration after restore and a restart:\n%s\nbefore apply:\n%s", got, globalBefore)
				}
				if after := noLoop("after restore and an NM restart"); after != st {
					t.Logf("resolved differs from its state before apply (the link server NM pushed while the override was in force)")
				}
			}
		})
	}
}

// TestFactsNMResolvedSearches: a conf.d `[global-dns] searches=` without a "*" domain (which on NM
// 1.58 in dns=default mode puts its searches in place of DHCP's domains) changes nothing NM pushes
// to resolved, on 1.42.4 and on 1.58.1 alike: NM loads it (GlobalDnsConfiguration lists the
// searches) but the link keeps DHCP's server and search domain through the Reload, an NM restart
// (a fresh push), a renewal and a bare `[global-dns]`, and the global searches reach resolved
// nowhere. So no conf.d file drops a DHCP search domain over resolved (networkmanager/FACTS.md,
// "NetworkManager over systemd-resolved").
func TestFactsNMResolvedSearches(t *testing.T) { nstest.Suites(t, testFactsNMResolvedSearches) }

func testFactsNMResolvedSearches(t *testing.T, s nstest.Suite) {
	s.Need(t, "apt-get install systemd (busctl reads resolved's state)", "busctl")
	l := startNMLiveWith(t, nstest.NMOptions{Resolved: true, Suite: s})
	v := l.Version(t)
	const server = "4 10 66 0 53"
	// NM pushes over D-Bus as it applies a configuration; a push that drops the domain would be
	// there well within this.
	const settle = 3 * time.Second
	dhcpKept := func(when string) {
		t.Helper()
		st := l.resolvedState(t)
		t.Logf("NM %s, resolved %s:\n%s", v, when, st)
		if !strings.Contains(st, server) || !strings.Contains(st, `"example.org"`) {
			t.Errorf("NM %s, %s: resolved lacks the DHCP server or example.org:\n%s", v, when, st)
		}
		if strings.Contains(st, "corp.example") {
			t.Errorf("NM %s, %s: resolved holds the global searches:\n%s", v, when, st)
		}
	}
	nstest.WaitFor(t, 10*time.Second, "the DHCP server and domain on the link", func() bool {
		st := l.resolvedState(t)
		return strings.Contains(st, server) && strings.Contains(st, `"example.org"`)
	})
	dhcpKept("at start")
	l.WriteFile(t, networkmanager.NodeDNSConfPath, "[global-dns]\nsearches=corp.example\n", 0o644)
	l.Reload(t)
	if g := l.nmGlobalDNS(t); !strings.Contains(g, `"searches" as 1 "corp.example"`) {
		t.Fatalf("NM %s did not load [global-dns] searches=corp.example: GlobalDnsConfiguration %s", v, g)
	}
	time.Sleep(settle)
	dhcpKept("after the Reload with searches=corp.example")
	dm, err := l.Node.Try(`busctl --system get-property org.freedesktop.NetworkManager /org/freedesktop/NetworkManager/DnsManager org.freedesktop.NetworkManager.DnsManager Configuration`)
	if err != nil || !strings.Contains(dm, `"domains" as 1 "example.org"`) {
		t.Errorf("NM %s: DnsManager Configuration (%v): %s", v, err, dm)
	}
	l.Restart(t)
	l.WaitDHCP(t, "the lease after the restart", func(s string) bool { return strings.Contains(s, "dhcp4.ip_address=") })
	nstest.WaitFor(t, 10*time.Second, "the DHCP server on the link after the restart", func() bool { return strings.Contains(l.resolvedState(t), server) })
	dhcpKept("after an NM restart")
	n := l.DHCP.Requests()
	nstest.WaitFor(t, 30*time.Second, "a renewal", func() bool { return l.DHCP.Requests() > n })
	time.Sleep(time.Second)
	dhcpKept("after a renewal")
	l.WriteFile(t, networkmanager.NodeDNSConfPath, "[global-dns]\n", 0o644)
	l.Restart(t)
	l.WaitDHCP(t, "the lease after the restart", func(s string) bool { return strings.Contains(s, "dhcp4.ip_address=") })
	nstest.WaitFor(t, 10*time.Second, "the DHCP server on the link after the restart", func() bool { return strings.Contains(l.resolvedState(t), server) })
	dhcpKept("after an NM restart with a bare [global-dns]")
}
