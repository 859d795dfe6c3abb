package kubelet

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/nodedns/nodedns/internal/testutil/fixture"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/nodefs"
)

// TestRancherChoice: the resolv.conf kubelet gets from RKE2 and k3s, in their precedence: the
// kubelet-arg resolv-conf= kubelet gets last, else a drop-in of their kubelet --config-dir after
// their own, else resolv-conf in config.yaml and config.yaml.d (later files win), else
// RKE2_RESOLV_CONF/K3S_RESOLV_CONF from the unit's environment files, else their own test of
// /etc/resolv.conf and resolved's uplink file.
func TestRancherChoice(t *testing.T) {
	const stub = "nameserver 127.0.0.53\n"
	const uplink = "nameserver 10.66.0.53\n"
	rke2Unit := "[Service]\nEnvironmentFile=-/etc/default/%N\nEnvironmentFile=-/usr/local/lib/systemd/system/%N.env\nExecStart=/usr/local/bin/rke2 server\n"
	tests := []struct {
		name    string
		files   map[string]string
		resolv  string
		how     string
		shape   string
		problem string
	}{
		{name: "rke2, stub: resolved's uplink file", shape: ShapeRKE2, resolv: "/run/systemd/resolve/resolv.conf", how: "rke2's own choice",
			files: map[string]string{"/usr/local/lib/systemd/system/rke2-server.service": rke2Unit, "/etc/resolv.conf": stub, "/run/systemd/resolve/resolv.conf": uplink}},
		{name: "rke2, a plain /etc/resolv.conf is kept", shape: ShapeRKE2, resolv: "/etc/resolv.conf",
			files: map[string]string{"/usr/local/lib/systemd/system/rke2-server.service": rke2Unit, "/etc/resolv.conf": uplink, "/run/systemd/resolve/resolv.conf": uplink}},
		{name: "rke2, a link-local cache fails the test too", shape: ShapeRKE2, resolv: "/run/systemd/resolve/resolv.conf",
			files: map[string]string{"/usr/local/lib/systemd/system/rke2-server.service": rke2Unit, "/etc/resolv.conf": "nameserver 169.254.25.10\n", "/run/systemd/resolve/resolv.conf": uplink}},
		{name: "rke2, nothing passes: the generated file", shape: ShapeRKE2, resolv: "/var/lib/rancher/rke2/agent/etc/resolv.conf", how: "nameserver 8.8.8.8",
			files: map[string]string{"/usr/local/lib/systemd/system/rke2-server.service": rke2Unit, "/etc/resolv.conf": stub}},
		{name: "rke2, data-dir moves the generated file", shape: ShapeRKE2, resolv: "/srv/rke2/agent/etc/resolv.conf",
			files: map[string]string{"/usr/local/lib/systemd/system/rke2-server.service": rke2Unit, "/etc/resolv.conf": stub, "/etc/rancher/rke2/config.yaml": "data-dir: /srv/rke2\n"}},
		{name: "rke2, RKE2_RESOLV_CONF in the unit's env file", shape: ShapeRKE2, resolv: "/etc/rke2-resolv.conf", how: "RKE2_RESOLV_CONF (/usr/local/lib/systemd/system/rke2-server.env:2) of rke2-server.service",
			files: map[string]string{"/usr/local/lib/systemd/system/rke2-server.service": rke2Unit, "/usr/local/lib/systemd/system/rke2-server.env": "HOME=/root\nRKE2_RESOLV_CONF=/etc/rke2-resolv.conf\n"}},
		{name: "rke2, config.yaml beats the environment", shape: ShapeRKE2, resolv: "/etc/from-config.conf", how: "resolv-conf (/etc/rancher/rke2/config.yaml:1)",
			files: map[string]string{"/usr/local/lib/systemd/system/rke2-server.service": rke2Unit, "/etc/default/rke2-server": "RKE2_RESOLV_CONF=/etc/env.conf\n", "/etc/rancher/rke2/config.yaml": "resolv-conf: /etc/from-config.conf\n"}},
		{name: "rke2, config.yaml.d overrides config.yaml, in name order", shape: ShapeRKE2, resolv: "/etc/b.conf", how: "/etc/rancher/rke2/config.yaml.d/20-b.yaml:1",
			files: map[string]string{"/usr/local/lib/systemd/system/rke2-server.service": rke2Unit, "/etc/rancher/rke2/config.yaml": "resolv-conf: /etc/main.conf\n",
				"/etc/rancher/rke2/config.yaml.d/20-b.yaml": "resolv-conf: /etc/b.conf\n", "/etc/rancher/rke2/config.yaml.d/10-a.yaml": "resolv-conf: /etc/a.conf\n"}},
		// k3s's configfilearg (dotDFiles) takes config.yaml.d/*.yaml and *.yml in any letter case
		// of the extension (util.HasSuffixI), in os.ReadDir's name order.
		{name: "k3s, a config.yaml.d drop-in ending .YAML counts", shape: ShapeK3s, resolv: "/etc/resolv.conf", how: "/etc/rancher/k3s/config.yaml.d/50-dns.YAML:1",
			files: map[string]string{"/etc/systemd/system/k3s.service": "[Service]\nExecStart=/usr/local/bin/k3s server\n", "/etc/resolv.conf": stub,
				"/run/systemd/resolve/resolv.conf": uplink, "/etc/rancher/k3s/config.yaml": "write-kubeconfig-mode: \"0644\"\n",
				"/etc/rancher/k3s/config.yaml.d/50-dns.YAML": "resolv-conf: /etc/resolv.conf\n"}},
		{name: "k3s, .Yml and .yaml drop-ins in byte order (upper case before lower)", shape: ShapeK3s, resolv: "/etc/b.conf", how: "/etc/rancher/k3s/config.yaml.d/B.Yml:1",
			files: map[string]string{"/etc/systemd/system/k3s.service": "[Service]\nExecStart=/usr/local/bin/k3s server\n",
				"/etc/rancher/k3s/config.yaml.d/0-A.yaml": "resolv-conf: /etc/a.conf\n", "/etc/rancher/k3s/config.yaml.d/B.Yml": "resolv-conf: /etc/b.conf\n",
				"/etc/rancher/k3s/config.yaml.d/a.yaml": "kubelet-arg: [max-pods=50]\n", "/etc/rancher/k3s/config.yaml.d/z.yaml.bak": "resolv-conf: /etc/not-read.conf\n"}},
		{name: "rke2, kubelet-arg beats resolv-conf; kubelet-arg+ appends", shape: ShapeRKE2, resolv: "/etc/arg.conf", how: "kubelet-arg resolv-conf (/etc/rancher/rke2/config.yaml:3)",
			files: map[string]string{"/usr/local/lib/systemd/system/rke2-server.service": rke2Unit,
				"/etc/rancher/rke2/config.yaml":             "resolv-conf: /etc/main.conf\nkubelet-arg:\n- resolv-conf=/etc/arg.conf\n",
				"/etc/rancher/rke2/config.yaml.d/50-x.yaml": "kubelet-arg+:\n- max-pods=50\n"}},
		// k3s hands kubelet-args to kubelet sorted by name as written (pkg/util GetArgs), and kubelet
		// reads "_" as "-": resolv_conf= comes after resolv-conf= whatever their order in the list.
		{name: "rke2, resolv_conf= is passed after resolv-conf=", shape: ShapeRKE2, resolv: "/etc/resolv.conf", how: "kubelet-arg resolv-conf (/etc/rancher/rke2/config.yaml:2)",
			files: map[string]string{"/usr/local/lib/systemd/system/rke2-server.service": rke2Unit,
				"/etc/rancher/rke2/config.yaml": "kubelet-arg:\n- resolv_conf=/etc/resolv.conf\n- --resolv-conf=/run/systemd/resolve/resolv.conf\n"}},
		{name: "rke2, resolv-conf-= prepends: the plain one comes last", shape: ShapeRKE2, resolv: "/etc/b.conf", how: "(/etc/rancher/rke2/config.yaml:2)",
			files: map[string]string{"/usr/local/lib/systemd/system/rke2-server.service": rke2Unit,
				"/etc/rancher/rke2/config.yaml": "kubelet-arg:\n- resolv-conf=/etc/b.conf\n- resolv-conf-=/etc/a.conf\n"}},
		// k3s (1.32+) hands kubelet the resolv.conf it picks in its own drop-in,
		// DATA/agent/etc/kubelet.conf.d/00-k3s-defaults.conf: a later drop-in there wins over it.
		{name: "k3s, a kubelet drop-in after k3s's own sets resolvConf", shape: ShapeK3s, resolv: "/etc/resolv.conf", how: "/var/lib/rancher/k3s/agent/etc/kubelet.conf.d/50-dns.conf",
			files: map[string]string{"/etc/systemd/system/k3s.service": "[Service]\nExecStart=/usr/local/bin/k3s server\n", "/etc/resolv.conf": stub,
				"/run/systemd/resolve/resolv.conf":                                   uplink,
				"/var/lib/rancher/k3s/agent/etc/kubelet.conf.d/00-k3s-defaults.conf": "kind: KubeletConfiguration\nresolvConf: /run/systemd/resolve/resolv.conf\n",
				"/var/lib/rancher/k3s/agent/etc/kubelet.conf.d/50-dns.conf":          "kind: KubeletConfiguration\nresolvConf: /etc/resolv.conf\n"}},
		{name: "k3s, kubelet-arg wins over every drop-in", shape: ShapeK3s, resolv: "/etc/arg.conf", how: "kubelet-arg",
			files: map[string]string{"/etc/systemd/system/k3s.service": "[Service]\nExecStart=/usr/local/bin/k3s server\n",
				"/etc/rancher/k3s/config.yaml":                              "kubelet-arg: [resolv-conf=/etc/arg.conf]\n",
				"/var/lib/rancher/k3s/agent/etc/kubelet.conf.d/50-dns.conf": "kind: KubeletConfiguration\nresolvConf: /etc/resolv.conf\n"}},
		{name: "rke2, a later kubelet-arg replaces the list", shape: ShapeRKE2, resolv: "/etc/from-config.conf",
			files: map[string]string{"/usr/local/lib/systemd/system/rke2-server.service": rke2Unit,
				"/etc/rancher/rke2/config.yaml":             "resolv-conf: /etc/from-config.conf\nkubelet-arg: [resolv-conf=/etc/arg.conf]\n",
				"/etc/rancher/rke2/config.yaml.d/50-x.yaml": "kubelet-arg: max-pods=50\n"}},
		{name: "rke2, bad YAML is a problem with its line", shape: ShapeRKE2, resolv: "/etc/resolv.conf", problem: "/etc/rancher/rke2/config.yaml:2",
			files: map[string]string{"/usr/local/lib/systemd/system/rke2-server.service": rke2Unit, "/etc/resolv.conf": uplink, "/etc/rancher/rke2/config.yaml": "a: b\nkubelet-arg: a: b\n"}},
		{name: "the enabled unit wins over one only installed", shape: ShapeK3s, resolv: "/etc/k.conf",
			files: map[string]string{"/usr/local/lib/systemd/system/rke2-server.service": rke2Unit, "/etc/systemd/system/k3s-agent.service": "[Service]\nEnvironment=K3S_RESOLV_CONF=/etc/k.conf\nExecStart=/usr/local/bin/k3s agent\n",
				"/etc/systemd/system/multi-user.target.wants/k3s-agent.service": ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := nodefs.NewReader(fixture.Tree(t, tc.files))
			found, _, ps := Find(r, config.Default())
			k := Load(r, found)
			if found.Shape != tc.shape || k.ResolvConf != tc.resolv || !strings.Contains(k.ResolvConfFrom, tc.how) {
				t.Errorf("found %+v, read %+v, want %s with %s (%q)", found, k, tc.shape, tc.resolv, tc.how)
			}
			var msgs []string
			for _, p := range ps {
				msgs = append(msgs, fmt.Sprintf("%s:%d: %s", p.Path, p.Line, p.Msg))
			}
			if tc.problem != "" && !slices.ContainsFunc(msgs, func(m string) bool { return strings.HasPrefix(m, tc.problem) }) {
				t.Errorf("problems %q, want one at %s", msgs, tc.problem)
			}
			if tc.problem == "" && len(msgs) > 0 {
				t.Errorf("problems %q", msgs)
			}
		})
	}
}

