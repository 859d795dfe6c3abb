package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodedns/nodedns/probes"
)

// The kubespray-shaped trees (testdata/kubespray/README.md): kubelet's config is
// /etc/kubernetes/kubelet-config.yaml, named by --config in /etc/kubernetes/kubelet.env, which
// kubelet.service reads; nodedns finds it with no config file of its own.
const (
	kubesprayKubeletConfig = "/etc/kubernetes/kubelet-config.yaml"
	kubesprayHow           = "--config in $KUBELET_ARGS (/etc/kubernetes/kubelet.env:6) of /etc/systemd/system/kubelet.service"
)

// TestKubesprayTrees: check, apply, a second plan and restore on nodes exactly as kubespray leaves
// them, with no nodedns config. check names kubelet-config.yaml and why; after apply the second
// plan changes nothing (the resolved node lists only steps apply cannot take under --root), no hint
// asks for an apply the plan would not make, and restore gives back every byte.
func TestKubesprayTrees(t *testing.T) {
	tests := []struct {
		tree string
		// problems left after apply, with the pending steps plan lists for them.
		after   []string
		pending []string
		want    map[string][]string // node path -> substrings after apply
		notWant map[string][]string
	}{
		{
			tree: "dhclient",
			want: map[string][]string{
				"/etc/resolv.conf":                         {"# Edited by nodedns", "# Ansible entries BEGIN\nnameserver 10.66.0.53\noptions ndots:2 timeout:2 attempts:2\n# Ansible entries END\n"},
				"/var/lib/nodedns/resolv.conf":             {"nameserver 10.66.0.53\n", "options ndots:2 timeout:2 attempts:2\n"},
				"/etc/dhcp/dhclient-enter-hooks.d/nodedns": {`nodedns_loop=' 169.254.25.10 169.254.20.10 '`, `nodedns_upstreams='10.66.0.53'`, `nodedns_cluster='cluster.local'`},
				"/var/lib/nodedns/dhcp-offered.json":       {`"enp1s0"`, `"10.66.0.53"`},
			},
			notWant: map[string][]string{
				"/etc/resolv.conf":             {"169.254.25.10", "cluster.local"},
				"/var/lib/nodedns/resolv.conf": {"169.254.25.10", "cluster.local", "example.org"},
			},
		},
		{
			tree: "dhclient-loop-only",
			want: map[string][]string{
				"/etc/resolv.conf":                         {"# Ansible entries BEGIN\nnameserver 10.66.0.53\noptions ndots:2 timeout:2 attempts:2\n"},
				"/var/lib/nodedns/resolv.conf":             {"nameserver 10.66.0.53\n"},
				"/etc/dhcp/dhclient-enter-hooks.d/nodedns": {`nodedns_upstreams='10.66.0.53'`},
				"/var/lib/nodedns/dhcp-offered.json":       {`"10.66.0.53"`, `"leaseFile": "/var/lib/dhcp/dhclient.enp1s0.leases"`},
			},
			notWant: map[string][]string{
				"/etc/resolv.conf":             {"169.254.25.10", "cluster.local"},
				"/var/lib/nodedns/resolv.conf": {"169.254.25.10"},
			},
		},
		{
			// kubelet reads resolved's uplink file (kube_resolv_conf of Ubuntu 22.04): until kubelet
			// is pointed at nodedns's file, resolved restarts and networkd drops the DHCP domain,
			// check reports it and plan lists those steps.
			tree:  "resolved",
			after: []string{"kubelet.resolvconf", "resolvconf.search", "resolved.dns", "resolved.domains"},
			pending: []string{
				"# pending systemd-resolved.service: restart it",
				"# pending /etc/netplan/90-nodedns.yaml: `netplan apply` (or a reboot), then the next DHCP renewal",
				"# pending /etc/kubernetes/kubelet-config.yaml: set resolvConf: /var/lib/nodedns/resolv.conf there (kubespray: kube_resolv_conf), then restart kubelet",
			},
			want: map[string][]string{
				"/var/lib/nodedns/resolv.conf":                 {"nameserver 10.66.0.53\n"},
				"/etc/systemd/resolved.conf.d/zz-nodedns.conf": {"[Resolve]\nDNS=\n", "kubespray.conf:2"},
			},
			notWant: map[string][]string{
				"/var/lib/nodedns/resolv.conf": {"169.254.25.10", "127.0.0.53", "example.org", "cluster.local"},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.tree, func(t *testing.T) {
			if tc.tree == "resolved" {
				needNetplan(t)
			}
			root := copyTree(t, filepath.Join("testdata/kubespray", tc.tree))
			orig := treeState(t, root)

			rep, r := checkReport(t, root)
			kc := byID(rep, "kubelet.resolvconf")
			if !strings.Contains(kc.Message, "kubelet's config "+kubesprayKubeletConfig+" ("+kubesprayHow+")") {
				t.Errorf("check does not name kubelet's config and why:\n%s", r.stdout)
			}
			if r.code != 1 {
				t.Errorf("check before apply: exit %d, want 1", r.code)
			}

			ap := nodedns(t, "--root", root, "apply")
			if ap.code != 0 {
				t.Fatalf("apply: exit %d\n%s%s", ap.code, ap.stdout, ap.stderr)
			}
			fileHas(t, root, tc.want, tc.notWant)

			again := nodedns(t, "--root", root, "plan", "--detailed-exitcode")
			if again.code != 0 {
				t.Errorf("second plan: exit %d, want 0\n%s%s", again.code, again.stdout, again.stderr)
			}
			if len(tc.pending) == 0 && !strings.Contains(again.stdout, "nodedns: nothing to change\n") {
				t.Errorf("second plan is not empty:\n%s", again.stdout)
			}
			for _, p := range tc.pending {
				contains(t, "second plan", again.stdout, p)
			}
			if len(tc.pending) > 0 {
				// JSON: pending steps are notes (the four arrays are the contract).
				js := nodedns(t, "--root", root, "plan", "-o", "json")
				contains(t, "plan -o json", js.stdout, `"pending: systemd-resolved.service: restart it`)
			}
			rep, r = checkReport(t, root)
			if diff := cmp.Diff(tc.after, problems(rep)); diff != "" {
				t.Errorf("problems after apply (-want +got):\n%s\n%s", diff, r.stdout)
			}
			assertHintsAgree(t, rep, again.stdout)

			rs := nodedns(t, "--root", root, "restore")
			if rs.code != 0 {
				t.Fatalf("restore: exit %d\n%s%s", rs.code, rs.stdout, rs.stderr)
			}
			if diff := cmp.Diff(orig, treeState(t, root)); diff != "" {
				t.Errorf("restore did not give back the original tree (-orig +now):\n%s", diff)
			}
			for _, p := range []string{"/var/lib/nodedns/resolv.conf", "/var/lib/nodedns/dhcp-offered.json"} {
				if _, err := os.Stat(filepath.Join(root, p)); err == nil {
					t.Errorf("restore left %s although kubelet does not use it", p)
				}
			}
		})
	}
}

// assertHintsAgree: after apply the plan changes nothing, so no hint may ask for `nodedns apply`
// (docs/contract.md "Check and plan agree").
func assertHintsAgree(t *testing.T, rep probes.Report, plan string) {
	t.Helper()
	for _, c := range rep.Checks {
		if strings.Contains(c.Hint, "nodedns apply") {
			t.Errorf("%s hints %q, but the plan has nothing for apply:\n%s", c.ID, c.Hint, plan)
		}
	}
}

// TestKubesprayResolvConfKept: with kubespray's kube_resolv_conf pointing kubelet at nodedns's file
// (found through kubelet.env, no nodedns config), restore keeps that file and gives back every other
// byte.
func TestKubesprayResolvConfKept(t *testing.T) {
	root := copyTree(t, "testdata/kubespray/dhclient")
	kc := readFile(t, root, kubesprayKubeletConfig)
	// What kubespray's kubelet-config.v1beta1.yaml.j2 renders with kube_resolv_conf set.
	kc = strings.Replace(kc, `resolvConf: "/etc/resolv.conf"`, `resolvConf: "/var/lib/nodedns/resolv.conf"`, 1)
	putFile(t, root, kubesprayKubeletConfig, kc)
	orig := treeState(t, root)

	rep, _ := checkReport(t, root)
	if c := byID(rep, "kubelet.resolvconf"); c.Status != probes.Problem || !strings.Contains(c.Message, "/var/lib/nodedns/resolv.conf is missing") {
		t.Errorf("before apply: %s %q", c.Status, c.Message)
	}
	if ap := nodedns(t, "--root", root, "apply"); ap.code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", ap.code, ap.stdout, ap.stderr)
	}
	if c := byID(nodeReport(t, root), "kubelet.resolvconf"); c.Status != probes.OK {
		t.Errorf("after apply: %s %q", c.Status, c.Message)
	}
	kept := readFile(t, root, "/var/lib/nodedns/resolv.conf")
	rs := nodedns(t, "--root", root, "restore")
	if rs.code != 0 {
		t.Fatalf("restore: exit %d\n%s%s", rs.code, rs.stdout, rs.stderr)
	}
	contains(t, "restore", rs.stdout, "kept /var/lib/nodedns/resolv.conf: kubelet's config "+kubesprayKubeletConfig+" ("+kubesprayHow+") still points resolvConf at it")
	if got := readFile(t, root, "/var/lib/nodedns/resolv.conf"); got != kept {
		t.Errorf("the kept file changed:\n%s", got)
	}
	if _, err := os.Stat(filepath.Join(root, "/var/lib/nodedns/dhcp-offered.json")); err == nil {
		t.Error("restore left nodedns's record of the DHCP offer")
	}
	if diff := cmp.Diff(orig, treeState(t, root)); diff != "" {
		t.Errorf("restore did not give back every other byte (-orig +now):\n%s", diff)
	}
}

