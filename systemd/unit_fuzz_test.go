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
	})
}

// FuzzUnitDependencies feeds arbitrary unit files to UnitDependencies: it must never panic, never
// return an empty name or one with a blank, and name the file and line of a fatal error.
func FuzzUnitDependencies(f *testing.F) {
	f.Add([]byte("[Unit]\nBefore=kubelet.service\n"))
	f.Add([]byte("[Unit\nBefore\n=\n[]"))
	f.Add([]byte("[Unit]\nBefore=a \\\n# c\n b %n %Z\n"))
	const p = "/lib/systemd/system/nodedns.service"
	f.Fuzz(func(t *testing.T, data []byte) {
		deps, fatal := UnitDependencies("nodedns.service", "Before", []UnitFile{{Path: p, Data: data}})
		for _, v := range deps {
			if v == "" || strings.ContainsAny(v, whitespace) {
				t.Fatalf("bad value %q", v)
			}
		}
		if fatal != nil && (fatal.Path != p || fatal.Line < 1) {
			t.Fatalf("fatal error without its place: %+v", fatal)
		}
	})
}