// TestConfigDirRecursive: kubelet walks --config-dir recursively in lexical order (filepath.WalkDir),
// so a subdirectory's drop-ins come where its name sorts, and only *.conf files count.
func TestConfigDirRecursive(t *testing.T) {
	root := fixture.Tree(t, map[string]string{
		"/d/10-a.conf":        "resolvConf: /a\n",
		"/d/20-sub/99-z.conf": "resolvConf: /sub\n",
		"/d/30-c.conf":        "clusterDomain: c.local\n",
		"/d/40-ignored.yaml":  "resolvConf: /ignored\n",
		"/d/05/x.conf":        "resolvConf: /first\n",
	})
	r := nodefs.NewReader(root)
	got, _, err := dropIns(r, "/d")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/d/05/x.conf", "/d/10-a.conf", "/d/20-sub/99-z.conf", "/d/30-c.conf"}
	if !slices.Equal(got, want) {
		t.Errorf("order %q, want %q", got, want)
	}
	k := Load(r, Found{ConfigDir: "/d"})
	if k.ResolvConf != "/sub" || k.ResolvConfFrom != "/d/20-sub/99-z.conf" || k.ClusterDomain != "c.local" {
		t.Errorf("merged %+v", k)
	}
	// --resolv-conf wins over every drop-in.
	k = Load(r, Found{ConfigDir: "/d", ResolvConf: "/flag", HasResolvConf: true, ResolvConfHow: "--resolv-conf x"})
	if k.ResolvConf != "/flag" || k.ResolvConfFrom != "--resolv-conf x" {
		t.Errorf("with the flag %+v", k)
	}
}

