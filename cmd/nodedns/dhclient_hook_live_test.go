package main

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/testutil/nstest"
)

// dhclientNode is a copy of one of testdata/kubespray's dhclient trees with a real dhclient 4.4
// on the client end of a veth and dnsmasq on the other; dhclient-script is debianScript run by a
// chosen shell, in a directory of its own (cwd) so a command smuggled into a hook shows as a file.
type dhclientNode struct {
	t                        *testing.T
	cli                      *nstest.Sandbox
	work, root, cwd, cliIf   string
	conf, leaseFile, pidFile string
}

func newDhclientNode(t *testing.T, s nstest.Suite, tree string, o nstest.DHCPOptions) *dhclientNode {
	t.Helper()
	s.Need(t, "apt-get install dnsmasq-base isc-dhcp-client", "dnsmasq", "dhclient")
	srv := nstest.New(t)
	cli := nstest.NewWith(t, nstest.Options{UTSNamespace: true, Suite: s})
	srvIf, cliIf := nstest.Veth(t, srv, cli, "10.66.0.1/24", "10.66.1.2/24")
	srv.StartDHCPServer(t, srvIf, o)
	n := &dhclientNode{t: t, cli: cli, work: t.TempDir(), cliIf: cliIf}
	n.root = filepath.Join(n.work, "node")
	n.cwd = filepath.Join(n.work, "cwd")
	must(t, os.Mkdir(n.cwd, 0o755))
	must(t, os.Rename(copyTree(t, filepath.Join("testdata/kubespray", tree)), n.root))
	n.conf = filepath.Join(n.root, "etc/dhcp/dhclient.conf")
	n.leaseFile = filepath.Join(n.root, "var/lib/dhcp/dhclient."+cliIf+".leases")
	n.pidFile = filepath.Join(n.work, "dhclient.pid")
	return n
}

// start stops the running dhclient without releasing its lease and starts a fresh one (it reads
// dhclient.conf only when it starts), as after a reboot, with dhclient-script run by shell.
func (n *dhclientNode) start(confText, shell string) {
	n.t.Helper()
	must(n.t, os.WriteFile(n.conf, []byte(confText), 0o644))
	script := filepath.Join(n.work, "dhclient-script")
	body := strings.Replace(fmt.Sprintf(debianScript, n.root), "#!/bin/sh\n", "#!"+shell+"\ncd '"+n.cwd+"' || exit 1\n", 1)
	must(n.t, os.WriteFile(script, []byte(body), 0o755))
	n.cli.Run(n.t, fmt.Sprintf("dhclient -x -pf %[1]s 2>/dev/null; dhclient -1 -cf %[2]s -sf %[3]s -lf %[4]s -pf %[1]s %[5]s",
		n.pidFile, n.conf, script, n.leaseFile, n.cliIf))
}

