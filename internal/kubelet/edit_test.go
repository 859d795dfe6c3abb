package kubelet

import (
	"bytes"
	"strings"
	"testing"

	"github.com/nodedns/nodedns/systemd"
	"go.yaml.in/yaml/v3"
)

const nodednsFile = "/var/lib/nodedns/resolv.conf"

func TestSetYAMLKey(t *testing.T) {
	tests := []struct {
		name, in, want, err string
	}{
		{name: "plain value, comment kept", in: "a: 1\nresolvConf: /etc/resolv.conf # the stub\nb: [x, y]\n",
			want: "a: 1\nresolvConf: /var/lib/nodedns/resolv.conf # the stub\nb: [x, y]\n"},
		{name: "double quotes stay", in: "resolvConf: \"/etc/resolv.conf\"\nz: 2\n",
			want: "resolvConf: \"/var/lib/nodedns/resolv.conf\"\nz: 2\n"},
		{name: "single quotes stay", in: "resolvConf: '/etc/it''s'\n",
			want: "resolvConf: '/var/lib/nodedns/resolv.conf'\n"},
		{name: "a key set twice is refused, as kubelet's strict reader refuses it", in: "resolvConf: /a\nresolvConf: /b\n",
			err: "already defined"},
		{name: "absent: appended after a comment, a missing last newline added", in: "kind: KubeletConfiguration",
			want: "kind: KubeletConfiguration\n# c\nresolvConf: /var/lib/nodedns/resolv.conf\n"},
		{name: "empty file", in: "", want: "# c\nresolvConf: /var/lib/nodedns/resolv.conf\n"},
		{name: "empty value", in: "resolvConf: \"\"\n", want: "resolvConf: \"/var/lib/nodedns/resolv.conf\"\n"},
		{name: "block scalar refused", in: "resolvConf: |\n  /etc/resolv.conf\n", err: "block scalar"},
		{name: "flow mapping refused", in: "{resolvConf: /etc/resolv.conf}\n", err: "not a block mapping"},
		{name: "two documents refused", in: "a: 1\n---\nb: 2\n", err: "more than one YAML document"},
		{name: "document end marker: the appended key would not be read", in: "a: 1\n...\n", err: "read"},
		{name: "tagged value refused", in: "resolvConf: !!binary L2V0Yw==\n", err: "tag"},
		{name: "a value over two lines refused", in: "resolvConf: \"/etc/\n  resolv.conf\"\n", err: "does not end on its line"},
		{name: "not YAML", in: "a: [\n", err: "not YAML"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SetYAMLKey([]byte(tc.in), "resolvConf", nodednsFile, "c")
			checkEdit(t, got, err, tc.want, tc.err)
		})
	}
	if _, err := SetYAMLKey([]byte("a: 1\n"), "resolvConf", "/a path/with space", ""); err == nil {
		t.Error("a value that needs quoting was written")
	}
}

func TestSetYAMLListItem(t *testing.T) {
	tests := []struct {
		name, in string
		line     int
		want     string
		err      string
	}{
		{name: "block list, quoted", in: "kubelet-arg:\n  - \"max-pods=110\"\n  - \"resolv-conf=/etc/resolv.conf\"\n", line: 3,
			want: "kubelet-arg:\n  - \"max-pods=110\"\n  - \"resolv-conf=/var/lib/nodedns/resolv.conf\"\n"},
		{name: "flow list", in: "kubelet-arg: [max-pods=110, resolv-conf=/etc/resolv.conf] # k\n", line: 1,
			want: "kubelet-arg: [max-pods=110, resolv-conf=/var/lib/nodedns/resolv.conf] # k\n"},
		{name: "flow list, one item", in: "kubelet-arg: [resolv-conf=/etc/resolv.conf] # k\n", line: 1,
			want: "kubelet-arg: [resolv-conf=/var/lib/nodedns/resolv.conf] # k\n"},
		{name: "one string", in: "kubelet-arg: resolv-conf=/etc/resolv.conf\n", line: 1,
			want: "kubelet-arg: resolv-conf=/var/lib/nodedns/resolv.conf\n"},
		{name: "the appending key", in: "kubelet-arg+:\n- resolv-conf=/x\n", line: 2,
			want: "kubelet-arg+:\n- resolv-conf=/var/lib/nodedns/resolv.conf\n"},
		{name: "no item on that line", in: "kubelet-arg:\n- a=b\n", line: 5, err: "no kubelet-arg item on line 5"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SetYAMLListItem([]byte(tc.in), "kubelet-arg", tc.line, "resolv-conf="+nodednsFile)
			checkEdit(t, got, err, tc.want, tc.err)
		})
	}
}

