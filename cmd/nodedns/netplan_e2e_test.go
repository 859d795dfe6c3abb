package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/testutil/nstest"
)

// TestNetplanEndToEnd runs the netplan integration against real components in two namespaces:
// dnsmasq hands out a lease with domain-search example.org; real systemd-networkd 252
// (read-only /sys, private bus) takes it through the netplan-generated .network file, and real
// systemd-resolved 252 shows the domain. The nodedns binary then runs live inside the node's
// sandbox (its /etc and /var/lib are overlays: the host's files are never touched):
//   - `nodedns apply` writes the override; `netplan generate` + `networkctl reload` (what `netplan
//     apply` does for networkd; it cannot run here, PID 1 is not systemd) make it live, and the
//     domain leaves networkd's link state and resolved;
//   - `nodedns netplan pin` pins the lease; after the reload the address stays, static, and a
//     carrier bounce (which made networkd ask dnsmasq again before the pin) brings no DHCP request.
func TestNetplanEndToEnd(t *testing.T) { nstest.Suites(t, testNetplanEndToEnd) }

func testNetplanEndToEnd(t *testing.T, s nstest.Suite) {
	s.Need(t, "apt-get install dnsmasq-base netplan.io systemd", "dnsmasq", "netplan", "networkctl", "/lib/systemd/systemd-networkd")
	bin := nstest.Build(t)
	srv, cli := nstest.New(t), nstest.NewWith(t, nstest.Options{Suite: s})
	srvIf, cliIf := nstest.Veth(t, srv, cli, "10.77.0.1/24", "10.77.0.2/24")
	cli.Run(t, "ip addr flush dev "+cliIf)

	requests := srv.StartDHCPServer(t, srvIf, nstest.DHCPOptions{Range: "10.77.0.50,10.77.0.99,255.255.255.0,1h",
		Router: "10.77.0.1", DNS: []string{"10.77.0.1"}, Domain: "example.org"}).Requests

	cli.Isolate(t)
	cli.SystemBus(t)
	withResolved := os.Getenv(nstest.ResolvedDirEnv) != ""
	if withResolved {
		cli.StartResolved(t)
	} else {
		t.Logf("no real systemd-resolved (%s unset): the resolved half is skipped; networkd's link state is checked instead", nstest.ResolvedDirEnv)
	}
	// Debian's networkd 252 defaults to UseDomains=no; Ubuntu's patched networkd (seed 001) takes
	// DHCP domains by default. The node's file asks for them explicitly to behave like Ubuntu, which
	// also shows that nodedns's later file wins over an explicit use-domains: true.
	must(t, os.WriteFile(cli.Path("/etc/netplan/50-cloud-init.yaml"),
		[]byte("network:\n  version: 2\n  ethernets:\n    "+cliIf+":\n      dhcp4: true\n      dhcp4-overrides: {use-domains: true}\n"), 0o600))
	cli.Run(t, "netplan generate")
	cli.StartNetworkd(t)

	ifindex := cli.IfIndex(t, cliIf)
	leaseFile := cli.Path("/run/systemd/netif/leases/" + ifindex)
	linkFile := cli.Path("/run/systemd/netif/links/" + ifindex)
	fileHas := nstest.FileHas
	// networkd 252 does not ask for option 119 unless told to (RequestOptions=), so dnsmasq hands
	// example.org out as option 15 domain-name, which networkd's UseDomains=yes searches just the same.
	// leasedAddr is the address of networkd's lease, "" while it has none. networkd 262 keeps its
	// lease in no file (docs/contract.md, "DHCP search domains"): there it is the link's
	// address with a DHCP lifetime, and the domain shows in the link state only (waited for below).
	leasedAddr := func() string {
		lease, _ := os.ReadFile(leaseFile)
		if m := regexp.MustCompile(`(?m)^ADDRESS=(\S+)`).FindSubmatch(lease); m != nil {
			return string(m[1])
		}
		return ""
	}
	leaseHasDomain := func() bool { return fileHas(leaseFile, "DOMAINNAME=example.org") }
	if s.Chrooted() {
		leaseHasDomain = func() bool { return leasedAddr() != "" }
		leasedAddr = func() string {
			o, _ := cli.Try("ip -4 -o addr show dev " + cliIf + " dynamic")
			if m := regexp.MustCompile(`inet (\S+)/`).FindStringSubmatch(o); m != nil {
				return m[1]
			}
			return ""
		}
	}
	nstest.WaitFor(t, 30*time.Second, "a DHCP lease with DOMAINNAME=example.org", leaseHasDomain)
	nstest.WaitFor(t, 15*time.Second, "networkd passing example.org to the link", func() bool {
		return fileHas(linkFile, "DOMAINS=example.org")
	})
	resolvedConf := cli.Path("/run/systemd/resolve/resolv.conf")
	if withResolved {
		nstest.WaitFor(t, 15*time.Second, "resolved searching example.org", func() bool { return fileHas(resolvedConf, "search example.org") })
	}
	leased := leasedAddr()

	// `networkctl reconfigure` is how this test asks "is DHCP still on?": networkd re-runs the link's
	// configuration, starting a fresh DHCP client if it has one, and dnsmasq logs the request. Shown
	// once here, while DHCP is on. (A carrier bounce would ask the same, but networkd 252 then races
	// the static default route against the kernel's prefix route on a veth: "Nexthop has invalid
	// gateway", link failed; seen here, not on the DHCP config.)
	reconfigure := func() { cli.Run(t, "networkctl reconfigure "+cliIf) }
	before := requests()
	reconfigure()
	nstest.WaitFor(t, 20*time.Second, "a DHCP request after networkctl reconfigure (DHCP on)", func() bool { return requests() > before })

	// Override.
	out, _ := cli.Try(bin + " apply")
	own := cli.Path("/etc/netplan/90-nodedns.yaml")
	if !fileHas(own, "      dhcp4-overrides:\n        use-domains: false\n") {
		data, _ := os.ReadFile(own)
		t.Fatalf("nodedns apply did not write the override:\n%s\napply printed:\n%s", data, out)
	}
	if strings.Contains(out, "netplan-apply") {
		t.Errorf("apply ran or planned netplan apply without netplan.apply: true:\n%s", out)
	}
	cli.Run(t, "netplan generate && networkctl reload")
	nstest.WaitFor(t, 20*time.Second, "example.org gone from networkd's link state", func() bool {
		return fileHas(linkFile, "DOMAINS=\n") || (!fileHas(linkFile, "DOMAINS=example.org") && fileHas(linkFile, "ADMIN_STATE=configured"))
	})
	if withResolved {
		nstest.WaitFor(t, 20*time.Second, "example.org gone from resolved", func() bool {
			data, err := os.ReadFile(resolvedConf)
			return err == nil && !strings.Contains(string(data), "example.org")
		})
	}

	// Pin, once the reconfigured DHCP client holds its lease again (pin refuses without one).
	nstest.WaitFor(t, 20*time.Second, "the lease and the DHCP default route back", func() bool {
		o, err := cli.Try("ip -4 route show default")
		return leasedAddr() == leased && err == nil && strings.Contains(o, "via 10.77.0.1")
	})
	out = cli.Run(t, bin+" netplan pin")
	if !fileHas(own, "dhcp4: false") || !fileHas(own, leased) {
		data, _ := os.ReadFile(own)
		t.Fatalf("netplan pin did not pin %s:\n%s\npin printed:\n%s", leased, data, out)
	}
	cli.Run(t, "netplan generate && networkctl reload")
	static := func() bool {
		o, err := cli.Try("ip -4 addr show dev " + cliIf)
		return err == nil && strings.Contains(o, leased) && strings.Contains(o, "valid_lft forever")
	}
	nstest.WaitFor(t, 20*time.Second, leased+" static on "+cliIf, static)
	time.Sleep(2 * time.Second) // let a release or late packet of the old client land before counting
	before = requests()
	reconfigure()
	time.Sleep(8 * time.Second)
	if n := requests(); n != before {
		t.Errorf("dnsmasq saw %d DHCP requests after the pin and networkctl reconfigure, want none", n-before)
	}
	nstest.WaitFor(t, 20*time.Second, leased+" still static after the reconfigure", static)
	nstest.WaitFor(t, 20*time.Second, "the pinned default route via 10.77.0.1", func() bool {
		o, err := cli.Try("ip -4 route show default")
		return err == nil && strings.Contains(o, "via 10.77.0.1 dev "+cliIf)
	})
}
