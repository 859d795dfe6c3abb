package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/nodedns/nodedns/probes"
)

// readmeBlocks returns the ```yaml blocks of packaging/kubespray/README.md, as written.
func readmeBlocks(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("../../packaging/kubespray/README.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(data), -1) {
		out = append(out, m[1])
	}
	return out
}

func readmeBlock(t *testing.T, blocks []string, has string) string {
	t.Helper()
	for _, b := range blocks {
		if strings.Contains(b, has) {
			return b
		}
	}
	t.Fatalf("packaging/kubespray/README.md has no yaml block with %q", has)
	return ""
}

// ansibleRender runs Ansible as kubespray's node role runs on Ubuntu 22.04: include_vars of
// kubespray's vars/ubuntu-22.yml (roles/kubernetes/node/tasks/facts.yml), then the resolvConf line
// of its kubelet-config.v1beta1.yaml.j2, with extraVars given as `-e @FILE`; and, when nodedns_config
// is set in roleVars, the nodedns role's own config template. It returns the rendered kubelet line
// and config ("" when the role would write none).
func ansibleRender(t *testing.T, extraVars string, roleVars map[string]any) (kubeletLine, config string) {
	t.Helper()
	ap, err := exec.LookPath("ansible-playbook")
	if err != nil {
		t.Skip("ansible-playbook not installed (.ci/run installs Debian's ansible)")
	}
	work := t.TempDir()
	abs := func(p string) string {
		a, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	out := filepath.Join(work, "out")
	must(t, os.MkdirAll(out, 0o755))
	must(t, os.WriteFile(filepath.Join(work, "nodedns.yml"), []byte(extraVars), 0o644))
	rv, err := yaml.Marshal(roleVars)
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.WriteFile(filepath.Join(work, "role-vars.yml"), rv, 0o644))
	play := `- hosts: localhost
  connection: local
  gather_facts: false
  vars_files: [` + filepath.Join(work, "role-vars.yml") + `]
  tasks:
    - name: Os specific vars, as kubespray's roles/kubernetes/node/tasks/facts.yml loads them
      include_vars: ` + abs("testdata/kubespray/ansible/ubuntu-22.yml") + `
    - name: kubelet-config.yaml's resolvConf line
      template: {src: ` + abs("testdata/kubespray/ansible/kubelet-config-resolvconf.j2") + `, dest: ` + filepath.Join(out, "resolvconf") + `}
    - name: the nodedns role's config (its tasks/main.yml "Configure nodedns")
      template: {src: ` + abs("../../packaging/ansible/roles/nodedns/templates/config.yaml.j2") + `, dest: ` + filepath.Join(out, "config.yaml") + `}
      when: nodedns_config | default({}) | length > 0 or nodedns_kubelet_manage | default(false) | bool
`
	must(t, os.WriteFile(filepath.Join(work, "play.yml"), []byte(play), 0o644))
	must(t, os.WriteFile(filepath.Join(work, "inventory"), []byte("localhost\n"), 0o644))
	cmd := exec.Command(ap, "-i", filepath.Join(work, "inventory"), filepath.Join(work, "play.yml"), "-e", "@"+filepath.Join(work, "nodedns.yml"))
	cmd.Env = append(os.Environ(), "HOME="+work, "ANSIBLE_LOCAL_TEMP="+filepath.Join(work, "tmp"), "ANSIBLE_NOCOLOR=1", "ANSIBLE_RETRY_FILES_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ansible-playbook: %v\n%s", err, b)
	}
	line, err := os.ReadFile(filepath.Join(out, "resolvconf"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := os.ReadFile(filepath.Join(out, "config.yaml"))
	return strings.TrimSpace(string(line)), string(cfg)
}

// TestKubesprayReadme tries packaging/kubespray/README.md as written on the kubespray-shaped nodes:
// its extra vars through Ansible with kubespray's Ubuntu vars file in force (which would override
// the same setting in group_vars), kubelet-config.yaml's resolvConf rendered from kubespray's
// template line, the role's vars from its play; then check, apply, a second plan and restore. The
// upstreams snippet for disable_host_nameservers nodes is rendered through the role's template and
// unblocks the loop-only node whose lease file no longer shows the DHCP offer.
func TestKubesprayReadme(t *testing.T) {
	blocks := readmeBlocks(t)
	extra := readmeBlock(t, blocks, "# nodedns.yml")
	var play []struct {
		Roles []struct {
			Vars map[string]any `yaml:"vars"`
		} `yaml:"roles"`
	}
	if err := yaml.Unmarshal([]byte(readmeBlock(t, blocks, "- name: nodedns before kubelet")), &play); err != nil || len(play) != 1 || len(play[0].Roles) != 1 {
		t.Fatalf("the README's play does not parse as one play with one role: %v", err)
	}
	roleVars := play[0].Roles[0].Vars
	if _, ok := roleVars["nodedns_config"]; ok {
		t.Errorf("the README's play passes nodedns_config %v: nodedns reads kubelet's config itself", roleVars["nodedns_config"])
	}

	line, config := ansibleRender(t, extra, roleVars)
	if line != `resolvConf: "/var/lib/nodedns/resolv.conf"` {
		t.Fatalf("kubespray renders %q with the README's variables on Ubuntu 22.04", line)
	}
	if config != "" {
		t.Fatalf("the role writes a config although the play passes none:\n%s", config)
	}

	for _, tree := range []string{"dhclient", "resolved"} {
		t.Run(tree, func(t *testing.T) {
			if tree == "resolved" {
				needNetplan(t)
			}
			root := copyTree(t, filepath.Join("testdata/kubespray", tree))
			kc := readFile(t, root, kubesprayKubeletConfig)
			kc = regexp.MustCompile(`(?m)^resolvConf: .*$`).ReplaceAllString(kc, line)
			putFile(t, root, kubesprayKubeletConfig, kc)
			orig := treeState(t, root)

			if ap := nodedns(t, "--root", root, "apply"); ap.code != 0 {
				t.Fatalf("apply: exit %d\n%s%s", ap.code, ap.stdout, ap.stderr)
			}
			rep, r := checkReport(t, root)
			if c := byID(rep, "kubelet.resolvconf"); c.Status != probes.OK {
				t.Errorf("kubelet.resolvconf after apply: %s %q\n%s", c.Status, c.Message, r.stdout)
			}
			pl := nodedns(t, "--root", root, "plan", "--detailed-exitcode")
			if pl.code != 0 {
				t.Errorf("second plan: exit %d\n%s", pl.code, pl.stdout)
			}
			notContains(t, "second plan", pl.stdout, "kube_resolv_conf")
			assertHintsAgree(t, rep, pl.stdout)
			rs := nodedns(t, "--root", root, "restore")
			if rs.code != 0 {
				t.Fatalf("restore: exit %d\n%s%s", rs.code, rs.stdout, rs.stderr)
			}
			contains(t, "restore", rs.stdout, "kept /var/lib/nodedns/resolv.conf")
			if diff := treeDiff(orig, treeState(t, root)); diff != "" {
				t.Errorf("restore did not give back every other byte:\n%s", diff)
			}
		})
	}

	t.Run("upstreams for disable_host_nameservers", func(t *testing.T) {
		snippet := readmeBlock(t, blocks, "nodedns_config:")
		var vars map[string]any
		if err := yaml.Unmarshal([]byte(dedent(snippet)), &vars); err != nil {
			t.Fatalf("the README's nodedns_config snippet: %v", err)
		}
		for k, v := range roleVars {
			vars[k] = v
		}
		vars["upstream_dns_servers"] = []string{"10.66.0.53"} // this node's resolver, as an inventory would set it
		_, config := ansibleRender(t, extra, vars)
		if config == "" {
			t.Fatal("the role writes no config with the README's snippet")
		}
		cfgFile := filepath.Join(t.TempDir(), "config.yaml")
		must(t, os.WriteFile(cfgFile, []byte(config), 0o644))

		// The loop-only node after dhclient's second restart, nodedns never run before: only
		// superseded lease blocks, no record.
		root := copyTree(t, "testdata/kubespray/dhclient-loop-only")
		leases := readFile(t, root, "/var/lib/dhcp/dhclient.enp1s0.leases")
		putFile(t, root, "/var/lib/dhcp/dhclient.enp1s0.leases", leases[strings.LastIndex(leases, "lease {"):])
		if pl := nodedns(t, "--root", root, "plan"); pl.code != 1 {
			t.Fatalf("without the snippet the node should be blocked: exit %d\n%s", pl.code, pl.stdout)
		}
		ap := nodedns(t, "--config", cfgFile, "--root", root, "apply")
		if ap.code != 0 {
			t.Fatalf("apply with the README's upstreams: exit %d\n%s%s\nconfig:\n%s", ap.code, ap.stdout, ap.stderr, config)
		}
		contains(t, "kubelet file", readFile(t, root, "/var/lib/nodedns/resolv.conf"), "nameserver 10.66.0.53\n")
	})
}

// dedent removes the indentation of the first line from every line.
func dedent(s string) string {
	lines := strings.Split(s, "\n")
	n := len(lines[0]) - len(strings.TrimLeft(lines[0], " "))
	for i, l := range lines {
		if len(l) >= n {
			lines[i] = l[n:]
		}
	}
	return strings.Join(lines, "\n")
}

// treeDiff is a short diff of two treeStates ("" when equal).
func treeDiff(a, b map[string]string) string {
	var out []string
	for k, v := range a {
		if b[k] != v {
			out = append(out, k+": "+v+" -> "+b[k])
		}
	}
	for k, v := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k+": (new) "+v)
		}
	}
	return strings.Join(out, "\n")
}