// TestUnitResolvConfFlag: --resolv-conf reaches kubelet through the unit as --config does, from
// ExecStart= or a variable of an environment file, and in kubeadm's KUBELET_EXTRA_ARGS when the
// config comes from KUBELET_CONFIG_ARGS.
func TestUnitResolvConfFlag(t *testing.T) {
	root := fixture.Tree(t, map[string]string{
		"/lib/systemd/system/kubelet.service":                   "[Service]\nExecStart=/usr/bin/kubelet\n",
		"/lib/systemd/system/kubelet.service.d/10-kubeadm.conf": "[Service]\nEnvironment=\"KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml\"\nEnvironmentFile=-/etc/default/kubelet\nExecStart=\nExecStart=/usr/bin/kubelet $KUBELET_CONFIG_ARGS $KUBELET_EXTRA_ARGS\n",
		"/etc/default/kubelet":                                  "KUBELET_EXTRA_ARGS=\"--v=2 --resolv-conf /etc/kubelet-resolv.conf\"\n",
		"/var/lib/kubelet/config.yaml":                          "kind: KubeletConfiguration\nresolvConf: /run/systemd/resolve/resolv.conf\n",
	})
	r := nodefs.NewReader(root)
	found, _, _ := Find(r, config.Default())
	k := Load(r, found)
	if k.Path != KubeadmConfig || k.ResolvConf != "/etc/kubelet-resolv.conf" || k.ResolvConfFrom != "--resolv-conf in $KUBELET_EXTRA_ARGS (/etc/default/kubelet:1) of /lib/systemd/system/kubelet.service" || k.Unit != Unit {
		t.Errorf("read %+v", k)
	}
}