func nodeReport(t *testing.T, root string) probes.Report {
	t.Helper()
	rep, _ := checkReport(t, root)
	return rep
}

// TestKubesprayLoopOnlyRenewals: kubespray's disable_host_nameservers node, whose dhclient.conf
// supersedes the servers with the cache alone. apply is not blocked and kubelet's file lists the
// DHCP server; after a renewal (one more superseded lease block) and after dhclient's second restart
// (the offer gone from the lease file), nodedns still knows it from its record: nothing to change.
// Without the record, the plan blocks naming the dhclient.conf line.
func TestKubesprayLoopOnlyRenewals(t *testing.T) {
	root := copyTree(t, "testdata/kubespray/dhclient-loop-only")
	ap := nodedns(t, "--root", root, "apply")
	if ap.code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", ap.code, ap.stdout, ap.stderr)
	}
	contains(t, "kubelet file", readFile(t, root, "/var/lib/nodedns/resolv.conf"), "nameserver 10.66.0.53\n")
	leaseFile := "/var/lib/dhcp/dhclient.enp1s0.leases"
	leases := readFile(t, root, leaseFile)
	superseded := leases[strings.LastIndex(leases, "lease {"):]

	// A renewal: dhclient appends one more superseded block.
	putFile(t, root, leaseFile, leases+superseded)
	plan := nodedns(t, "--root", root, "plan", "--detailed-exitcode")
	if plan.code != 0 || !strings.Contains(plan.stdout, "nothing to change") {
		t.Errorf("plan after a renewal: exit %d\n%s%s", plan.code, plan.stdout, plan.stderr)
	}

	// dhclient's second restart keeps one block per address, the last (superseded) one: the offer is
	// gone from the file (internal/leases/testdata/kubespray/loop-only-after-second-restart.leases).
	putFile(t, root, leaseFile, superseded)
	plan = nodedns(t, "--root", root, "plan", "--detailed-exitcode")
	if plan.code != 0 || !strings.Contains(plan.stdout, "nothing to change") {
		t.Errorf("plan after the second restart: exit %d\n%s%s", plan.code, plan.stdout, plan.stderr)
	}
	rep, r := checkReport(t, root)
	if c := byID(rep, "resolvconf.nameservers"); c.Status != probes.OK || !strings.Contains(c.Message, "10.66.0.53") {
		t.Errorf("resolvconf.nameservers after the second restart: %s %q\n%s", c.Status, c.Message, r.stdout)
	}
	contains(t, "kubelet file", readFile(t, root, "/var/lib/nodedns/resolv.conf"), "nameserver 10.66.0.53\n")

	// The same node without nodedns's record (it never ran before the second restart): blocked,
	// with the line and kubespray's variables.
	if err := os.Remove(filepath.Join(root, "var/lib/nodedns/dhcp-offered.json")); err != nil {
		t.Fatal(err)
	}
	putFile(t, root, "/etc/resolv.conf", "nameserver 169.254.25.10\n")
	plan = nodedns(t, "--root", root, "plan")
	if plan.code != 1 {
		t.Errorf("plan without the record: exit %d, want 1 (blocked)\n%s", plan.code, plan.stdout)
	}
	for _, s := range []string{"# blocked /etc/resolv.conf:", "/etc/dhcp/dhclient.conf:2 (`supersede domain-name-servers 169.254.25.10`)", "disable_host_nameservers"} {
		contains(t, "plan without the record", plan.stdout, s)
	}
	// check agrees: resolvconf.loop's hint is the block's reason, never "run nodedns apply".
	rep, r = checkReport(t, root)
	c := byID(rep, "resolvconf.loop")
	if c.Status != probes.Problem || !strings.Contains(c.Hint, "nodedns leaves /etc/resolv.conf as it is") || strings.Contains(c.Hint, "nodedns apply") {
		t.Errorf("resolvconf.loop with /etc/resolv.conf blocked: %s %q (hint %q)\n%s", c.Status, c.Message, c.Hint, r.stdout)
	}
	contains(t, "resolvconf.loop", c.Message, "persistent source: /etc/dhcp/dhclient.conf:2")
}

