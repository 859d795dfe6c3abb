package main

import (
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodedns/nodedns/internal/testutil/kubeletjudge"
)

// The real kubelet judges kubelet.manage (docs/contract.md "kubelet.manage"): on every fixture tree
// with a kubelet and on hostile but legal variants of them, kubelet v1.36.3 itself reports the
// configuration it would run with (internal/testutil/kubeletjudge), before apply, after apply and
// after restore, and kubelet's own pod DNS configurer says what a pod gets.

// realStart says how kubelet starts on a tree.
type realStart func(t *testing.T, k *kubeletjudge.Kubelet, root string) (kubeletjudge.Start, error)

// byUnit: systemd starts kubelet with unit's ExecStart= (kubeadm, kubespray).
func byUnit(unit string) realStart {
	return func(t *testing.T, _ *kubeletjudge.Kubelet, root string) (kubeletjudge.Start, error) {
		s, _, err := kubeletjudge.FromUnit(root, unit)
		return s, err
	}
}

// byConfig: kubelet --config=PATH, for the trees that hold a kubelet config at kubeadm's path but
// no unit (nodedns finds the config there, docs/contract.md "Kubelet's config", step 3).
func byConfig(p string) realStart {
	return func(_ *testing.T, _ *kubeletjudge.Kubelet, _ string) (kubeletjudge.Start, error) {
		return kubeletjudge.Start{Args: []string{"--config=" + p}, How: "kubelet --config=" + p}, nil
	}
}

// byRancher: unit starts RKE2 or k3s (shape), which start kubelet. Neither is on the module proxy:
// the command line they build is modelled from their sources (.ci/kubelet-judge/rancher.go, read
// with the urfave/cli v2 and yaml.v2 they use); the kubelet that runs it is the real one.
func byRancher(shape, unit string) realStart {
	return func(t *testing.T, k *kubeletjudge.Kubelet, root string) (kubeletjudge.Start, error) {
		s, env, err := kubeletjudge.FromUnit(root, unit)
		if err != nil {
			return s, err
		}
		return k.Rancher(t, root, shape, s.Args, env)
	}
}

// An edit makes a variant of a tree.
type treeEdit func(t *testing.T, root string)

func writeNode(p, data string) treeEdit {
	return func(t *testing.T, root string) {
		full := filepath.Join(root, p)
		must(t, os.MkdirAll(filepath.Dir(full), 0o755))
		must(t, os.WriteFile(full, []byte(data), 0o644))
	}
}

func rewriteNode(p string, f func(string) string) treeEdit {
	return func(t *testing.T, root string) {
		full := filepath.Join(root, p)
		data, err := os.ReadFile(full)
		must(t, err)
		must(t, os.WriteFile(full, []byte(f(string(data))), 0o644))
	}
}

// replaceNode replaces old by new in p; old must be there.
func replaceNode(p, old, new string) treeEdit {
	return func(t *testing.T, root string) {
		rewriteNode(p, func(s string) string {
			if !strings.Contains(s, old) {
				t.Fatalf("%s has no %q", p, old)
			}
			return strings.Replace(s, old, new, 1)
		})(t, root)
	}
}

func editsOf(es ...treeEdit) treeEdit {
	return func(t *testing.T, root string) {
		for _, e := range es {
			e(t, root)
		}
	}
}

func crlf(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }

type realCase struct {
	name  string
	tree  string // relative to this package
	start realStart
	edit  treeEdit
}