func TestSetEnvFlag(t *testing.T) {
	kubespray := "KUBE_LOG_LEVEL=\"--v=2\"\nKUBELET_ARGS=\"--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf \\\n--config=/etc/kubernetes/kubelet-config.yaml \\\n--resolv-conf=/run/systemd/resolve/resolv.conf \\\n--kubeconfig=/etc/kubernetes/kubelet.conf \\\n \"\nPATH=/usr/bin\n"
	tests := []struct {
		name, in, v, want, err string
	}{
		{name: "kubeadm's sysconfig", in: "KUBELET_EXTRA_ARGS=--resolv-conf=/etc/resolv.conf\n", v: "KUBELET_EXTRA_ARGS",
			want: "KUBELET_EXTRA_ARGS=--resolv-conf=/var/lib/nodedns/resolv.conf\n"},
		{name: "flag and value apart, quoted", in: "# x\nKUBELET_KUBEADM_ARGS=\"--a=b --resolv-conf /etc/resolv.conf --c\"\n", v: "KUBELET_KUBEADM_ARGS",
			want: "# x\nKUBELET_KUBEADM_ARGS=\"--a=b --resolv-conf /var/lib/nodedns/resolv.conf --c\"\n"},
		{name: "kubespray's kubelet.env over several lines", in: kubespray, v: "KUBELET_ARGS",
			want: strings.Replace(kubespray, "--resolv-conf=/run/systemd/resolve/resolv.conf", "--resolv-conf=/var/lib/nodedns/resolv.conf", 1)},
		{name: "the last assignment is the one systemd reads", in: "A=--resolv-conf=/x\nA=--resolv-conf=/y\n", v: "A",
			want: "A=--resolv-conf=/x\nA=--resolv-conf=/var/lib/nodedns/resolv.conf\n"},
		{name: "two flags: the last, which kubelet keeps, is edited", in: "A=\"--resolv-conf=/x --resolv-conf=/y\"\n", v: "A",
			want: "A=\"--resolv-conf=/x --resolv-conf=/var/lib/nodedns/resolv.conf\"\n"},
		{name: "the old value also written before the flag: only the flag's is edited", in: "A=\"--log=/y --resolv-conf=/y\"\n", v: "A",
			want: "A=\"--log=/y --resolv-conf=/var/lib/nodedns/resolv.conf\"\n"},
		{name: "no flag", in: "A=--v=2\n", v: "A", err: "has no --resolv-conf"},
		{name: "no variable", in: "B=1\n", v: "A", err: "no A"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SetEnvFlag("/etc/x", []byte(tc.in), tc.v, nodednsFile)
			checkEdit(t, got, err, tc.want, tc.err)
		})
	}
}

func TestSetEnvVar(t *testing.T) {
	got, err := SetEnvVar("/e", []byte("K3S_TOKEN=x\nK3S_RESOLV_CONF=\"/etc/resolv.conf\"\n"), "K3S_RESOLV_CONF", 2, nodednsFile)
	if err != nil || string(got) != "K3S_TOKEN=x\nK3S_RESOLV_CONF=\"/var/lib/nodedns/resolv.conf\"\n" {
		t.Errorf("got %q, %v", got, err)
	}
	if _, err := SetEnvVar("/e", []byte("A=\"/etc/\nresolv.conf\"\n"), "A", 1, nodednsFile); err == nil {
		t.Error("a value over two lines was cut")
	}
	if _, err := SetEnvVar("/e", []byte("B=1\n"), "A", 1, nodednsFile); err == nil {
		t.Error("a line that assigns another variable was edited")
	}
}

// TestAfter: kubelet's walk of --config-dir (dropIns) and after agree on which drop-in comes last.
func TestAfter(t *testing.T) {
	d := "/etc/kubernetes/kubelet.conf.d"
	ours := d + "/" + DropInName
	for from, want := range map[string]bool{
		d + "/20-dns/50-stub.conf":      false,
		d + "/10-base.conf":             false,
		d + "/zzz.conf":                 true,
		d + "/zzz/a.conf":               true,
		d + "/zz-nodedns.conf.d/a.conf": true,
		"/var/lib/kubelet/config.yaml":  false,
	} {
		if got := after(d, from, ours); got != want {
			t.Errorf("after(%s) = %v, want %v", from, got, want)
		}
	}
}