func FuzzRancherConfig(f *testing.F) {
	f.Add([]byte("resolv-conf: /etc/x\nkubelet-arg:\n- resolv-conf=/y\n"))
	f.Add([]byte("kubelet-arg+: a\ndata-dir: [x]\n"))
	f.Add([]byte("&a [*a]"))
	f.Add([]byte("kubelet-arg: [resolv_conf=/a, --resolv-conf=/b, resolv-conf-=/c, resolv-conf+=/d]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var o rancherOpts
		if err := o.read(data, "/etc/rancher/k3s/config.yaml"); err != nil {
			return
		}
		if len(o.kubeletArgs) != len(o.kubeletArgAt) {
			t.Fatalf("%d kubelet-args, %d sources", len(o.kubeletArgs), len(o.kubeletArgAt))
		}
		if i := effectiveResolvArg(o.kubeletArgs); i < -1 || i >= len(o.kubeletArgs) {
			t.Fatalf("effectiveResolvArg %d of %d kubelet-args", i, len(o.kubeletArgs))
		} else if i >= 0 && !strings.Contains(strings.ReplaceAll(o.kubeletArgs[i], "_", "-"), "resolv-conf") {
			t.Fatalf("effectiveResolvArg picked %q", o.kubeletArgs[i])
		}
	})
}
