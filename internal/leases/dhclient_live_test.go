package leases

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/nodedns/nodedns/internal/testutil/nstest"
)

// envScript stands in for dhclient-script (never the stock one: it writes the host's /etc). It only
// records the environment dhclient hands every script run, one file per run.
const envScript = `#!/bin/sh
n=$(ls %[1]s | wc -l)
env | sort > %[1]s/$(printf %%02d "$n")-"$reason"
exit 0
`

// kubesprayBlock is what kubespray writes at the top of dhclient.conf with disable_host_nameservers:
// true (roles/kubernetes/preinstall/tasks/0100-dhclient-hooks.yml, rendered by Ansible).
const kubesprayBlock = `# Ansible entries BEGIN
%s domain-name-servers 169.254.25.10;
supersede domain-name "cluster.local";
supersede domain-search "default.svc.cluster.local","svc.cluster.local";
# Ansible entries END
`

const requestLine = "request subnet-mask, broadcast-address, time-offset, routers,\n\tdomain-name, domain-name-servers, domain-search, host-name;\n"

// TestDhclientSupersedeLive measures what a real dhclient 4.4 leaves of the server DHCP offered once
// kubespray's dhclient.conf supersedes domain-name-servers with the cache alone, and that OfferedDNS
// finds it wherever it is left: dnsmasq in one sandbox offers 10.66.0.53; dhclient in another
// first leases with a plain dhclient.conf (the node before kubespray), then is restarted (as a reboot
// does) with kubespray's supersede, then again, then with prepend instead.
func TestDhclientSupersedeLive(t *testing.T) { nstest.Suites(t, testDhclientSupersedeLive) }

func testDhclientSupersedeLive(t *testing.T, s nstest.Suite) {
	s.Need(t, "apt-get install dnsmasq-base isc-dhcp-client", "dnsmasq", "dhclient")
	srv := nstest.New(t)
	cli := nstest.NewWith(t, nstest.Options{UTSNamespace: true, Suite: s})
	srvIf, cliIf := nstest.Veth(t, srv, cli, "10.66.0.1/24", "10.66.1.2/24")
	srv.StartDHCPServer(t, srvIf, nstest.DHCPOptions{Range: "10.66.0.100,10.66.0.150,255.255.255.0,1h",
		Router: "10.66.0.1", DNS: []string{"10.66.0.53"}, Domain: "example.org"})

	dir := cli.Dir()
	envDir := filepath.Join(dir, "env")
	if err := os.MkdirAll(envDir, 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "dhclient-script")
	if err := os.WriteFile(script, []byte(fmt.Sprintf(envScript, envDir)), 0o755); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "dhclient.conf")
	leaseFile := filepath.Join(dir, "dhclient."+cliIf+".leases")
	pidFile := filepath.Join(dir, "dhclient.pid")
	// Each start is a fresh dhclient (it reads dhclient.conf only when it starts), as after a
	// reboot; the running one is stopped without releasing its lease first.
	start := func(confText string) {
		t.Helper()
		if err := os.WriteFile(conf, []byte(confText), 0o644); err != nil {
			t.Fatal(err)
		}
		cli.Run(t, fmt.Sprintf("dhclient -x -pf %[1]s 2>/dev/null; dhclient -1 -cf %[2]s -sf %[3]s -lf %[4]s -pf %[1]s %[5]s",
			pidFile, conf, script, leaseFile, cliIf))
	}
	parse := func() ([]Lease, DhclientConf) {
		t.Helper()
		data, err := os.ReadFile(leaseFile)
		if err != nil {
			t.Fatal(err)
		}
		ls, err := ParseDhclient(data, "/var/lib/dhcp/dhclient."+cliIf+".leases")
		if err != nil {
			t.Fatal(err)
		}
		cdata, err := os.ReadFile(conf)
		if err != nil {
			t.Fatal(err)
		}
		c, err := ParseDhclientConf(cdata, "/etc/dhcp/dhclient.conf")
		if err != nil {
			t.Fatal(err)
		}
		return ls, c
	}
	dns := func(l Lease) string { return strings.Join(addrStrings(l.DNS), ",") }
	offered := netip.MustParseAddr("10.66.0.53")

	start(requestLine)
	ls, _ := parse()
	if len(ls) != 1 || dns(ls[0]) != "10.66.0.53" {
		t.Fatalf("first lease: %d blocks, servers %v; want one block offering 10.66.0.53", len(ls), ls)
	}

	supersede := fmt.Sprintf(kubesprayBlock, "supersede") + requestLine
	start(supersede)
	ls, c := parse()
	if n := len(ls); n != 2 || dns(ls[1]) != "169.254.25.10" {
		t.Fatalf("after the restart with kubespray's supersede: want the rewritten boot block and a new block listing only 169.254.25.10, got %d blocks %v", n, ls)
	}
	if got := ls[1].SearchDomains; strings.Join(got, " ") != "default.svc.cluster.local. svc.cluster.local." {
		t.Errorf("superseded domain-search recorded as %q", got)
	}
	// No variable of the script run carries the offered server: it is gone from everything
	// dhclient hands a hook.
	runs := envRuns(t, envDir)
	last := runs[len(runs)-1]
	if !strings.Contains(last.env, "new_domain_name_servers=169.254.25.10\n") || strings.Contains(last.env, "10.66.0.53") {
		t.Errorf("script run %s: want new_domain_name_servers=169.254.25.10 and no 10.66.0.53 anywhere:\n%s", last.name, last.env)
	}
	o := OfferedDNS(ls, c, cliIf)
	if !o.Known || o.Current || o.Lease.Line != 1 || len(o.Servers) != 1 || o.Servers[0] != offered || o.Hidden == nil || o.Hidden.Line != 2 {
		t.Errorf("OfferedDNS after one restart = %+v, want 10.66.0.53 from the older block at line 1, hidden by dhclient.conf:2", o)
	}

	start(supersede)
	ls, c = parse()
	for _, l := range ls {
		if dns(l) != "169.254.25.10" {
			t.Fatalf("after a second restart a block still lists %s: want only superseded blocks (dhclient keeps one block per address)", dns(l))
		}
	}
	if o := OfferedDNS(ls, c, cliIf); o.Known || o.Hidden == nil || o.Hidden.Policy != Supersede {
		t.Errorf("OfferedDNS after a second restart = %+v, want unknown, hidden by the supersede", o)
	}
	for _, r := range envRuns(t, envDir) {
		if strings.Contains(r.env, "10.66.0.53") && strings.Contains(r.env, "169.254.25.10") {
			t.Errorf("script run %s carries both the offer and the superseded list:\n%s", r.name, r.env)
		}
	}

	start(fmt.Sprintf(kubesprayBlock, "prepend") + requestLine)
	ls, c = parse()
	if got := dns(ls[len(ls)-1]); got != "169.254.25.10,10.66.0.53" {
		t.Fatalf("with prepend the newest block lists %s, want 169.254.25.10,10.66.0.53", got)
	}
	if o := OfferedDNS(ls, c, cliIf); !o.Known || !o.Current || len(o.Servers) != 1 || o.Servers[0] != offered {
		t.Errorf("OfferedDNS with prepend = %+v, want 10.66.0.53 from the newest block", o)
	}
}

type envRun struct{ name, env string }

// envRuns returns the environments the test script recorded, in run order.
func envRuns(t *testing.T, dir string) []envRun {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []envRun
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, envRun{e.Name(), string(data)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	if len(out) == 0 {
		t.Fatal("the script never ran")
	}
	return out
}
