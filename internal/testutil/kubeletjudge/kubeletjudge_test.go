package kubeletjudge

import (
	"errors"
	"strings"
	"testing"

	"github.com/nodedns/nodedns/internal/testutil/fixture"
)

// TestParseLog: both of klog's formats kubelet may log its configuration in.
func TestParseLog(t *testing.T) {
	text := "I0101 00:00:00.000000       1 flags.go:64] FLAG: --v=\"5\"\n" +
		"I0101 00:00:00.000001       1 server.go:301] \"KubeletConfiguration\" configuration=<\n" +
		"\t{\n\t  \"ResolverConfig\": \"/etc/resolv.conf\",\n\t  \"ClusterDNS\": [\n\t    \"10.96.0.10\"\n\t  ]\n\t}\n >\n" +
		"E0101 00:00:00.000002       1 run.go:72] \"command failed\" err=\"failed to run Kubelet: cannot exit on lock file contention: no lock file specified\"\n"
	c, err := ParseLog(text)
	if err != nil || c.ResolvConf() != "/etc/resolv.conf" || strings.Join(c.ClusterDNS(), ",") != "10.96.0.10" {
		t.Errorf("text format: %v %v", c, err)
	}
	js := `{"ts":1,"caller":"app/server.go:301","msg":"KubeletConfiguration","v":5,"configuration":{"ResolverConfig":"/run/x","ClusterDomain":"c.local"}}` + "\n"
	c, err = ParseLog(js)
	if err != nil || c.ResolvConf() != "/run/x" || c.ClusterDomain() != "c.local" {
		t.Errorf("json format: %v %v", c, err)
	}
	if _, err := ParseLog("\"KubeletConfiguration\" configuration=<\n\t{\n"); err == nil {
		t.Error("a configuration cut short was read")
	}
	if got := failure(text); got != `"failed to run Kubelet: cannot exit on lock file contention: no lock file specified"` {
		t.Errorf("failure: %q", got)
	}
}

// TestRealKubelet: the harness itself, on the real kubelet: a flag beats --config, which the
// --config-dir drop-ins are merged over; the pod DNS configurer reads the file kubelet names; a
// removed flag (--pod-infra-container-image, gone from kubelet 1.36's flag set) stops kubelet.
func TestRealKubelet(t *testing.T) {
	k := Require(t)
	root := fixture.Tree(t, map[string]string{
		"/var/lib/kubelet/config.yaml":          "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nresolvConf: /etc/resolv.conf\nclusterDNS: [10.96.0.10]\nclusterDomain: cluster.local\n",
		"/etc/kubernetes/kubelet.conf.d/a.conf": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nresolvConf: /run/a.conf\n",
		"/etc/resolv.conf":                      "nameserver 127.0.0.53\nsearch example.org\n",
		"/run/b.conf":                           "nameserver 10.66.0.53\nsearch corp.example\noptions ndots:2\n",
	})
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--config=/var/lib/kubelet/config.yaml"}, "/etc/resolv.conf"},
		{[]string{"--config=/var/lib/kubelet/config.yaml", "--config-dir=/etc/kubernetes/kubelet.conf.d"}, "/run/a.conf"},
		{[]string{"--config=/var/lib/kubelet/config.yaml", "--resolv-conf=/run/b.conf", "--config-dir=/etc/kubernetes/kubelet.conf.d"}, "/run/b.conf"},
	}
	var last Config
	for _, tc := range tests {
		c, err := k.Effective(t, root, Start{Args: tc.args})
		if err != nil {
			t.Fatal(err)
		}
		if c.ResolvConf() != tc.want || c.ClusterDomain() != "cluster.local" {
			t.Errorf("kubelet %q: resolvConf %q clusterDomain %q; want %s", tc.args, c.ResolvConf(), c.ClusterDomain(), tc.want)
		}
		last = c
	}
	for policy, want := range map[string]string{
		"Default":      "nameserver 10.66.0.53\nsearch corp.example\noptions ndots:2\n",
		"ClusterFirst": "nameserver 10.96.0.10\nsearch default.svc.cluster.local svc.cluster.local cluster.local corp.example\noptions ndots:5\n",
	} {
		got, err := k.PodResolvConf(t, root, last, policy)
		if err != nil || got != want {
			t.Errorf("%s pod: %q %v, want %q", policy, got, err, want)
		}
	}
	_, err := k.Effective(t, root, Start{Args: []string{"--config=/var/lib/kubelet/config.yaml", "--pod-infra-container-image=registry.k8s.io/pause:3.10"}})
	var refused *Refused
	if !errors.As(err, &refused) || !strings.Contains(refused.Msg, "unknown flag: --pod-infra-container-image") {
		t.Errorf("kubelet with --pod-infra-container-image: %v, want it refused as an unknown flag", err)
	}
}

