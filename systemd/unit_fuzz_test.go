package systemd

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func FuzzParseServiceUnit(f *testing.F) {
	for _, name := range []string{"kubespray-kubelet.service", "kubeadm-kubelet.service", "10-kubeadm.conf"} {
		f.Add(readKubelet(f, name), readKubelet(f, "kubespray-kubelet.env"))
	}
	f.Add([]byte(tortureUnit), []byte(tortureEnv))
	f.Add([]byte("[Service]\nType=oneshot\nExecStart=-@:+!!/bin/x a ; /bin/y \\; %n %% %H\nEnvironmentFile=-/e\n"), []byte("A=\"x\\\ny\"\n"))
	const unitPath, envPath = "/etc/systemd/system/kubelet.service", "/etc/kubernetes/kubelet.env"
	f.Fuzz(func(t *testing.T, unit, env []byte) {
		u := ParseServiceUnit("kubelet.service", []UnitFile{{Path: unitPath, Data: unit}})
		if u.Err != nil && !strings.HasPrefix(u.Err.Error(), unitPath+":") {
			t.Errorf("error %q does not name %s:LINE", u.Err, unitPath)
		}
		for _, c := range u.ExecStart {
			if len(c.Argv) == 0 || c.Path == "" || c.Source.Path != unitPath || c.Source.Line < 1 {
				t.Errorf("command without a path, arguments or source: %+v", c)
			}
		}
		for _, v := range u.Environment {
			if !envNameValid(v.Name) || !utf8.ValidString(v.Value) {
				t.Errorf("invalid assignment kept: %+v", v)
			}
		}
		for _, e := range u.EnvironmentFiles {
			if !strings.HasPrefix(e.Path, "/") || strings.Contains(e.Path, "//") {
				t.Errorf("environment file path not absolute and simplified: %q", e.Path)
			}
		}
		vars, warns, err := ParseEnvFile(envPath, env)
		if err != nil {
			if !strings.HasPrefix(err.Error(), envPath+":") {
				t.Errorf("error %q does not name %s:LINE", err, envPath)
			}
			return
		}
		seen := map[string]bool{}
		for _, v := range vars {
			if !envNameValid(v.Name) || seen[v.Name] || v.Source.Line < 1 {
				t.Errorf("bad or duplicate assignment %+v", v)
			}
			seen[v.Name] = true
		}
		for _, w := range warns {
			if w.Path != envPath || w.Line < 1 {
				t.Errorf("warning without its place: %+v", w)
			}
		}
		merged := MergeEnv(u.Environment, vars)
		for _, c := range u.ExecStart {
			for _, a := range ExpandArgv(c.Argv, merged) {
				if a.Var != "" && strings.HasPrefix(a.Var, "{") {
					t.Errorf("variable name %q", a.Var)
				}
			}
		}
		if ref, ok := FindKubeletConfig(u, merged); ok && !ref.HasConfig {
			t.Errorf("FindKubeletConfig ok without a config: %+v", ref)
		}
	})
}

func FuzzKubeletCmdline(f *testing.F) {
	f.Add([]byte("/usr/local/bin/kubelet\x00--config=/etc/kubernetes/kubelet-config.yaml\x00--v=2\x00"))
	f.Add([]byte("kubelet\x00--config\x00/a\x00--config_dir\x00/d\x00--\x00--config=/x\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		argv := ParseCmdline(data)
		if len(data) > 0 && strings.Join(argv, "\x00") != strings.TrimSuffix(string(data), "\x00") {
			t.Errorf("ParseCmdline(%q) = %q does not join back", data, argv)
		}
		if len(argv) == 0 {
			return
		}
		fl := KubeletFlagsFromArgs(argv[1:])
		if fl.HasConfig && (fl.ConfigIndex < 0 || fl.ConfigIndex >= len(argv)-1) {
			t.Errorf("ConfigIndex %d out of range", fl.ConfigIndex)
		}
		if !fl.HasConfig && fl.Config != "" {
			t.Errorf("Config %q without HasConfig", fl.Config)
		}
	})
}
