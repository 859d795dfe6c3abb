package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/nodedns/nodedns/internal/testutil/golden"
	"github.com/nodedns/nodedns/probes"
)

// manageConfig writes a nodedns config with kubelet.manage on (and extra lines) and returns its path.
func manageConfig(t *testing.T, extra string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	must(t, os.WriteFile(p, []byte("kubelet:\n  manage: true\n"+extra), 0o644))
	return p
}

// planOf runs plan -o json.
func planOf(t *testing.T, args ...string) (planJSON, result) {
	t.Helper()
	r := nodedns(t, append(args, "plan", "-o", "json", "--full")...)
	var p planJSON
	if err := json.Unmarshal([]byte(r.stdout), &p); err != nil {
		t.Fatalf("plan -o json: %v\n%s%s", err, r.stdout, r.stderr)
	}
	return p, r
}

// changedFiles lists the files of after that are new or differ from before, nodedns's state left out.
func changedFiles(before, after map[string]string) []string {
	var out []string
	for p, sum := range after {
		if before[p] != sum {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// TestKubeletManageShapes (docs/contract.md "kubelet.manage"): with kubelet.manage on, apply points
// the configuration kubelet really reads at nodedns's file, in each shape's own way, and changes
// exactly that one file (its content is the golden file testdata/kubelet-manage/TREE.golden); check
// then says the file kubelet reads after its restart is nodedns's, but not ok while the restart is
// owed; a second plan has only the named restart step; restore gives the tree back byte for byte.
func TestKubeletManageShapes(t *testing.T) {
	const ours = "/var/lib/nodedns/resolv.conf"
	tests := []struct {
		tree string
		file string // the one file apply changes
		unit string
	}{
		// kubespray: resolvConf in kubelet-config.yaml (named by --config in kubelet.env).
		{tree: "kubespray/resolved", file: "etc/kubernetes/kubelet-config.yaml", unit: "kubelet.service"},
		{tree: "kubespray/dhclient", file: "etc/kubernetes/kubelet-config.yaml", unit: "kubelet.service"},
		// kubeadm: resolvConf in /var/lib/kubelet/config.yaml.
		{tree: "kubelet/kubeadm-healthy", file: "var/lib/kubelet/config.yaml", unit: "kubelet.service"},
		// kubeadm with KUBELET_EXTRA_ARGS=--resolv-conf=... in /etc/sysconfig/kubelet: the flag wins.
		{tree: "kubelet/kubeadm-looping", file: "etc/sysconfig/kubelet", unit: "kubelet.service"},
		// kubeadm with --config-dir: nodedns's drop-in, sorting after 20-dns/.
		{tree: "kubelet/kubeadm-configdir-looping", file: "etc/kubernetes/kubelet.conf.d/zz-nodedns.conf", unit: "kubelet.service"},
		{tree: "kubelet/kubeadm-configdir-healthy", file: "etc/kubernetes/kubelet.conf.d/zz-nodedns.conf", unit: "kubelet.service"},
		// RKE2: its kubelet-arg resolv-conf= entry; with none, resolv-conf: over its own choice.
		{tree: "kubelet/rke2-looping", file: "etc/rancher/rke2/config.yaml", unit: "rke2-agent.service"},
		{tree: "kubelet/rke2-healthy", file: "etc/rancher/rke2/config.yaml", unit: "rke2-agent.service"},
		// k3s: K3S_RESOLV_CONF in the unit's environment file; with none, resolv-conf: in config.yaml.
		{tree: "kubelet/k3s-looping", file: "etc/systemd/system/k3s.service.env", unit: "k3s.service"},
		{tree: "kubelet/k3s-healthy", file: "etc/rancher/k3s/config.yaml", unit: "k3s.service"},
		// k3s with resolv-conf: in a config.yaml.d drop-in ending .YAML (k3s reads it): that drop-in.
		{tree: "kubelet/k3s-dropin-uppercase", file: "etc/rancher/k3s/config.yaml.d/50-dns.YAML", unit: "k3s.service"},
	}
	for _, tc := range tests {
		t.Run(tc.tree, func(t *testing.T) {
			cfg := manageConfig(t, "")
			root := copyTree(t, filepath.Join("testdata", tc.tree))
			orig := treeState(t, root)

			ap := nodedns(t, "--config", cfg, "--root", root, "apply")
			if ap.code != 0 {
				t.Fatalf("apply: exit %d\n%s%s", ap.code, ap.stdout, ap.stderr)
			}
			after := treeState(t, root)
			var shape []string
			for _, p := range changedFiles(orig, after) {
				if orig[p] != "" || strings.HasPrefix(p, "etc/kubernetes/") || strings.HasPrefix(p, "etc/rancher/") {
					shape = append(shape, p)
				}
			}
			var others []string
			for _, p := range shape {
				if p != tc.file && p != "etc/resolv.conf" {
					others = append(others, p)
				}
			}
			if len(others) > 0 || !strings.Contains(strings.Join(shape, " "), tc.file) {
				t.Errorf("apply changed %v; want %s (and nothing else the shape owns)", shape, tc.file)
			}
			got := readFile(t, root, tc.file)
			golden.Check(t, filepath.Join("testdata/kubelet-manage", strings.ReplaceAll(tc.tree, "/", "-")+".golden"), []byte(got))
			if !strings.Contains(got, ours) {
				t.Errorf("%s does not name %s:\n%s", tc.file, ours, got)
			}

			// check: the file kubelet reads after its restart is nodedns's, but the running kubelet
			// still has the old one: not ok, with the restart as the hint.
			kc := byID(nodeReportWith(t, cfg, root), "kubelet.resolvconf")
			restart := "`systemctl restart " + tc.unit + "`"
			if kc.Status != probes.Problem || !strings.HasPrefix(kc.Message, "kubelet's resolvConf "+ours) || !strings.Contains(kc.Hint, restart) {
				t.Errorf("kubelet.resolvconf after apply: %s %q hint %q; want a problem on %s until %s", kc.Status, kc.Message, kc.Hint, ours, restart)
			}
			contains(t, "kubelet.resolvconf's message", kc.Message, "still reads the resolv.conf it started with")

			// A second plan: nothing to change, act on or block; one pending step, the restart.
			pl, r := planOf(t, "--config", cfg, "--root", root)
			if len(pl.Changes) != 0 || len(pl.Actions) != 0 || len(pl.Blocked) != 0 {
				t.Errorf("second plan is not empty:\n%s", r.stdout)
			}
			// The steps of the rest of the node (a resolved restart under --root, `netplan apply`)
			// are the same without kubelet.manage: only the restart is kubelet.manage's.
			off, _ := planOf(t, "--root", root)
			var pending []string
			for _, n := range pl.Notes {
				if strings.HasPrefix(n, "pending: ") && !slices.Contains(off.Notes, n) {
					pending = append(pending, n)
				}
			}
			if len(pending) != 1 || !strings.HasPrefix(pending[0], "pending: "+tc.unit+": "+restart) {
				t.Errorf("second plan's pending steps of kubelet.manage: %q; want only %s", pending, restart)
			}

			// kubelet.restart: the restart is the plan's action instead (carried out only live).
			rcfg := manageConfig(t, "  restart: true\n")
			pl, r = planOf(t, "--config", rcfg, "--root", root)
			if len(pl.Actions) != 1 || pl.Actions[0].Kind != "restart-kubelet" || pl.Actions[0].Target != tc.unit || len(pl.Changes) != 0 {
				t.Errorf("plan with kubelet.restart: want only the restart of %s:\n%s", tc.unit, r.stdout)
			}

			if rs := nodedns(t, "--config", cfg, "--root", root, "restore"); rs.code != 0 {
				t.Fatalf("restore: exit %d\n%s%s", rs.code, rs.stdout, rs.stderr)
			}
			back := treeState(t, root)
			if diff := changedFiles(orig, back); len(diff) > 0 || len(back) != len(orig) {
				t.Errorf("restore did not give the tree back: %v differ; %d files, had %d", diff, len(back), len(orig))
			}
		})
	}
}

// nodeReportWith runs check -o json with a config.
func nodeReportWith(t *testing.T, cfg, root string) probes.Report {
	t.Helper()
	r := nodedns(t, "--config", cfg, "--root", root, "check", "-o", "json")
	var rep probes.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("check -o json: %v\n%s%s", err, r.stdout, r.stderr)
	}
	return rep
}

// TestKubeletManageOff: with kubelet.manage false (the default) apply changes nothing in kubelet's
// configuration on any shape, and the pending step still names how to point kubelet by hand.
func TestKubeletManageOff(t *testing.T) {
	for _, tree := range []string{"kubespray/dhclient", "kubelet/kubeadm-looping", "kubelet/rke2-looping", "kubelet/k3s-looping", "kubelet/kubeadm-configdir-looping"} {
		t.Run(tree, func(t *testing.T) {
			root := copyTree(t, filepath.Join("testdata", tree))
			orig := treeState(t, root)
			if ap := nodedns(t, "--root", root, "apply"); ap.code != 0 {
				t.Fatalf("apply: exit %d\n%s%s", ap.code, ap.stdout, ap.stderr)
			}
			for _, p := range changedFiles(orig, treeState(t, root)) {
				for _, o := range []string{"etc/kubernetes", "etc/rancher", "var/lib/kubelet", "etc/sysconfig", "etc/systemd/system/k3s.service.env"} {
					if p == o || strings.HasPrefix(p, o+"/") {
						t.Errorf("apply with kubelet.manage off changed %s", p)
					}
				}
			}
			if _, err := os.Stat(filepath.Join(root, "var/lib/nodedns/kubelet-restart.json")); err == nil {
				t.Error("apply with kubelet.manage off wrote the kubelet restart record")
			}
		})
	}
}

// TestKubeletManageBlocked: a --resolv-conf written in the unit's ExecStart= is not edited: the
// plan blocks it with a reason naming the unit file and line, and apply changes nothing of kubelet's.
func TestKubeletManageBlocked(t *testing.T) {
	root := copyTree(t, "testdata/kubelet/kubeadm-healthy")
	dropIn := "etc/systemd/system/kubelet.service.d/20-resolv.conf"
	must(t, os.MkdirAll(filepath.Join(root, filepath.Dir(dropIn)), 0o755))
	must(t, os.WriteFile(filepath.Join(root, dropIn), []byte("[Service]\nExecStart=\nExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS --resolv-conf=/etc/resolv.conf\n"), 0o644))
	cfg := manageConfig(t, "")
	orig := treeState(t, root)
	pl, r := planOf(t, "--config", cfg, "--root", root)
	if r.code != 1 {
		t.Errorf("plan: exit %d, want 1 (blocked)", r.code)
	}
	found := false
	for _, b := range pl.Blocked {
		if b.Target == "/"+dropIn {
			found = true
			contains(t, "the blocked reason", b.Reason, "written in the ExecStart= of kubelet.service (/"+dropIn+":3)")
			contains(t, "the blocked reason", b.Reason, "set --resolv-conf=/var/lib/nodedns/resolv.conf there")
		}
	}
	if !found {
		t.Errorf("plan does not block %s:\n%s", dropIn, r.stdout)
	}
	if ap := nodedns(t, "--config", cfg, "--root", root, "apply"); ap.code != 1 {
		t.Errorf("apply: exit %d, want 1 (blocked)\n%s%s", ap.code, ap.stdout, ap.stderr)
	}
	for _, p := range changedFiles(orig, treeState(t, root)) {
		if strings.HasPrefix(p, "var/lib/kubelet") || strings.HasPrefix(p, "etc/systemd") || strings.HasPrefix(p, "usr/") {
			t.Errorf("apply changed %s although kubelet's flag is blocked", p)
		}
	}
}

// TestKubesprayReadmeKubeletManage tries packaging/kubespray/README.md's "Finishing the node in one
// play" as written: its role vars through the role's config template (Ansible), then apply on a
// kubespray node points kubelet-config.yaml at nodedns's file, and the plan restarts kubelet.service
// (an action: carried out on the live node, pending under --root).
func TestKubesprayReadmeKubeletManage(t *testing.T) {
	block := readmeBlock(t, readmeBlocks(t), "nodedns_kubelet_manage: true")
	var vars map[string]any
	if err := yaml.Unmarshal([]byte(dedent(block)), &vars); err != nil {
		t.Fatalf("the README's kubelet.manage snippet: %v", err)
	}
	_, config := ansibleRender(t, "{}\n", vars)
	for _, want := range []string{"kubelet:\n", "  manage: true\n", "  restart: true\n"} {
		contains(t, "the role's config", config, want)
	}
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	must(t, os.WriteFile(cfg, []byte(config), 0o644))
	root := copyTree(t, "testdata/kubespray/dhclient")
	orig := treeState(t, root)
	pl, r := planOf(t, "--config", cfg, "--root", root)
	var restart bool
	for _, a := range pl.Actions {
		restart = restart || (a.Kind == "restart-kubelet" && a.Target == "kubelet.service")
	}
	if !restart {
		t.Errorf("the plan with the README's role vars does not restart kubelet.service:\n%s", r.stdout)
	}
	if ap := nodedns(t, "--config", cfg, "--root", root, "apply"); ap.code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", ap.code, ap.stdout, ap.stderr)
	}
	contains(t, "kubelet-config.yaml", readFile(t, root, kubesprayKubeletConfig), "\nresolvConf: \"/var/lib/nodedns/resolv.conf\"\n")
	if rs := nodedns(t, "--config", cfg, "--root", root, "restore"); rs.code != 0 {
		t.Fatalf("restore: exit %d\n%s%s", rs.code, rs.stdout, rs.stderr)
	}
	if diff := treeDiff(orig, treeState(t, root)); diff != "" {
		t.Errorf("restore did not give back every byte:\n%s", diff)
	}
}