// TestKubeletConfigBroken: a malformed or unreadable kubelet-config.yaml (found through kubelet.env)
// makes kubelet.resolvconf unknown naming the file, check exits non-zero, and apply writes nothing:
// the broken file's clusterDNS 169.254.99.99 is a cache address nodedns cannot see, and a hook or
// kubelet file written without it would loop (docs/contract.md, invariant 5).
func TestKubeletConfigBroken(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, path string)
		say   string
	}{
		{"malformed", func(t *testing.T, p string) {
			must(t, os.WriteFile(p, []byte("kind: KubeletConfiguration\nclusterDNS:\n- 169.254.99.99\n  resolvConf: /etc/resolv.conf\n"), 0o600))
		}, kubesprayKubeletConfig + ":4: YAML: mapping values are not allowed in this context"},
		{"unreadable", func(t *testing.T, p string) {
			must(t, os.Remove(p))
			must(t, syscall.Mkfifo(p, 0o600))
		}, "read " + kubesprayKubeletConfig + ": not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := copyTree(t, "testdata/kubespray/dhclient")
			putFile(t, root, "/etc/resolv.conf", "nameserver 169.254.99.99\nnameserver 10.66.0.53\n")
			tc.setup(t, filepath.Join(root, kubesprayKubeletConfig))
			orig := treeState(t, root)

			rep, r := checkReport(t, root)
			c := byID(rep, "kubelet.resolvconf")
			if c.Status != probes.Unknown || !strings.Contains(c.Message, tc.say) {
				t.Errorf("kubelet.resolvconf: %s %q, want unknown saying %q", c.Status, c.Message, tc.say)
			}
			if r.code == 0 {
				t.Errorf("check exited 0:\n%s", r.stdout)
			}
			ap := nodedns(t, "--root", root, "apply")
			if ap.code != 1 {
				t.Errorf("apply: exit %d, want 1 (blocked)\n%s%s", ap.code, ap.stdout, ap.stderr)
			}
			for _, target := range []string{"/var/lib/nodedns/resolv.conf", "/etc/resolv.conf", "/etc/dhcp/dhclient-enter-hooks.d/nodedns"} {
				contains(t, "apply", ap.stdout, "blocked "+target+": kubelet's config "+kubesprayKubeletConfig)
			}
			if diff := cmp.Diff(orig, treeState(t, root)); diff != "" {
				t.Errorf("apply changed the node (-before +after):\n%s", diff)
			}
			if _, err := os.Stat(filepath.Join(root, "var/lib/nodedns/resolv.conf")); err == nil {
				t.Error("apply wrote the kubelet file")
			}
		})
	}
}

