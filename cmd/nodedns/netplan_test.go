package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNetplanRejected: a netplan tree that netplan itself rejects (networkd needs the same
// overrides for DHCPv4 and DHCPv6; our parser does not check that) blocks only the netplan change:
// apply exits 1 showing netplan's own error, writes no 90-nodedns.yaml, and still writes kubelet's
// resolv.conf. pin is refused the same way.
func TestNetplanRejected(t *testing.T) {
	if _, err := exec.LookPath("netplan"); err != nil {
		t.Skip("netplan is not installed (apt-get install --no-install-recommends netplan.io)")
	}
	root := t.TempDir()
	write := func(p, data string, mode os.FileMode) {
		must(t, os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755))
		must(t, os.WriteFile(filepath.Join(root, p), []byte(data), mode))
	}
	write("/etc/netplan/50-cloud-init.yaml", "network:\n  version: 2\n  ethernets:\n    eth0:\n      dhcp4: true\n      dhcp6: true\n      dhcp4-overrides: {route-metric: 100}\n      dhcp6-overrides: {route-metric: 200}\n", 0o600)
	write("/etc/resolv.conf", "nameserver 10.0.0.2\n", 0o644)
	write("/run/systemd/netif/leases/2", "ADDRESS=10.0.0.5\nNETMASK=255.255.255.0\nROUTER=10.0.0.1\nDNS=10.0.0.2\nDOMAINNAME=example.org\n", 0o644)
	write("/sys/class/net/eth0/ifindex", "2\n", 0o644)

	r := nodedns(t, "--root", root, "apply")
	if r.code != 1 {
		t.Errorf("apply: exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
	}
	contains(t, "apply output", r.stdout, "blocked /etc/netplan/90-nodedns.yaml: validate /etc/netplan/90-nodedns.yaml: netplan generate rejected the configuration: ERROR: eth0: networkd requires that route-metric has the same value in both dhcp4_overrides and dhcp6_overrides")
	if _, err := os.Stat(filepath.Join(root, "etc/netplan/90-nodedns.yaml")); err == nil {
		t.Errorf("90-nodedns.yaml written although netplan rejected the tree")
	}
	contains(t, "kubelet resolv.conf", readFile(t, root, "/var/lib/nodedns/resolv.conf"), "nameserver 10.0.0.2\n")

	// A position error comes back with netplan's file:line:col.
	write("/etc/netplan/50-cloud-init.yaml", "network:\n  version: 2\n  ethernets:\n    eth0:\n      dhcp4: true\n  vlans:\n    vlan7: {link: eth0}\n", 0o600)
	r = nodedns(t, "--root", root, "netplan", "pin", "--dry-run")
	if r.code != 1 || !strings.Contains(r.stderr, "/etc/netplan/90-nodedns.yaml: validate /etc/netplan/90-nodedns.yaml: netplan generate rejected the configuration: /etc/netplan/50-cloud-init.yaml:7:") {
		t.Errorf("pin on a tree netplan rejects: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(root, "etc/netplan/90-nodedns.yaml")); err == nil {
		t.Errorf("90-nodedns.yaml written although netplan rejected the tree")
	}
}

// TestNetplanPinCommand: --dry-run prints the file and netplan get's diff and writes nothing; the
// pin then writes exactly that file, says netplan apply did not run, and a second pin changes
// nothing.
func TestNetplanPinCommand(t *testing.T) {
	if _, err := exec.LookPath("netplan"); err != nil {
		t.Skip("netplan is not installed (apt-get install --no-install-recommends netplan.io)")
	}
	root := copyTree(t, filepath.Join("testdata/seeds", "001"))
	dry := nodedns(t, "--root", root, "netplan", "pin", "--dry-run")
	if dry.code != 0 {
		t.Fatalf("pin --dry-run: exit %d\n%s%s", dry.code, dry.stdout, dry.stderr)
	}
	for _, s := range []string{"dhcp4: false", "addresses: [192.168.1.21/24]", "routes: [{to: default, via: 192.168.1.1}]",
		"addresses: [192.168.1.1]", "+      dhcp4: false", "-      dhcp4: true"} {
		contains(t, "pin --dry-run", dry.stdout, s)
	}
	notContains(t, "pin --dry-run", dry.stdout, "example.org")
	if _, err := os.Stat(filepath.Join(root, "etc/netplan/90-nodedns.yaml")); err == nil {
		t.Fatalf("--dry-run wrote the file")
	}
	r := nodedns(t, "--root", root, "netplan", "pin")
	if r.code != 0 {
		t.Fatalf("pin: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	contains(t, "pin", r.stdout, "netplan apply not run")
	got := readFile(t, root, "/etc/netplan/90-nodedns.yaml")
	if !strings.Contains(dry.stdout, got) {
		t.Errorf("written file differs from the dry run:\n%s", got)
	}
	if fi, _ := os.Stat(filepath.Join(root, "etc/netplan/90-nodedns.yaml")); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	again := nodedns(t, "--root", root, "netplan", "pin")
	contains(t, "second pin", again.stdout, "nothing to change")
	// With the default mode a later apply keeps the pin, and the check sees static addressing.
	plan := nodedns(t, "--root", root, "plan")
	// No diff of the file (a pending `netplan apply` may still name it).
	notContains(t, "plan after pin", plan.stdout, "a/etc/netplan/90-nodedns.yaml")
	notContains(t, "plan after pin", plan.stdout, "b/etc/netplan/90-nodedns.yaml")
	rep, _ := checkReport(t, root)
	for _, c := range rep.Checks {
		if (c.ID == "addressing.static" || c.ID == "dhcp.search") && c.Status != "ok" {
			t.Errorf("%s after pin: %s %s", c.ID, c.Status, c.Message)
		}
	}
}
