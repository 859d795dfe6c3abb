package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/testutil/nstest"
)

// dhcpScript stands in for dhclient-script (never the stock one: it writes the host's /etc). It
// writes ROOT/etc/resolv.conf the way Debian's make_resolv_conf did for years: remove, then write, so
// the daemon sees a missing file, then an empty one, then the full one.
const dhcpScript = `#!/bin/sh
R=%s/etc/resolv.conf
case "$reason" in
BOUND|RENEW|REBIND|REBOOT)
	rm -f "$R"
	{
		[ -n "$new_domain_search" ] && echo "search $new_domain_search"
		for ns in $new_domain_name_servers; do echo "nameserver $ns"; done
	} > "$R"
	;;
esac
exit 0
`

// TestRunRealDHCP: dnsmasq in one sandbox hands out domain-search example.org to a real dhclient in
// another; `nodedns --root ROOT run` (ROOT holding the dhclient lease file and resolv.conf) strips the
// domain, and after a renewal with a new DNS server the kubelet file follows. The figure for "within
// 1 s" is BenchmarkRunLeaseRenewal; here the deadline is generous and the time taken is logged.
func TestRunRealDHCP(t *testing.T) { nstest.Suites(t, testRunRealDHCP) }

func testRunRealDHCP(t *testing.T, s nstest.Suite) {
	s.Need(t, "apt-get install dnsmasq-base isc-dhcp-client", "dnsmasq", "dhclient")
	srv, cli := nstest.New(t), nstest.NewWith(t, nstest.Options{Suite: s})
	srvIf, cliIf := nstest.Veth(t, srv, cli, "10.77.0.1/24", "10.78.0.2/24")

	root := t.TempDir()
	for _, d := range []string{"etc/dhcp", "var/lib/dhcp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	putFile(t, root, "/etc/resolv.conf", "nameserver 10.77.0.53\n")
	conf := filepath.Join(root, "etc/dhcp/dhclient.conf")
	if err := os.WriteFile(conf, []byte("request subnet-mask, broadcast-address, routers, domain-name, domain-name-servers, domain-search;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(srv.Dir(), "dhclient-script")
	if err := os.WriteFile(script, []byte(fmt.Sprintf(dhcpScript, root)), 0o755); err != nil {
		t.Fatal(err)
	}
	leaseFile := filepath.Join(root, "var/lib/dhcp/dhclient."+cliIf+".leases")

	var dnsmasq *exec.Cmd
	serve := func(dns string) {
		if dnsmasq != nil {
			_ = dnsmasq.Process.Kill()
			_ = dnsmasq.Wait()
		}
		dnsmasq = srv.Start(t, "dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null", "--port=0",
			"--interface="+srvIf, "--bind-interfaces", "--dhcp-authoritative",
			"--dhcp-leasefile="+filepath.Join(srv.Dir(), "dnsmasq.leases"), "--pid-file=",
			"--dhcp-range=10.77.0.100,10.77.0.150,255.255.255.0,1h",
			"--dhcp-option=option:router,10.77.0.1",
			"--dhcp-option=option:dns-server,"+dns,
			"--dhcp-option=option:domain-name,example.org",
			"--dhcp-option=option:domain-search,example.org")
		time.Sleep(300 * time.Millisecond) // dnsmasq binds its DHCP socket
	}
	pidFile := filepath.Join(cli.Dir(), "dhclient.pid")
	lease := func() {
		// -1: try once; dhclient forks into the background once bound (the sandbox kills it at the
		// end). A running one is stopped first (-x, no release) so the next run re-requests: that is
		// the renewal as far as the lease file and the script are concerned.
		cli.Run(t, fmt.Sprintf("dhclient -x -pf %[1]s 2>/dev/null; dhclient -1 -cf %[2]s -sf %[3]s -lf %[4]s -pf %[1]s %[5]s",
			pidFile, conf, script, leaseFile, cliIf))
	}

	serve("10.77.0.53")
	lease()
	if got := getFile(root, "/etc/resolv.conf"); !strings.Contains(got, "example.org") {
		t.Fatalf("the test script did not write the DHCP domain (nothing for nodedns to strip):\n%s", got)
	}

	p := startRun(t, root)
	waitUntil(t, "example.org stripped from /etc/resolv.conf", func() bool {
		got := getFile(root, "/etc/resolv.conf")
		return !strings.Contains(got, "example.org") && strings.Contains(got, "nameserver 10.77.0.53")
	})
	waitUntil(t, "the kubelet file from the lease", func() bool {
		k := getFile(root, "/var/lib/nodedns/resolv.conf")
		return strings.Contains(k, "nameserver 10.77.0.53") && !strings.Contains(k, "example.org")
	})
	if !strings.Contains(getFile(root, "/etc/dhcp/dhclient-enter-hooks.d/nodedns"), "new_domain_search=") {
		t.Errorf("no dhclient enter hook written although %s exists", conf)
	}

	// Renewal with a new DNS server.
	serve("10.77.0.54")
	start := time.Now()
	lease()
	leased := time.Since(start)
	if !strings.Contains(getFile(root, "/var/lib/dhcp/dhclient."+cliIf+".leases"), "10.77.0.54") {
		t.Fatalf("the renewal did not bring the new server:\n%s", getFile(root, "/var/lib/dhcp/dhclient."+cliIf+".leases"))
	}
	waitUntil(t, "the kubelet file to follow the renewal", func() bool {
		k := getFile(root, "/var/lib/nodedns/resolv.conf")
		return strings.Contains(k, "nameserver 10.77.0.54") && !strings.Contains(k, "10.77.0.53")
	})
	t.Logf("renewal: dhclient took %v; kubelet file followed %v after dhclient returned", leased.Round(time.Millisecond), (time.Since(start) - leased).Round(time.Millisecond))
	waitUntil(t, "example.org stripped again after the renewal", func() bool {
		got := getFile(root, "/etc/resolv.conf")
		return !strings.Contains(got, "example.org") && strings.Contains(got, "nameserver 10.77.0.54")
	})
	if code := p.stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
}