// checkEdit: an edit that succeeds changes exactly the one value a reader sees, and nothing of the
// bytes before the changed line.
func checkYAMLEdit(t *testing.T, in, out []byte, check func(map[string]any) bool) {
	t.Helper()
	var v map[string]any
	if err := yaml.Unmarshal(out, &v); err != nil {
		t.Fatalf("the edit of %q does not parse: %v\n%s", in, err, out)
	}
	if !check(v) {
		t.Fatalf("the edit of %q reads %v", in, v)
	}
}

func FuzzSetYAMLKey(f *testing.F) {
	f.Add([]byte("a: 1\nresolvConf: /etc/resolv.conf # c\n"))
	f.Add([]byte("resolvConf: \"/x\\\"y\"\n"))
	f.Add([]byte("resolvConf: 'a''b'\nz: [1, 2]\n"))
	f.Add([]byte("kind: KubeletConfiguration"))
	f.Add([]byte("&a resolvConf: *a\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := SetYAMLKey(data, "resolvConf", nodednsFile, "c")
		if err != nil {
			return
		}
		checkYAMLEdit(t, data, out, func(v map[string]any) bool { return v["resolvConf"] == nodednsFile })
	})
}

func FuzzSetYAMLListItem(f *testing.F) {
	f.Add([]byte("kubelet-arg:\n  - \"max-pods=110\"\n  - \"resolv-conf=/etc/resolv.conf\"\n"), 3)
	f.Add([]byte("kubelet-arg: [resolv-conf=/etc/resolv.conf]\n"), 1)
	f.Add([]byte("kubelet-arg: 'resolv-conf=/x'\n"), 1)
	f.Fuzz(func(t *testing.T, data []byte, line int) {
		out, err := SetYAMLListItem(data, "kubelet-arg", line, "resolv-conf="+nodednsFile)
		if err != nil {
			return
		}
		checkYAMLEdit(t, data, out, func(v map[string]any) bool {
			return bytes.Contains(out, []byte("resolv-conf="+nodednsFile))
		})
	})
}

func FuzzSetEnvFlag(f *testing.F) {
	f.Add([]byte("KUBELET_EXTRA_ARGS=--resolv-conf=/etc/resolv.conf\n"))
	f.Add([]byte("A=\"--x \\\n--resolv-conf /etc/resolv.conf \\\n \"\n"))
	f.Add([]byte("A='--resolv-conf=/a' # c\nA=--resolv_conf=/b\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := SetEnvFlag("/e", data, "A", nodednsFile)
		if err != nil {
			return
		}
		vars, _, err := systemd.ParseEnvFile("/e", out)
		if err != nil {
			t.Fatalf("the edit of %q does not parse: %v", data, err)
		}
		v := ""
		for _, x := range vars {
			if x.Name == "A" {
				v = x.Value
			}
		}
		if fl := FlagsFromArgs(systemd.SplitWords(v)); fl.ResolvConf != nodednsFile {
			t.Fatalf("the edit of %q gives --resolv-conf %q", data, fl.ResolvConf)
		}
	})
}

func FuzzSetEnvVar(f *testing.F) {
	f.Add([]byte("K3S_RESOLV_CONF=/etc/resolv.conf\n"), 1)
	f.Add([]byte("x=1\nexport A=\"/a\" # c\n"), 2)
	f.Fuzz(func(t *testing.T, data []byte, line int) {
		out, err := SetEnvVar("/e", data, "A", line, nodednsFile)
		if err != nil {
			return
		}
		vars, _, err := systemd.ParseEnvFile("/e", out)
		if err != nil {
			t.Fatalf("the edit of %q does not parse: %v", data, err)
		}
		v := ""
		for _, x := range vars {
			if x.Name == "A" {
				v = x.Value
			}
		}
		if v != nodednsFile {
			t.Fatalf("the edit of %q gives A=%q", data, v)
		}
	})
}

// checkEdit checks an edit's result: the error containing wantErr when one is wanted, else exactly
// want.
func checkEdit(t *testing.T, got []byte, err error, want, wantErr string) {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("err = %v, want %q (got %q)", err, wantErr, got)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}