// realKubeletCases are the trees (every fixture tree with a kubelet) and their hostile but legal
// variants.
func realKubeletCases() []realCase {
	const (
		kubeadmConfig = "var/lib/kubelet/config.yaml"
		sysconfig     = "etc/sysconfig/kubelet"
		dropDir       = "etc/kubernetes/kubelet.conf.d"
		rke2Config    = "etc/rancher/rke2/config.yaml"
		k3sConfig     = "etc/rancher/k3s/config.yaml"
	)
	kubelet := byUnit("kubelet.service")
	rke2 := byRancher("rke2", "rke2-agent.service")
	k3s := byRancher("k3s", "k3s.service")
	// A file whose first character is "{" is JSON to kubelet (k8s.io/apimachinery's yaml
	// IsJSONBuffer): a YAML flow mapping must not start the file, or kubelet does not start.
	kubeadmFlow := "# kubelet's configuration, in flow style\n{apiVersion: kubelet.config.k8s.io/v1beta1, kind: KubeletConfiguration, cgroupDriver: systemd,\n" +
		"  clusterDNS: [10.96.0.10], clusterDomain: cluster.local, resolvConf: /run/systemd/resolve/resolv.conf,\n" +
		"  staticPodPath: /etc/kubernetes/manifests}\n"
	kubeadmJSON := `{"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration", "cgroupDriver": "systemd",` + "\n" +
		`  "clusterDNS": ["10.96.0.10"], "clusterDomain": "cluster.local", "resolvConf": "/run/systemd/resolve/resolv.conf",` + "\n" +
		`  "staticPodPath": "/etc/kubernetes/manifests"}` + "\n"
	cases := []realCase{
		// The trees as they are.
		{name: "kubelet/kubeadm-healthy", tree: "testdata/kubelet/kubeadm-healthy", start: kubelet},
		{name: "kubelet/kubeadm-looping", tree: "testdata/kubelet/kubeadm-looping", start: kubelet},
		{name: "kubelet/kubeadm-configdir-healthy", tree: "testdata/kubelet/kubeadm-configdir-healthy", start: kubelet},
		{name: "kubelet/kubeadm-configdir-looping", tree: "testdata/kubelet/kubeadm-configdir-looping", start: kubelet},
		{name: "kubelet/rke2-healthy", tree: "testdata/kubelet/rke2-healthy", start: rke2},
		{name: "kubelet/rke2-looping", tree: "testdata/kubelet/rke2-looping", start: rke2},
		{name: "kubelet/k3s-healthy", tree: "testdata/kubelet/k3s-healthy", start: k3s},
		{name: "kubelet/k3s-looping", tree: "testdata/kubelet/k3s-looping", start: k3s},
		{name: "kubelet/k3s-dropin-uppercase", tree: "testdata/kubelet/k3s-dropin-uppercase", start: k3s},
		{name: "kubespray/dhclient", tree: "testdata/kubespray/dhclient", start: kubelet},
		{name: "kubespray/dhclient-loop-only", tree: "testdata/kubespray/dhclient-loop-only", start: kubelet},
		{name: "kubespray/resolved", tree: "testdata/kubespray/resolved", start: kubelet},
		{name: "kubespray/networkmanager", tree: "testdata/kubespray/networkmanager", start: kubelet},
		{name: "seeds/001", tree: "testdata/seeds/001", start: byConfig("/" + kubeadmConfig)},
		{name: "seeds/002", tree: "testdata/seeds/002", start: byConfig("/" + kubeadmConfig)},
		{name: "seeds/003", tree: "testdata/seeds/003", start: byConfig("/" + kubeadmConfig)},
		{name: "examples/kubespray-host-resolvconf", tree: "../../examples/kubespray-host-resolvconf", start: byConfig("/" + kubeadmConfig)},

		// kubelet's config file, as kubelet's YAML decoder (sigs.k8s.io/yaml, strict) accepts it.
		{name: "kubeadm config CRLF", tree: "testdata/kubelet/kubeadm-healthy", start: kubelet, edit: rewriteNode(kubeadmConfig, crlf)},
		{name: "kubeadm config BOM", tree: "testdata/kubelet/kubeadm-healthy", start: kubelet, edit: rewriteNode(kubeadmConfig, func(s string) string { return "\ufeff" + s })},
		{name: "kubeadm config comments", tree: "testdata/kubelet/kubeadm-healthy", start: kubelet, edit: editsOf(
			rewriteNode(kubeadmConfig, func(s string) string { return "# written by kubeadm init\n---\n" + s + "# end\n" }),
			replaceNode(kubeadmConfig, "resolvConf: /run/systemd/resolve/resolv.conf\n", "# the uplink file\nresolvConf: /run/systemd/resolve/resolv.conf # resolved's\n"))},
		{name: "kubeadm config quoted keys", tree: "testdata/kubelet/kubeadm-healthy", start: kubelet, edit: editsOf(
			replaceNode(kubeadmConfig, "resolvConf: ", `"resolvConf": `), replaceNode(kubeadmConfig, "kind: ", "'kind': "))},
		{name: "kubeadm config flow style", tree: "testdata/kubelet/kubeadm-healthy", start: kubelet, edit: writeNode(kubeadmConfig, kubeadmFlow)},
		{name: "kubeadm config flow collections", tree: "testdata/kubelet/kubeadm-healthy", start: kubelet, edit: editsOf(
			replaceNode(kubeadmConfig, "clusterDNS:\n- 10.96.0.10\n", "clusterDNS: [10.96.0.10]\n"),
			replaceNode(kubeadmConfig, "memorySwap: {}\n", "memorySwap: {swapBehavior: NoSwap}\n"),
			replaceNode(kubeadmConfig, "authorization:\n  mode: Webhook\n", "authorization: {mode: Webhook}\n"))},
		{name: "kubeadm config JSON", tree: "testdata/kubelet/kubeadm-healthy", start: kubelet, edit: writeNode(kubeadmConfig, kubeadmJSON)},
		{name: "kubeadm config anchors", tree: "testdata/kubelet/kubeadm-healthy", start: kubelet, edit: editsOf(
			replaceNode(kubeadmConfig, "shutdownGracePeriod: 0s\n", "shutdownGracePeriod: &zero 0s\n"),
			replaceNode(kubeadmConfig, "shutdownGracePeriodCriticalPods: 0s\n", "shutdownGracePeriodCriticalPods: *zero\n"),
			replaceNode(kubeadmConfig, "resolvConf: /run/", "resolvConf: &rc /run/"))},
		{name: "kubeadm config without resolvConf", tree: "testdata/kubelet/kubeadm-healthy", start: kubelet,
			edit: replaceNode(kubeadmConfig, "resolvConf: /run/systemd/resolve/resolv.conf\n", "")},
		{name: "config dir: several drop-ins", tree: "testdata/kubelet/kubeadm-configdir-looping", start: kubelet, edit: editsOf(
			writeNode(dropDir+"/30-pods.conf", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 50\n"),
			writeNode(dropDir+"/20-dns/60-domain.conf", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nclusterDomain: cluster.local\n"),
			writeNode(dropDir+"/README", "resolvConf: /not/read: kubelet takes only *.conf\n"))},
		{name: "config dir: a later drop-in sets resolvConf", tree: "testdata/kubelet/kubeadm-configdir-healthy", start: kubelet,
			edit: writeNode(dropDir+"/zzz-late.conf", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nresolvConf: /etc/resolv.conf\n")},
		{name: "config dir: drop-in CRLF and BOM", tree: "testdata/kubelet/kubeadm-configdir-looping", start: kubelet,
			edit: rewriteNode(dropDir+"/20-dns/50-stub.conf", func(s string) string { return "\ufeff" + crlf(s) })},
		{name: "config dir: drop-in JSON", tree: "testdata/kubelet/kubeadm-configdir-looping", start: kubelet,
			edit: writeNode(dropDir+"/20-dns/50-stub.conf", `{"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration", "resolvConf": "/etc/resolv.conf"}`+"\n")},

		// Environment files, as systemd tokenizes them (checked against systemd itself by
		// TestKubeletEnvFilesUnderSystemd) and kubelet's flag set (pflag, "_" read as "-") parses them.
		{name: "env double quotes", tree: "testdata/kubelet/kubeadm-looping", start: kubelet,
			edit: writeNode(sysconfig, "KUBELET_EXTRA_ARGS=\"--v=2 --resolv-conf=/etc/resolv.conf\"\n")},
		{name: "env single quotes", tree: "testdata/kubelet/kubeadm-looping", start: kubelet,
			edit: writeNode(sysconfig, "KUBELET_EXTRA_ARGS='--resolv-conf=/etc/resolv.conf --v=2'\n")},
		{name: "env continuation lines", tree: "testdata/kubelet/kubeadm-looping", start: kubelet,
			edit: writeNode(sysconfig, "KUBELET_EXTRA_ARGS=\"--v=2 \\\n  --resolv-conf=/etc/resolv.conf \\\n  --max-pods=100\"\n")},
		{name: "env value after a space", tree: "testdata/kubelet/kubeadm-looping", start: kubelet,
			edit: writeNode(sysconfig, "KUBELET_EXTRA_ARGS=--resolv-conf /etc/resolv.conf\n")},
		{name: "env underscore spelling", tree: "testdata/kubelet/kubeadm-looping", start: kubelet,
			edit: writeNode(sysconfig, "KUBELET_EXTRA_ARGS=--resolv_conf=/etc/resolv.conf\n")},
		{name: "env the flag twice", tree: "testdata/kubelet/kubeadm-looping", start: kubelet,
			edit: writeNode(sysconfig, "KUBELET_EXTRA_ARGS=\"--resolv-conf=/run/systemd/resolve/resolv.conf --resolv-conf=/etc/resolv.conf\"\n")},
		{name: "env CRLF and comments", tree: "testdata/kubelet/kubeadm-looping", start: kubelet,
			edit: writeNode(sysconfig, "# local overrides\r\n; another comment\r\nKUBELET_EXTRA_ARGS=--resolv-conf=/etc/resolv.conf\r\n")},
		{name: "env escaped quotes", tree: "testdata/kubelet/kubeadm-looping", start: kubelet,
			edit: writeNode(sysconfig, "KUBELET_EXTRA_ARGS=\"--node-labels=\\\"tier=dns\\\" --resolv-conf=/etc/resolv.conf\"\n")},
		{name: "kubespray env flag in a continued value", tree: "testdata/kubespray/resolved", start: kubelet,
			edit: replaceNode("etc/kubernetes/kubelet.env", "--kubeconfig=/etc/kubernetes/kubelet.conf \\\n", "--kubeconfig=/etc/kubernetes/kubelet.conf \\\n--resolv-conf=/etc/resolv.conf \\\n")},

		// RKE2 and k3s: their config.yaml and config.yaml.d as configfilearg merges them.
		{name: "rke2 kubelet-arg as a string", tree: "testdata/kubelet/rke2-looping", start: rke2,
			edit: writeNode(rke2Config, "server: https://10.66.0.10:9345\ntoken: K10example::server:example\nkubelet-arg: resolv-conf=/etc/resolv.conf\n")},
		{name: "rke2 kubelet-arg flow list", tree: "testdata/kubelet/rke2-looping", start: rke2,
			edit: writeNode(rke2Config, "server: https://10.66.0.10:9345\nkubelet-arg: [max-pods=110, \"resolv-conf=/etc/resolv.conf\"]\n")},
		{name: "rke2 kubelet-arg with dashes", tree: "testdata/kubelet/rke2-looping", start: rke2,
			edit: replaceNode(rke2Config, `"resolv-conf=`, `"--resolv-conf=`)},
		{name: "rke2 kubelet-arg underscore spelling", tree: "testdata/kubelet/rke2-looping", start: rke2,
			edit: replaceNode(rke2Config, `"resolv-conf=`, `"resolv_conf=`)},
		{name: "rke2 kubelet-arg both spellings", tree: "testdata/kubelet/rke2-looping", start: rke2,
			edit: replaceNode(rke2Config, `  - "resolv-conf=/etc/resolv.conf"`, "  - \"resolv_conf=/etc/resolv.conf\"\n  - \"resolv-conf=/run/systemd/resolve/resolv.conf\"")},
		{name: "rke2 kubelet-arg+ in config.yaml.d", tree: "testdata/kubelet/rke2-looping", start: rke2, edit: editsOf(
			replaceNode(rke2Config, `  - "resolv-conf=/etc/resolv.conf"`+"\n", ""),
			writeNode("etc/rancher/rke2/config.yaml.d/50-dns.yaml", "kubelet-arg+:\n  - resolv-conf=/etc/resolv.conf\n"))},
		{name: "rke2 a later kubelet-arg replaces the list", tree: "testdata/kubelet/rke2-looping", start: rke2,
			edit: writeNode("etc/rancher/rke2/config.yaml.d/50-pods.yaml", "kubelet-arg: [max-pods=50]\n")},
		{name: "rke2 resolv-conf in a .yml drop-in", tree: "testdata/kubelet/rke2-healthy", start: rke2,
			edit: writeNode("etc/rancher/rke2/config.yaml.d/50-dns.yml", "resolv-conf: /etc/resolv.conf\n")},
		{name: "rke2 config CRLF", tree: "testdata/kubelet/rke2-looping", start: rke2, edit: rewriteNode(rke2Config, crlf)},
		{name: "rke2 config BOM and comments", tree: "testdata/kubelet/rke2-looping", start: rke2,
			edit: rewriteNode(rke2Config, func(s string) string { return "\ufeff# rke2 agent\n" + s + "# end\n" })},
		{name: "rke2 RKE2_RESOLV_CONF in /etc/default", tree: "testdata/kubelet/rke2-healthy", start: rke2,
			edit: writeNode("etc/default/rke2-agent", "RKE2_RESOLV_CONF=\"/etc/resolv.conf\"\n")},
		{name: "k3s K3S_RESOLV_CONF quoted", tree: "testdata/kubelet/k3s-looping", start: k3s,
			edit: replaceNode("etc/systemd/system/k3s.service.env", "K3S_RESOLV_CONF=/etc/resolv.conf", `K3S_RESOLV_CONF="/etc/resolv.conf"`)},
		{name: "k3s resolv-conf in config.yaml", tree: "testdata/kubelet/k3s-healthy", start: k3s,
			edit: writeNode(k3sConfig, "write-kubeconfig-mode: \"0644\"\nresolv-conf: /etc/resolv.conf\n")},
		{name: "k3s kubelet-arg in a .Yml drop-in", tree: "testdata/kubelet/k3s-healthy", start: k3s,
			edit: writeNode("etc/rancher/k3s/config.yaml.d/60-args.Yml", "kubelet-arg: [resolv-conf=/etc/resolv.conf]\n")},
		{name: "k3s config anchors", tree: "testdata/kubelet/k3s-healthy", start: k3s,
			edit: writeNode(k3sConfig, "write-kubeconfig-mode: \"0644\"\nkubelet-arg: &args\n  - resolv-conf=/etc/resolv.conf\nkube-proxy-arg: *args\n")},
		{name: "k3s kubelet drop-in after k3s's own", tree: "testdata/kubelet/k3s-healthy", start: k3s,
			edit: writeNode("var/lib/rancher/k3s/agent/etc/kubelet.conf.d/50-dns.conf", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nresolvConf: /etc/resolv.conf\n")},
	}
	return cases
}

// TestKubeletManageRealKubelet: with kubelet.manage on, apply either points the real kubelet at
// nodedns's file, leaving every other field of its effective configuration as it was, or refuses
// with a message and leaves kubelet's configuration as it was; after restore the real kubelet's
// effective configuration is the original one. After an apply, kubelet's own pod DNS configurer
// gives a Default pod no loop address (loopback, link-local caches) and no DHCP search domain, and a
// ClusterFirst pod no DHCP search domain.
func TestKubeletManageRealKubelet(t *testing.T) {
	k := kubeletjudge.Require(t)
	cases := realKubeletCases()
	ran, held, looped := 0, 0, 0
	for _, tc := range cases {
		ok := t.Run(tc.name, func(t *testing.T) {
			ran++
			if judgeManage(t, k, tc) {
				looped++
			}
		})
		if ok {
			held++
		}
	}
	t.Logf("%d of %d trees and variants held against kubelet v1.36.3 (%d of them had pods' DNS loop or leak before apply)", held, ran, looped)
	// The pod checks can fail: on the looping trees, before apply, kubelet's configurer hands pods
	// the resolved stub.
	if ran == len(cases) && looped == 0 {
		t.Error("no tree's pods got a loop address or a DHCP search domain before apply: the pod checks judge nothing")
	}
}

// judgeManage runs apply and restore on one tree and judges them by the real kubelet; it reports
// whether pods got a loop address or a DHCP search domain before apply.
func judgeManage(t *testing.T, k *kubeletjudge.Kubelet, tc realCase) bool {
	const ours = "/var/lib/nodedns/resolv.conf"
	root := t.TempDir()
	copyDir(t, tc.tree, root)
	if _, err := os.Lstat(filepath.Join(root, "lib/systemd/system/nodedns.service")); err != nil {
		installUnit(t, root) // a node with nodedns installed, as copyTree makes it
	}
	if tc.edit != nil {
		tc.edit(t, root)
	}
	effective := func(when string) kubeletjudge.Config {
		t.Helper()
		s, err := tc.start(t, k, root)
		if err != nil {
			t.Fatalf("%s: how kubelet starts: %v", when, err)
		}
		c, err := k.Effective(t, root, s)
		if err != nil {
			t.Fatalf("%s: %s: %v", when, s.How, err)
		}
		return c
	}
	orig := treeState(t, root)
	before := effective("before apply")
	dhcp := leaseDomains(t, root)
	loopedBefore := len(podProblems(t, k, root, before, dhcp)) > 0

	cfg := manageConfig(t, "")
	pl, _ := planOf(t, "--config", cfg, "--root", root)
	ap := nodedns(t, "--config", cfg, "--root", root, "apply")
	after := effective("after apply")
	switch {
	case ap.code == 0:
		if after.ResolvConf() != ours {
			t.Errorf("apply exited 0, but the real kubelet reads %q (before: %q), not nodedns's file\n%s", after.ResolvConf(), before.ResolvConf(), ap.stdout)
		}
		if diff := kubeletjudge.DiffBesidesResolvConf(before, after); diff != "" {
			t.Errorf("apply changed more of kubelet's effective configuration than resolvConf (-before +after):\n%s", diff)
		}
		if after.ResolvConf() == ours {
			for _, p := range podProblems(t, k, root, after, dhcp) {
				t.Error(p)
			}
		}
	case len(pl.Blocked) > 0:
		if diff := cmp.Diff(before, after); diff != "" {
			t.Errorf("apply refused, yet kubelet's effective configuration changed (-before +after):\n%s", diff)
		}
		for _, b := range pl.Blocked {
			if b.Reason == "" {
				t.Errorf("blocked %s without a message", b.Target)
			}
			t.Logf("refused: %s: %s", b.Target, b.Reason)
		}
	default:
		t.Errorf("apply exited %d with nothing blocked:\n%s%s", ap.code, ap.stdout, ap.stderr)
	}

	if rs := nodedns(t, "--config", cfg, "--root", root, "restore"); rs.code != 0 {
		t.Fatalf("restore: exit %d\n%s%s", rs.code, rs.stdout, rs.stderr)
	}
	if diff := cmp.Diff(before, effective("after restore")); diff != "" {
		t.Errorf("after restore the real kubelet's effective configuration is not the original (-before +after):\n%s", diff)
	}
	if diff := treeDiff(orig, treeState(t, root)); diff != "" {
		t.Errorf("restore did not give back every byte:\n%s", diff)
	}
	return loopedBefore
}

// podProblems is what is wrong with the resolv.conf kubelet's pod DNS configurer gives pods under c:
// a Default pod with no nameserver, a loop address (loopback, a link-local cache) or a DHCP search
// domain, a ClusterFirst pod with a DHCP search domain among the node's.
func podProblems(t *testing.T, k *kubeletjudge.Kubelet, root string, c kubeletjudge.Config, dhcp []string) []string {
	t.Helper()
	var out []string
	def, err := k.PodResolvConf(t, root, c, "Default")
	if err != nil {
		return []string{err.Error()}
	}
	servers, search := resolvLines(def)
	if len(servers) == 0 {
		out = append(out, "a Default pod gets no nameserver:\n"+def)
	}
	for _, s := range servers {
		if a, err := netip.ParseAddr(s); err != nil || a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsUnspecified() {
			out = append(out, "a Default pod gets nameserver "+s+", a loop address:\n"+def)
		}
	}
	for _, d := range search {
		if slices.Contains(dhcp, d) {
			out = append(out, "a Default pod gets the DHCP search domain "+d+":\n"+def)
		}
	}
	if len(c.ClusterDNS()) == 0 {
		return out
	}
	cf, err := k.PodResolvConf(t, root, c, "ClusterFirst")
	if err != nil {
		return append(out, err.Error())
	}
	// kubelet puts the cluster's own three first (generateSearchesForDNSClusterFirst): the node's
	// search domains are the rest.
	_, search = resolvLines(cf)
	if len(search) < 3 || search[2] != c.ClusterDomain() {
		return append(out, "a ClusterFirst pod's search list does not start with the cluster's:\n"+cf)
	}
	for _, d := range search[3:] {
		if slices.Contains(dhcp, d) {
			out = append(out, "a ClusterFirst pod gets the DHCP search domain "+d+":\n"+cf)
		}
	}
	return out
}

func resolvLines(s string) (servers, search []string) {
	for _, l := range strings.Split(s, "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) == 2 && f[0] == "nameserver":
			servers = append(servers, f[1])
		case len(f) > 1 && f[0] == "search":
			search = append(search, f[1:]...)
		}
	}
	return servers, search
}

// leaseDomains are the DHCP search domains the tree's leases hold (the fixtures' dhclient leases:
// option domain-name and domain-search; networkd's: DOMAINNAME= and DOMAIN_SEARCH_LIST=), without a
// trailing dot.
func leaseDomains(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	for _, g := range []string{"var/lib/dhcp/*.leases", "run/systemd/netif/leases/*", "var/lib/NetworkManager/*.lease"} {
		m, _ := filepath.Glob(filepath.Join(root, g))
		files = append(files, m...)
	}
	dhclient := regexp.MustCompile(`option domain-(?:name|search) ([^;]*);`)
	quoted := regexp.MustCompile(`"([^"]*)"`)
	networkd := regexp.MustCompile(`(?m)^(?:DOMAINNAME|DOMAIN_SEARCH_LIST)=(.*)$`)
	var out []string
	add := func(d string) {
		if d = strings.TrimSuffix(d, "."); d != "" && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		must(t, err)
		for _, m := range dhclient.FindAllStringSubmatch(string(data), -1) {
			for _, q := range quoted.FindAllStringSubmatch(m[1], -1) {
				add(q[1])
			}
		}
		for _, m := range networkd.FindAllStringSubmatch(string(data), -1) {
			for _, d := range strings.Fields(m[1]) {
				add(d)
			}
		}
	}
	return out
}