// pwned lists every file a smuggled command made: anything in the script's directory, and any
// pwned-* file anywhere under the test's work directory.
func (n *dhclientNode) pwned() []string {
	var out []string
	_ = filepath.WalkDir(n.work, func(p string, d fs.DirEntry, err error) error {
		if err == nil && (strings.HasPrefix(d.Name(), "pwned") || filepath.Dir(p) == n.cwd) {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// The hostile names a rogue DHCP server offers (option 15 and option 119): command substitutions
// that a hook evaluating them would run as root, and one with a space, which would make such a hook
// a syntax error that stops the shell half-way.
const (
	hostileDomainName   = "x.example$(echo>pwned-dollar)`echo>pwned-tick`"
	hostileDomainSearch = "y.example$(echo >pwned-search)"
)

// TestDhclientHookHostileOffer: dnsmasq offers hostile domain names, a real dhclient writes them to
// its lease, and nodedns's hook, installed by apply and sourced by dash and by bash as Debian's
// dhclient-script sources it, runs nothing and still does its job: after each renewal resolv.conf
// holds exactly what apply wrote (the offered server, no search line), and check names the lease
// and the value, escaped, as a hostile DHCP offer.
func TestDhclientHookHostileOffer(t *testing.T) { nstest.Suites(t, testDhclientHookHostileOffer) }

func testDhclientHookHostileOffer(t *testing.T, s nstest.Suite) {
	n := newDhclientNode(t, s, "dhclient", nstest.DHCPOptions{Range: "10.66.0.100,10.66.0.150,255.255.255.0,1h",
		Router: "10.66.0.1", DNS: []string{"10.66.0.53"},
		Options: []string{"option:domain-name," + hostileDomainName, "option:domain-search," + hostileDomainSearch}})
	must(t, os.Remove(filepath.Join(n.root, "var/lib/dhcp/dhclient.enp1s0.leases")))
	kubesprayConf := readFile(t, n.root, "/etc/dhcp/dhclient.conf")
	// Debian's dhclient.conf before kubespray (its block taken off the top): the offer reaches the
	// lease and dhclient-script unsuperseded.
	plainConf := kubesprayConf[strings.Index(kubesprayConf, "# Ansible entries END\n")+len("# Ansible entries END\n"):]

	n.start(plainConf, "/bin/dash")
	lease := readFile(t, n.root, "/var/lib/dhcp/dhclient."+n.cliIf+".leases")
	if !strings.Contains(lease, "pwned-dollar") {
		t.Fatalf("dhclient did not write the hostile domain name to its lease (nothing to prove):\n%s", lease)
	}
	putFile(t, n.root, "/etc/resolv.conf", "nameserver 10.66.0.53\n")

	ap := nodedns(t, "--root", n.root, "apply")
	if ap.code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", ap.code, ap.stdout, ap.stderr)
	}
	hook := readFile(t, n.root, node.DhclientHook)
	notContains(t, "the hook", hook, "pwned")
	applied := readFile(t, n.root, "/etc/resolv.conf")
	contains(t, "resolv.conf after apply", applied, "nameserver 10.66.0.53\n")

	rep, _ := checkReport(t, n.root)
	r := byID(rep, "dhcp.search")
	want := fmt.Sprintf("hostile DHCP offer: /var/lib/dhcp/dhclient.%s.leases holds the domain %q", n.cliIf, hostileDomainName)
	if r.Status != "problem" || !strings.Contains(r.Message, want) {
		t.Errorf("dhcp.search: %s %q, want a problem saying %q", r.Status, r.Message, want)
	}

	for _, shell := range []string{"/bin/dash", "/bin/bash"} {
		n.start(plainConf, shell)
		if p := n.pwned(); len(p) > 0 {
			t.Fatalf("%s sourcing the hook ran a command from the offer: %v", shell, p)
		}
		runs := readFile(t, n.work, "script-runs")
		if !strings.HasSuffix(runs, "REBOOT\n") && !strings.HasSuffix(runs, "BOUND\n") {
			t.Fatalf("%s: dhclient-script's last run: %q", shell, runs)
		}
		got := readFile(t, n.root, "/etc/resolv.conf")
		if got != applied {
			t.Errorf("%s: the renewal changed what apply wrote:\n--- apply\n%s--- renewal\n%s", shell, applied, got)
		}
		if h := readFile(t, n.root, node.DhclientHook); h != hook {
			t.Errorf("%s: the hook changed", shell)
		}
	}
	// The hook does the same with the values in its own variables (dhclient 4.4.3 drops a suspect
	// option from the script's environment; another client may not): Debian's script with the offer
	// put back, sourced by both shells.
	for _, shell := range []string{"/bin/dash", "/bin/bash"} {
		cmd := exec.Command(shell, "-c", `reason=RENEW; interface=enp1s0; . "$1"`, "dhclient-script", filepath.Join(n.work, "dhclient-script"))
		cmd.Dir = n.cwd
		cmd.Env = append(os.Environ(), "new_domain_name_servers=169.254.25.10 10.66.0.53", "new_domain_name="+hostileDomainName,
			"new_domain_search="+hostileDomainSearch+" "+hostileDomainName, "old_domain_name="+hostileDomainName)
		if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
			t.Errorf("%s: %v\n%s", shell, err, out)
		}
		if p := n.pwned(); len(p) > 0 {
			t.Fatalf("%s sourcing the hook with the offer in its variables ran a command: %v", shell, p)
		}
		if got := readFile(t, n.root, "/etc/resolv.conf"); got != applied {
			t.Errorf("%s, offer in the variables: resolv.conf\n%s\nwant\n%s", shell, got, applied)
		}
	}
}

// TestKubesprayDhclientReboot: kubespray's dhclient tree, on a node whose dhclient took its lease
// before kubespray ran (the newest lease block offers example.org), apply, then a real dhclient
// REBOOT with kubespray's dhclient.conf: dhclient records the superseded domain-search in the newest
// block, the offered domain leaves it, and still plan has nothing to change and the daemon, started
// on the node, writes nothing (docs/contract.md "The dhclient hook": its bytes never follow the
// lease history).
func TestKubesprayDhclientReboot(t *testing.T) { nstest.Suites(t, testKubesprayDhclientReboot) }

func testKubesprayDhclientReboot(t *testing.T, s nstest.Suite) {
	n := newDhclientNode(t, s, "dhclient", nstest.DHCPOptions{Range: "10.66.0.100,10.66.0.150,255.255.255.0,1h",
		Router: "10.66.0.1", DNS: []string{"10.66.0.53"}, Domain: "example.org"})
	must(t, os.Remove(filepath.Join(n.root, "var/lib/dhcp/dhclient.enp1s0.leases")))
	kubesprayConf := readFile(t, n.root, "/etc/dhcp/dhclient.conf")
	kubesprayResolv := readFile(t, n.root, "/etc/resolv.conf")
	plainConf := kubesprayConf[strings.Index(kubesprayConf, "# Ansible entries END\n")+len("# Ansible entries END\n"):]
	leasePath := "/var/lib/dhcp/dhclient." + n.cliIf + ".leases"

	// Booted before kubespray; kubespray then writes dhclient.conf and resolv.conf (dhclient keeps
	// running with what it read at its start).
	n.start(plainConf, "/bin/sh")
	must(t, os.WriteFile(n.conf, []byte(kubesprayConf), 0o644))
	putFile(t, n.root, "/etc/resolv.conf", kubesprayResolv)
	if l := readFile(t, n.root, leasePath); !strings.Contains(l, `option domain-name "example.org"`) {
		t.Fatalf("the first lease does not hold the offered domain:\n%s", l)
	}

	ap := nodedns(t, "--root", n.root, "apply")
	if ap.code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", ap.code, ap.stdout, ap.stderr)
	}
	hook := readFile(t, n.root, node.DhclientHook)
	applied := readFile(t, n.root, "/etc/resolv.conf")

	n.start(kubesprayConf, "/bin/sh")
	runs := readFile(t, n.work, "script-runs")
	if !strings.HasSuffix(runs, "REBOOT\n") {
		t.Fatalf("dhclient-script's runs %q: want a REBOOT (the lease's address asked again)", runs)
	}
	l := readFile(t, n.root, leasePath)
	if newest := l[strings.LastIndex(l, "lease {"):]; strings.Contains(newest, "example.org") || !strings.Contains(newest, "svc.cluster.local") {
		t.Fatalf("after the REBOOT the newest lease block still shows the offered domain, or not the supersede (nothing to prove):\n%s", l)
	}
	if got := readFile(t, n.root, "/etc/resolv.conf"); got != applied {
		t.Errorf("the REBOOT changed what apply wrote:\n--- apply\n%s--- reboot\n%s", applied, got)
	}
	if h := readFile(t, n.root, node.DhclientHook); h != hook {
		t.Errorf("the REBOOT changed the hook")
	}

	pl := nodedns(t, "--root", n.root, "plan", "--detailed-exitcode")
	if pl.code != 0 || !strings.Contains(pl.stdout, "nodedns: nothing to change") {
		t.Errorf("plan after the REBOOT: exit %d, want 0 and nothing to change\n%s%s", pl.code, pl.stdout, pl.stderr)
	}

	before := treeState(t, n.root)
	d := startRun(t, n.root)
	if code := d.stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("nodedns run: exit %d", code)
	}
	after := treeState(t, n.root)
	for p, v := range after {
		if before[p] != v {
			t.Errorf("nodedns run wrote %s", p)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			t.Errorf("nodedns run removed %s", p)
		}
	}
	if strings.Contains(d.log.String(), node.DhclientHook) {
		t.Errorf("the daemon's log names the hook:\n%s", d.log.String())
	}
}