// TestKubesprayNetworkManagerKubelet: on the NetworkManager tree too, kubelet's config is found
// through kubelet.env (the rest of that node is NetworkManager's work).
func TestKubesprayNetworkManagerKubelet(t *testing.T) {
	rep, r := checkReport(t, copyTree(t, "testdata/kubespray/networkmanager"))
	if c := byID(rep, "kubelet.resolvconf"); !strings.Contains(c.Message, "kubelet's config "+kubesprayKubeletConfig+" ("+kubesprayHow+")") {
		t.Errorf("kubelet.resolvconf: %q\n%s", c.Message, r.stdout)
	}
}

// needNetplan skips a node with netplan files when netplan is not installed: nodedns keeps no
// netplan file netplan has not validated, so the override would be blocked.
func needNetplan(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("netplan"); err != nil {
		t.Skip("netplan is not installed (apt-get install --no-install-recommends netplan.io)")
	}
}

// TestKubesprayDaemon: `nodedns run` on the loop-only node reaches apply's fixed point, holds it
// when dhclient-script (without nodedns's hook) writes kubespray's resolv.conf back and dhclient
// trims its lease history, and follows an edit of kubelet-config.yaml (found through kubelet.env,
// watched): a new clusterDNS cache address leaves /etc/resolv.conf.
func TestKubesprayDaemon(t *testing.T) {
	root := copyTree(t, "testdata/kubespray/dhclient-loop-only")
	p := startRun(t, root)
	fixed := func() bool {
		rc := getFile(root, "/etc/resolv.conf")
		return strings.Contains(rc, "nameserver 10.66.0.53\n") && !strings.Contains(rc, "169.254.25.10") && !strings.Contains(rc, "cluster.local") &&
			strings.Contains(getFile(root, "/var/lib/nodedns/dhcp-offered.json"), "10.66.0.53")
	}
	waitUntil(t, "apply's fixed point", fixed)
	applied := getFile(root, "/etc/resolv.conf")

	// dhclient's second restart: only superseded blocks left; dhclient-script as Debian ships it
	// rewrites resolv.conf with the superseded values.
	leases := getFile(root, "/var/lib/dhcp/dhclient.enp1s0.leases")
	putFile(t, root, "/var/lib/dhcp/dhclient.enp1s0.leases", leases[strings.LastIndex(leases, "lease {"):])
	putFile(t, root, "/etc/resolv.conf", "domain cluster.local\nsearch cluster.local default.svc.cluster.local. svc.cluster.local.\nnameserver 169.254.25.10\n")
	waitUntil(t, "the loop and the cluster domains out again", func() bool {
		rc := getFile(root, "/etc/resolv.conf")
		return strings.Contains(rc, "nameserver 10.66.0.53\n") && !strings.Contains(rc, "169.254.25.10") && !strings.Contains(rc, "cluster.local")
	})

	// kubelet's config gains a cache address: its watch alone brings it into the hook's loop list
	// (the resync is minutes away); then a line in resolv.conf listing it goes.
	kc := getFile(root, kubesprayKubeletConfig)
	putFile(t, root, kubesprayKubeletConfig, strings.Replace(kc, "clusterDNS:\n- 169.254.25.10\n", "clusterDNS:\n- 169.254.25.10\n- 169.254.99.99\n", 1))
	waitUntil(t, "169.254.99.99 in the hook's loop list", func() bool {
		return strings.Contains(getFile(root, "/etc/dhcp/dhclient-enter-hooks.d/nodedns"), "169.254.99.99")
	})
	putFile(t, root, "/etc/resolv.conf", applied+"nameserver 169.254.99.99\n")
	waitUntil(t, "169.254.99.99 out of /etc/resolv.conf", func() bool {
		rc := getFile(root, "/etc/resolv.conf")
		return strings.Contains(rc, "nameserver 10.66.0.53") && !strings.Contains(rc, "169.254.99.99")
	})
	if code := p.stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
	if pl := nodedns(t, "--root", root, "plan", "--detailed-exitcode"); pl.code != 0 {
		t.Errorf("plan after the daemon: exit %d\n%s%s", pl.code, pl.stdout, pl.stderr)
	}
}