// TestRancherModel: what the model of RKE2 and k3s (.ci/kubelet-judge/rancher.go) does, one rule of
// their sources at a time, and the real kubelet on its result: config.yaml.d drop-ins in any letter
// case, kubelet-arg+ appending, a config key over the environment variable, kubelet-args sorted by
// name as written (pkg/util GetArgs), the choice in k3s's own drop-in, RKE2's flags first.
func TestRancherModel(t *testing.T) {
	k := Require(t)
	const defaults = "/var/lib/rancher/k3s/agent/etc/kubelet.conf.d/00-k3s-defaults.conf"
	stub, uplink := "nameserver 127.0.0.53\n", "nameserver 10.66.0.53\n"
	root := fixture.Tree(t, map[string]string{
		"/etc/rancher/k3s/config.yaml":              "kubelet-arg: [max-pods=50, resolv_conf=/a]\nwrite-kubeconfig-mode: \"0644\"\n",
		"/etc/rancher/k3s/config.yaml.d/10-x.YAML":  "kubelet-arg+: [--resolv-conf=/b]\nresolv-conf: /c\n",
		"/etc/rancher/k3s/config.yaml.d/20-y.yaml~": "resolv-conf: /not-read\n",
		"/etc/resolv.conf":                          stub,
		"/run/systemd/resolve/resolv.conf":          uplink,
		defaults:                                    "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nclusterDNS: [10.43.0.10]\nclusterDomain: cluster.local\n",
	})
	s, err := k.Rancher(t, root, "k3s", []string{"server"}, []string{"K3S_RESOLV_CONF=/env"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--cloud-provider=external", "--config-dir=/var/lib/rancher/k3s/agent/etc/kubelet.conf.d",
		"--kubeconfig=/var/lib/rancher/k3s/agent/kubelet.kubeconfig", "--max-pods=50", "--node-labels=", "--resolv-conf=/b", "--resolv_conf=/a"}
	if strings.Join(s.Args, " ") != strings.Join(want, " ") {
		t.Errorf("kubelet's arguments %q, want %q", s.Args, want)
	}
	if got := string(s.Files[defaults]); !strings.Contains(got, "resolvConf: /c\n") || !strings.Contains(got, "clusterDomain: cluster.local\n") {
		t.Errorf("k3s's drop-in:\n%s", got)
	}
	c, err := k.Effective(t, root, s)
	if err != nil {
		t.Fatal(err)
	}
	if c.ResolvConf() != "/a" || c.ClusterDomain() != "cluster.local" || c["MaxPods"] != float64(50) {
		t.Errorf("kubelet reads resolvConf %q, clusterDomain %q, maxPods %v; want /a (resolv_conf= passed last), cluster.local, 50", c.ResolvConf(), c.ClusterDomain(), c["MaxPods"])
	}

	// Without config: the variable, else the first file with only global unicast nameservers,
	// else the file k3s writes with 8.8.8.8; RKE2's own flags come first.
	for _, tc := range []struct {
		shape, stub string
		env         []string
		want        string
	}{
		{"k3s", stub, []string{"K3S_RESOLV_CONF=/env"}, "/env"},
		{"k3s", stub, nil, "/run/systemd/resolve/resolv.conf"},
		{"k3s", "nameserver 10.0.0.2\n", nil, "/etc/resolv.conf"},
		{"rke2", "nameserver 169.254.25.10\n", []string{"RKE2_RESOLV_CONF="}, "/run/systemd/resolve/resolv.conf"},
	} {
		root := fixture.Tree(t, map[string]string{"/etc/resolv.conf": tc.stub, "/run/systemd/resolve/resolv.conf": uplink})
		s, err := k.Rancher(t, root, tc.shape, []string{"agent"}, tc.env)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(s.Files["/var/lib/rancher/"+tc.shape+"/agent/etc/kubelet.conf.d/00-"+tc.shape+"-defaults.conf"]); !strings.Contains(got, "resolvConf: "+tc.want+"\n") {
			t.Errorf("%s %v: its drop-in:\n%s\nwant resolvConf %s", tc.shape, tc.env, got, tc.want)
		}
		if tc.shape == "rke2" && (len(s.Args) < 3 || s.Args[0] != "--volume-plugin-dir=/var/lib/kubelet/volumeplugins") {
			t.Errorf("rke2's arguments %q do not start with its own", s.Args)
		}
	}
	root = fixture.Tree(t, map[string]string{"/etc/resolv.conf": stub})
	s, err = k.Rancher(t, root, "k3s", []string{"server"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(s.Files["/var/lib/rancher/k3s/agent/etc/resolv.conf"]); got != "nameserver 8.8.8.8\n" {
		t.Errorf("the file k3s generates: %q", got)
	}
	// A flag the model does not know is refused, not dropped.
	if _, err := k.Rancher(t, root, "k3s", []string{"server", "--disable", "traefik"}, nil); err == nil {
		t.Error("an unmodelled flag on the command line was taken")
	}
}
