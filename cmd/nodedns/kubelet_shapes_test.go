package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodedns/nodedns/probes"
)

// TestKubeletShapes: nodes as kubeadm, RKE2 and k3s leave them (testdata/kubelet/README.md names the
// upstream file each follows), healthy and looping. check --root names the file kubelet really
// reads, the resolv.conf it gets and why, and the unit that starts kubelet; boot.persistence wants
// nodedns ordered before that unit; apply writes nothing the shape owns and restore gives every
// byte back.
func TestKubeletShapes(t *testing.T) {
	const (
		uplink = "/run/systemd/resolve/resolv.conf"
		stub   = "/etc/resolv.conf"
	)
	tests := []struct {
		tree    string
		resolv  string   // the resolv.conf kubelet gets
		message []string // in kubelet.resolvconf's message: the file and why
		hint    string   // in its hint (looping trees)
		unit    string   // the unit that starts kubelet
		owned   []string // the shape's own files: apply never touches them
	}{
		{tree: "kubeadm-healthy", resolv: uplink, unit: "kubelet.service",
			message: []string{"kubelet's config /var/lib/kubelet/config.yaml (--config in $KUBELET_CONFIG_ARGS (/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf:4) of /usr/lib/systemd/system/kubelet.service)"},
			hint:    "/var/lib/kubelet/config.yaml: set resolvConf: /var/lib/nodedns/resolv.conf there and in kubeadm's KubeletConfiguration"},
		{tree: "kubeadm-looping", resolv: stub, unit: "kubelet.service",
			message: []string{"(--resolv-conf in $KUBELET_EXTRA_ARGS (/etc/sysconfig/kubelet:1) of /usr/lib/systemd/system/kubelet.service)", "kubelet's config /var/lib/kubelet/config.yaml"},
			hint:    "set --resolv-conf=/var/lib/nodedns/resolv.conf where it is set"},
		{tree: "kubeadm-configdir-healthy", resolv: uplink, unit: "kubelet.service",
			message: []string{"(/etc/kubernetes/kubelet.conf.d/20-dns/50-uplink.conf)"}},
		{tree: "kubeadm-configdir-looping", resolv: stub, unit: "kubelet.service",
			message: []string{"(/etc/kubernetes/kubelet.conf.d/20-dns/50-stub.conf)"},
			hint:    "/etc/kubernetes/kubelet.conf.d: set resolvConf: /var/lib/nodedns/resolv.conf in a drop-in there"},
		{tree: "rke2-healthy", resolv: uplink, unit: "rke2-agent.service",
			message: []string{"(rke2's own choice: /run/systemd/resolve/resolv.conf lists only global unicast nameservers (/etc/resolv.conf lists 127.0.0.53))",
				"rke2-agent.service runs kubelet (as rke2's child process) with --config-dir /var/lib/rancher/rke2/agent/etc/kubelet.conf.d"}},
		{tree: "rke2-looping", resolv: stub, unit: "rke2-agent.service",
			message: []string{"(kubelet-arg resolv-conf (/etc/rancher/rke2/config.yaml:5))"},
			hint:    "/etc/rancher/rke2/config.yaml: add `kubelet-arg: [resolv-conf=/var/lib/nodedns/resolv.conf]` there"},
		{tree: "k3s-healthy", resolv: uplink, unit: "k3s.service",
			message: []string{"(k3s's own choice: /run/systemd/resolve/resolv.conf", "k3s.service runs kubelet (inside the k3s process)"}},
		{tree: "k3s-dropin-uppercase", resolv: stub, unit: "k3s.service",
			message: []string{"(resolv-conf (/etc/rancher/k3s/config.yaml.d/50-dns.YAML:2))"},
			hint:    "/etc/rancher/k3s/config.yaml"},
		{tree: "k3s-looping", resolv: stub, unit: "k3s.service",
			message: []string{"(K3S_RESOLV_CONF (/etc/systemd/system/k3s.service.env:2) of k3s.service)"},
			hint:    "/etc/rancher/k3s/config.yaml: add `kubelet-arg: [resolv-conf=/var/lib/nodedns/resolv.conf]` there (k3s passes it to kubelet over its own choice), then restart k3s.service"},
	}
	owned := []string{"etc/rancher", "var/lib/rancher", "var/lib/kubelet", "etc/kubernetes", "etc/sysconfig", "usr/lib/systemd", "usr/local/lib/systemd", "etc/systemd/system/k3s.service"}
	for _, tc := range tests {
		t.Run(tc.tree, func(t *testing.T) {
			root := copyTree(t, filepath.Join("testdata/kubelet", tc.tree))
			orig := treeState(t, root)

			rep, r := checkReport(t, root)
			kc := byID(rep, "kubelet.resolvconf")
			wantStatus := probes.OK
			if tc.resolv == stub {
				wantStatus = probes.Problem
			}
			if kc.Status != wantStatus || !strings.HasPrefix(kc.Message, "kubelet's resolvConf "+tc.resolv+" ") {
				t.Errorf("kubelet.resolvconf: %s %q, want %s on %s", kc.Status, kc.Message, wantStatus, tc.resolv)
			}
			for _, m := range tc.message {
				contains(t, "kubelet.resolvconf's message", kc.Message, m)
			}
			if tc.hint != "" {
				contains(t, "kubelet.resolvconf's hint", kc.Hint, tc.hint)
			}
			bp := byID(rep, "boot.persistence")
			if bp.Status != probes.OK || !strings.Contains(bp.Message, "ordered before "+tc.unit) {
				t.Errorf("boot.persistence with the packaged unit: %s %q, want ok before %s\n%s", bp.Status, bp.Message, tc.unit, r.stdout)
			}

			// A unit ordered only before kubelet.service: right on kubeadm, a problem where another
			// unit starts kubelet.
			unit := filepath.Join(root, "lib/systemd/system/nodedns.service")
			data, err := os.ReadFile(unit)
			must(t, err)
			old := strings.Replace(string(data), "Before=kubelet.service rke2-server.service rke2-agent.service k3s.service k3s-agent.service\n", "Before=kubelet.service\n", 1)
			if old == string(data) {
				t.Fatal("the packaged unit no longer has the Before= line this test edits")
			}
			must(t, os.WriteFile(unit, []byte(old), 0o644))
			bp = byID(nodeReport(t, root), "boot.persistence")
			if tc.unit == "kubelet.service" {
				if bp.Status != probes.OK {
					t.Errorf("boot.persistence, Before=kubelet.service on kubeadm: %s %q", bp.Status, bp.Message)
				}
			} else if bp.Status != probes.Problem || !strings.Contains(bp.Message, "is not ordered Before="+tc.unit+" (it starts kubelet)") {
				t.Errorf("boot.persistence, Before=kubelet.service only: %s %q, want a problem naming %s", bp.Status, bp.Message, tc.unit)
			}
			must(t, os.WriteFile(unit, data, 0o644))

			ap := nodedns(t, "--root", root, "apply")
			if ap.code != 0 {
				t.Fatalf("apply: exit %d\n%s%s", ap.code, ap.stdout, ap.stderr)
			}
			after := treeState(t, root)
			for p, sum := range orig {
				for _, o := range owned {
					if (p == o || strings.HasPrefix(p, o+"/")) && after[p] != sum {
						t.Errorf("apply changed %s, which the shape owns", p)
					}
				}
			}
			if rs := nodedns(t, "--root", root, "restore"); rs.code != 0 {
				t.Fatalf("restore: exit %d\n%s%s", rs.code, rs.stdout, rs.stderr)
			}
			if got := treeState(t, root); len(got) != len(orig) {
				t.Errorf("restore: %d files, had %d", len(got), len(orig))
			} else {
				for p, sum := range orig {
					if got[p] != sum {
						t.Errorf("restore did not give back %s", p)
					}
				}
			}
		})
	}
}
