package systemd

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func readKubelet(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata/kubelet", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestKubesprayKubelet: the files kubespray's roles/kubernetes/node writes (rendered by Ansible
// from kubelet.service.j2 and kubelet.env.v1beta1.j2): --config comes from KUBELET_ARGS, a
// double-quoted value continued over five lines of /etc/kubernetes/kubelet.env (internal/kubelet
// finds it there).
func TestKubesprayKubelet(t *testing.T) {
	u := ParseServiceUnit("kubelet.service", []UnitFile{{Path: "/etc/systemd/system/kubelet.service", Data: readKubelet(t, "kubespray-kubelet.service")}})
	if u.Err != nil || len(u.Warnings) != 0 {
		t.Fatalf("Err %v, warnings %v", u.Err, u.Warnings)
	}
	wantFiles := []EnvFile{{Path: "/etc/kubernetes/kubelet.env", Optional: true, Source: Setting{"/etc/systemd/system/kubelet.service", 8}}}
	if diff := cmp.Diff(wantFiles, u.EnvironmentFiles); diff != "" {
		t.Errorf("EnvironmentFiles (-want +got):\n%s", diff)
	}
	wantArgv := []string{"/usr/local/bin/kubelet", "$KUBE_LOGTOSTDERR", "$KUBE_LOG_LEVEL", "$KUBELET_API_SERVER", "$KUBELET_ADDRESS",
		"$KUBELET_PORT", "$KUBELET_HOSTNAME", "$KUBELET_ARGS", "$DOCKER_SOCKET", "$KUBELET_NETWORK_PLUGIN", "$KUBELET_VOLUME_PLUGIN", "$KUBELET_CLOUDPROVIDER"}
	if len(u.ExecStart) != 1 {
		t.Fatalf("ExecStart = %+v, want one command", u.ExecStart)
	}
	if diff := cmp.Diff(wantArgv, u.ExecStart[0].Argv); diff != "" {
		t.Errorf("ExecStart argv (-want +got):\n%s", diff)
	}
	if u.ExecStart[0].Source.Line != 9 {
		t.Errorf("ExecStart at line %d, want 9 (its first line)", u.ExecStart[0].Source.Line)
	}

	env, warns, err := ParseEnvFile("/etc/kubernetes/kubelet.env", readKubelet(t, "kubespray-kubelet.env"))
	if err != nil || len(warns) != 0 {
		t.Fatalf("ParseEnvFile: %v %v", err, warns)
	}
	want := []EnvVar{
		{"KUBE_LOG_LEVEL", "--v=2", Setting{"/etc/kubernetes/kubelet.env", 1}},
		{"KUBELET_ADDRESS", "--node-ip=10.66.0.100", Setting{"/etc/kubernetes/kubelet.env", 2}},
		{"KUBELET_HOSTNAME", "--hostname-override=node1", Setting{"/etc/kubernetes/kubelet.env", 3}},
		{"KUBELET_ARGS", "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --config=/etc/kubernetes/kubelet-config.yaml --kubeconfig=/etc/kubernetes/kubelet.conf --runtime-cgroups=/system.slice/containerd.service  ", Setting{"/etc/kubernetes/kubelet.env", 6}},
		{"KUBELET_CLOUDPROVIDER", "", Setting{"/etc/kubernetes/kubelet.env", 11}},
		{"PATH", "/usr/local/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", Setting{"/etc/kubernetes/kubelet.env", 13}},
	}
	if diff := cmp.Diff(want, env); diff != "" {
		t.Errorf("kubelet.env (-want +got):\n%s", diff)
	}
}

// TestKubeadmKubelet: kubeadm's packages install kubelet.service and the 10-kubeadm.conf drop-in
// (pkgs.k8s.io); the drop-in resets ExecStart= and passes --config through KUBELET_CONFIG_ARGS
// (internal/kubelet finds it there).
func TestKubeadmKubelet(t *testing.T) {
	files := []UnitFile{
		{Path: "/usr/lib/systemd/system/kubelet.service", Data: readKubelet(t, "kubeadm-kubelet.service")},
		{Path: "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf", Data: readKubelet(t, "10-kubeadm.conf")},
	}
	u := ParseServiceUnit("kubelet.service", files)
	if u.Err != nil || len(u.Warnings) != 0 || len(u.ExecStart) != 1 {
		t.Fatalf("Err %v, warnings %v, ExecStart %+v", u.Err, u.Warnings, u.ExecStart)
	}
	if got := u.ExecStart[0].Source; got != (Setting{"/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf", 11}) {
		t.Errorf("ExecStart from %v, want the drop-in's second ExecStart=", got)
	}
	flags, _, err := ParseEnvFile("/var/lib/kubelet/kubeadm-flags.env", readKubelet(t, "kubeadm-flags.env"))
	if err != nil {
		t.Fatal(err)
	}
	if len(flags) != 1 || flags[0].Name != "KUBELET_KUBEADM_ARGS" {
		t.Errorf("kubeadm-flags.env = %+v, want KUBELET_KUBEADM_ARGS", flags)
	}
}

func TestParseServiceUnit(t *testing.T) {
	const p = "/etc/systemd/system/x.service"
	type cmd struct {
		Path        string
		Argv        []string
		Ignore, Raw bool
	}
	tests := []struct {
		name  string
		unit  string
		cmds  []cmd
		env   []string // NAME=VALUE
		files []string // path, "-" prefixed when optional
		warns []string
		err   string
	}{
		{
			name: "quoting, escapes and prefixes",
			unit: "[Service]\nExecStart=-:/bin/echo \"a b\" 'c\"d' e\\x41\\sf \\q \"\" --x=\"y z\"\n",
			cmds: []cmd{{Path: "/bin/echo", Argv: []string{"/bin/echo", "a b", `c"d`, "eA f", `\q`, "", "--x=y z"}, Ignore: true, Raw: true}},
		},
		{
			name: "continuation, comments inside it, CRLF and a BOM",
			unit: "\xef\xbb\xbf[Service]\r\nExecStart=/bin/kubelet \\\r\n# a comment\r\n  --config=/c.yaml \\\r\n  --v=2\r\n",
			cmds: []cmd{{Path: "/bin/kubelet", Argv: []string{"/bin/kubelet", "--config=/c.yaml", "--v=2"}}},
		},
		{
			name: "empty ExecStart= resets, in a drop-in order",
			unit: "[Service]\nExecStart=/bin/a\nExecStart=\nExecStart=/bin/b x\n",
			cmds: []cmd{{Path: "/bin/b", Argv: []string{"/bin/b", "x"}}},
		},
		{
			name: "oneshot may have several commands, separated by ;",
			unit: "[Service]\nType=oneshot\nExecStart=/bin/a 1 ; /bin/b \\; 2\nExecStart=@/bin/c argv0 3\n",
			cmds: []cmd{{Path: "/bin/a", Argv: []string{"/bin/a", "1"}}, {Path: "/bin/b", Argv: []string{"/bin/b", ";", "2"}}, {Path: "/bin/c", Argv: []string{"argv0", "3"}}},
		},
		{
			name:  "Environment= quoting, reset and replacement",
			unit:  "[Service]\nEnvironment=A=1 \"B=two words\"\nEnvironment=C=3\nEnvironment=\nEnvironment='D=x y' E=\\x41\nEnvironment=D=z 1BAD=x\n",
			env:   []string{"D=z", "E=A"},
			warns: []string{p + ":6: Environment=: invalid environment assignment, ignoring: 1BAD=x"},
		},
		{
			name:  "EnvironmentFile= optional, simplified, relative refused",
			unit:  "[Service]\nEnvironmentFile=-/etc//default/./kubelet/\nEnvironmentFile=/etc/sysconfig/kubelet\nEnvironmentFile=rel.env\nEnvironmentFile=/a/../b\n",
			files: []string{"-/etc/default/kubelet", "/etc/sysconfig/kubelet"},
			warns: []string{p + ":4: EnvironmentFile=: path \"rel.env\" is not absolute, ignoring", p + ":5: EnvironmentFile=: path \"/a/../b\" is not normalized, ignoring"},
		},
		{
			name: "specifiers",
			unit: "[Service]\nEnvironment=N=%n P=%p\nExecStart=/bin/x --name=%N 100%% %H\n",
			cmds: []cmd{{Path: "/bin/x", Argv: []string{"/bin/x", "--name=x", "100%", "%H"}}},
			env:  []string{"N=x.service", "P=x"},
		},
		{
			name:  "other sections and unknown lines",
			unit:  "ExecStart=/bin/outside\n[Unit]\nExecStart=/bin/unit\n[Service]\nnot an assignment\n=x\nExecstart=/bin/case\nExecStart=/bin/ok\n",
			cmds:  []cmd{{Path: "/bin/ok", Argv: []string{"/bin/ok"}}},
			warns: []string{p + ":1: assignment outside of section, ignoring", p + ":5: missing '=', ignoring line", p + ":6: missing key name before '=', ignoring line"},
		},
		{
			// systemd-analyze verify 252 on this unit says only "x.service:1: Unknown section 'Foo'.
			// Ignoring." and "x.service:6: Unknown section ''. Ignoring.".
			name:  "an unknown section is warned about once and its lines are skipped",
			unit:  "[Foo]\nnot an assignment\nExecStart=/bin/foo\n[X-Ours]\nnot one either\n[]\n=x\n[Service]\nExecStart=/bin/ok\n",
			cmds:  []cmd{{Path: "/bin/ok", Argv: []string{"/bin/ok"}}},
			warns: []string{p + ":1: unknown section \"Foo\", ignoring", p + ":6: unknown section \"\", ignoring"},
		},
		{
			name:  "a bad command with '-' is skipped",
			unit:  "[Service]\nExecStart=-relative/path x\nExecStart=/bin/ok\n",
			cmds:  []cmd{{Path: "/bin/ok", Argv: []string{"/bin/ok"}}},
			warns: []string{p + ":2: ExecStart=: neither a valid executable name nor an absolute path: \"relative/path\", ignoring"},
		},
		{name: "bad command", unit: "[Service]\nExecStart=/bin/x \"unbalanced\n", err: p + ":2: ExecStart=: unbalanced quoting in \"/bin/x \\\"unbalanced\""},
		{name: "bad section header", unit: "[Service\nExecStart=/bin/x\n", err: p + ":1: invalid section header \"[Service\""},
		{name: "not UTF-8", unit: "[Service]\nExecStart=/bin/x \xff\n", err: p + ":2: line is not valid UTF-8: systemd refuses to load the unit"},
		{name: "two commands in a simple service", unit: "[Service]\nExecStart=/bin/a\nExecStart=/bin/b\n", err: p + ":3: more than one ExecStart= in a Type=simple service: systemd refuses to load x.service"},
		{name: "unknown specifier", unit: "[Service]\nExecStart=/bin/x %Z\n", err: p + ":2: ExecStart=: failed to resolve unit specifiers in \"%Z\": unknown specifier %Z"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := ParseServiceUnit("x.service", []UnitFile{{Path: p, Data: []byte(tc.unit)}})
			gotErr := ""
			if u.Err != nil {
				gotErr = u.Err.Error()
			}
			if gotErr != tc.err {
				t.Fatalf("Err = %q, want %q", gotErr, tc.err)
			}
			if tc.err != "" {
				return
			}
			var cmds []cmd
			for _, c := range u.ExecStart {
				cmds = append(cmds, cmd{c.Path, c.Argv, c.IgnoreFailure, c.NoEnvExpand})
			}
			if diff := cmp.Diff(tc.cmds, cmds); diff != "" {
				t.Errorf("ExecStart (-want +got):\n%s", diff)
			}
			var env, files, warns []string
			for _, e := range u.Environment {
				env = append(env, e.Name+"="+e.Value)
			}
			for _, f := range u.EnvironmentFiles {
				s := f.Path
				if f.Optional {
					s = "-" + s
				}
				files = append(files, s)
			}
			for _, w := range u.Warnings {
				warns = append(warns, w.String())
			}
			if diff := cmp.Diff(tc.env, env); diff != "" {
				t.Errorf("Environment (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.files, files); diff != "" {
				t.Errorf("EnvironmentFiles (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.warns, warns); diff != "" {
				t.Errorf("Warnings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseEnvFileAsSystemd(t *testing.T) {
	const p = "/etc/default/kubelet"
	tests := []struct {
		name  string
		in    string
		want  []string // NAME=VALUE@LINE
		warns []string
		err   string
	}{
		{"plain, blanks trimmed", "A=1\n  B = two words  \n\nC=\n", []string{"A=1@1", "B=two words@2", "C=@4"}, nil, ""},
		{"comments, one continued by a backslash", "# x \\\nA=hidden\n; y\nB=2\n", []string{"B=2@4"}, nil, ""},
		{"single quotes are literal", "A='x \\\" $y'\n", []string{`A=x \" $y@1`}, nil, ""},
		{"double quotes: escapes and continuation", "A=\"a\\\"b \\$c \\q \\\\ d \\\ne\"\n", []string{`A=a"b $c \q \ d e@1`}, nil, ""},
		{"unquoted escapes and continuation", "A=a\\ b\\\nc  \n", []string{"A=a bc@1"}, nil, ""},
		{"quoted parts join", "A=\"x\" 'y'z\n", []string{"A=xyz@1"}, nil, ""},
		{"later assignment wins in place", "A=1\nB=2\nA=3\n", []string{"A=3@3", "B=2@2"}, nil, ""},
		{"no newline at the end, open quote", "A=\"open", []string{"A=open@1"}, nil, ""},
		{"a key without = is dropped", "JUSTAKEY\nA=1\n", []string{"A=1@2"}, nil, ""},
		{"invalid names are skipped", "export A=1\nB-C=2\nD=3\n", []string{"D=3@3"},
			[]string{p + `:1: invalid environment assignment "export A=1", ignoring`, p + `:2: invalid environment assignment "B-C=2", ignoring`}, ""},
		{"reading stops at NUL", "A=1\x00B=2\n", []string{"A=1@1"}, nil, ""},
		{"not UTF-8", "A=1\nB=\xff\n", nil, nil, p + ":2: invalid UTF-8: systemd does not load this environment file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vars, warns, err := ParseEnvFile(p, []byte(tc.in))
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got, gotW []string
			for _, v := range vars {
				got = append(got, v.Name+"="+v.Value+"@"+strconv.Itoa(v.Source.Line))
				if v.Source.Path != p {
					t.Errorf("Source.Path = %q", v.Source.Path)
				}
			}
			for _, w := range warns {
				gotW = append(gotW, w.String())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("vars (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.warns, gotW); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExpandArgv(t *testing.T) {
	env := []EnvVar{
		{Name: "ARGS", Value: `--a=1  "--b=two words" --c\ d  `},
		{Name: "EMPTY", Value: ""},
		{Name: "CFG", Value: "/etc/k.yaml"},
		{Name: "SP", Value: "x y"},
	}
	tests := []struct {
		in   []string
		want []string
		vars []string
	}{
		{[]string{"/bin/k", "$ARGS", "$UNSET", "$EMPTY", "--z"}, []string{"/bin/k", "--a=1", "--b=two words", "--c d", "--z"}, []string{"", "ARGS", "ARGS", "ARGS", ""}},
		{[]string{"--config=${CFG}", "${SP}", "pre${UNSET}post", "$$CFG", "a$CFG", "${CFG:-x}", "${CFG"}, []string{"--config=/etc/k.yaml", "x y", "prepost", "$CFG", "a$CFG", "${CFG:-x}", "${CFG"}, []string{"CFG", "SP", "UNSET", "", "", "", ""}},
		// A word that starts with $ is a whole-word variable named by the rest of the word: "CFG-x"
		// and "" are unset, so the word gives no argument.
		{[]string{"$CFG-x", "$"}, nil, nil},
	}
	for _, tc := range tests {
		got := ExpandArgv(tc.in, env)
		var vals, vars []string
		for _, a := range got {
			vals = append(vals, a.Value)
			vars = append(vars, a.Var)
		}
		if diff := cmp.Diff(tc.want, vals); diff != "" {
			t.Errorf("ExpandArgv(%q) (-want +got):\n%s", tc.in, diff)
		}
		if diff := cmp.Diff(tc.vars, vars); diff != "" {
			t.Errorf("ExpandArgv(%q) vars (-want +got):\n%s", tc.in, diff)
		}
	}
}

// TestUnitDependencies: dependency settings of [Unit] as config_parse_unit_deps reads them (the
// node reads the nodedns unit's Before= through it). TestUnitsUnderSystemd checks the same rules
// against systemd as PID 1.
func TestUnitDependencies(t *testing.T) {
	const p = "/etc/systemd/system/nodedns.service"
	deps := func(units ...string) ([]string, *Warning) {
		var files []UnitFile
		for i, u := range units {
			path := p
			if i > 0 {
				path = p + ".d/" + strconv.Itoa(i) + ".conf"
			}
			files = append(files, UnitFile{Path: path, Data: []byte(u)})
		}
		return UnitDependencies("nodedns.service", "Before", files)
	}
	unit := "[Unit]\nBefore=a.service\n# Before=commented.service\nBefore=kubelet.service b.service\n[Service]\nBefore=not-unit.service\n[Unit]\nAfter=x\n"
	got, fatal := deps(unit)
	if diff := cmp.Diff([]string{"a.service", "kubelet.service", "b.service"}, got); diff != "" || fatal != nil {
		t.Errorf("fatal %v, (-want +got):\n%s", fatal, diff)
	}
	// An empty assignment does not reset a dependency list, in a file or across drop-ins.
	if got, _ := deps("[Unit]\nBefore=a\nBefore=\nBefore=b\n", "[Unit]\nBefore=\nBefore=c\n"); !cmp.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("an empty Before=: %v", got)
	}
	// Continuations join lines (a comment inside is skipped); quotes and backslashes stay in the
	// word; specifiers of the unit's name are resolved, a word with an unknown one is skipped.
	got, _ = deps("[Unit]\nBefore=a.service \\\n# b.service\n  c.service\t\"d.service\" e\\x2d.service %p-f.service %Z.service 100%%.service\n")
	if diff := cmp.Diff([]string{"a.service", "c.service", `"d.service"`, `e\x2d.service`, "nodedns-f.service", "100%.service"}, got); diff != "" {
		t.Errorf("words (-want +got):\n%s", diff)
	}
	// A file systemd refuses stops the unit from loading: what was read before it is kept.
	got, fatal = deps("[Unit]\nBefore=a.service\n", "[Unit]\nBefore=b.service\n[Unit\nBefore=c.service\n")
	if !cmp.Equal(got, []string{"a.service", "b.service"}) || fatal == nil || fatal.String() != p+`.d/1.conf:3: invalid section header "[Unit": systemd refuses to load the unit` {
		t.Errorf("a bad header: %v, %v", got, fatal)
	}
}
