package kubelet

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nodedns/nodedns/systemd"
)

// The unit and environment files kubespray and kubeadm install, kept with systemd's own tests
// (which also run them under systemd as PID 1).
func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("../../systemd/testdata/kubelet", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func envFile(t testing.TB, p string, data []byte) []systemd.EnvVar {
	t.Helper()
	vars, _, err := systemd.ParseEnvFile(p, data)
	if err != nil {
		t.Fatal(err)
	}
	return vars
}

// TestUnitConfigKubespray: the files kubespray's roles/kubernetes/node writes (rendered by Ansible
// from kubelet.service.j2 and kubelet.env.v1beta1.j2): --config comes from KUBELET_ARGS, a
// double-quoted value continued over five lines of /etc/kubernetes/kubelet.env.
func TestUnitConfigKubespray(t *testing.T) {
	u := systemd.ParseServiceUnit(Unit, []systemd.UnitFile{{Path: "/etc/systemd/system/kubelet.service", Data: readFixture(t, "kubespray-kubelet.service")}})
	env := envFile(t, "/etc/kubernetes/kubelet.env", readFixture(t, "kubespray-kubelet.env"))
	ref, ok := UnitConfig(u, systemd.MergeEnv(u.Environment, env))
	if !ok || ref.Config != KubesprayConfig || ref.Var != "KUBELET_ARGS" || ref.Source != (systemd.Setting{Path: "/etc/kubernetes/kubelet.env", Line: 6}) || !ref.Referenced {
		t.Errorf("UnitConfig = %+v, %v; want /etc/kubernetes/kubelet-config.yaml from KUBELET_ARGS at kubelet.env:6", ref, ok)
	}
	// Without the environment file (it is optional), kubelet gets no --config.
	if ref, ok := UnitConfig(u, u.Environment); ok {
		t.Errorf("UnitConfig without kubelet.env = %+v, want none", ref)
	}
}

// TestUnitConfigKubeadm: kubeadm's packages install kubelet.service and the 10-kubeadm.conf drop-in
// (pkgs.k8s.io); the drop-in resets ExecStart= and passes --config through KUBELET_CONFIG_ARGS.
// An operator's /etc/default/kubelet can name another file: kubelet takes the last --config.
func TestUnitConfigKubeadm(t *testing.T) {
	u := systemd.ParseServiceUnit(Unit, []systemd.UnitFile{
		{Path: "/usr/lib/systemd/system/kubelet.service", Data: readFixture(t, "kubeadm-kubelet.service")},
		{Path: "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf", Data: readFixture(t, "10-kubeadm.conf")},
	})
	flags := envFile(t, "/var/lib/kubelet/kubeadm-flags.env", readFixture(t, "kubeadm-flags.env"))
	ref, ok := UnitConfig(u, systemd.MergeEnv(u.Environment, flags))
	if !ok || ref.Config != KubeadmConfig || ref.Var != "KUBELET_CONFIG_ARGS" ||
		ref.Source != (systemd.Setting{Path: "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf", Line: 4}) {
		t.Errorf("UnitConfig = %+v, %v", ref, ok)
	}

	extra := envFile(t, "/etc/default/kubelet", []byte("KUBELET_EXTRA_ARGS=--config /etc/kubelet/override.yaml --config-dir=/etc/kubelet/conf.d\n"))
	ref, ok = UnitConfig(u, systemd.MergeEnv(u.Environment, flags, extra))
	if !ok || ref.Config != "/etc/kubelet/override.yaml" || ref.Var != "KUBELET_EXTRA_ARGS" || ref.Source != (systemd.Setting{Path: "/etc/default/kubelet", Line: 1}) ||
		!ref.HasConfigDir || ref.ConfigDir != "/etc/kubelet/conf.d" {
		t.Errorf("with /etc/default/kubelet: UnitConfig = %+v, %v", ref, ok)
	}
}

func TestUnitConfigFallback(t *testing.T) {
	u := systemd.ParseServiceUnit(Unit, []systemd.UnitFile{{Path: "/u", Data: []byte("[Service]\nExecStart=/usr/bin/kubelet $KUBELET_EXTRA_ARGS\nEnvironment=KUBELET_CONFIG=/etc/kubernetes/kubelet.yaml\n")}})
	ref, ok := UnitConfig(u, u.Environment)
	if !ok || ref.Config != "/etc/kubernetes/kubelet.yaml" || ref.Referenced || ref.Var != "KUBELET_CONFIG" || ref.Source != (systemd.Setting{Path: "/u", Line: 3}) {
		t.Errorf("UnitConfig = %+v, %v; want the unreferenced KUBELET_CONFIG", ref, ok)
	}
	u = systemd.ParseServiceUnit(Unit, []systemd.UnitFile{{Path: "/u", Data: []byte("[Service]\nExecStart=:/usr/bin/kubelet --config=${CFG}\nEnvironment=CFG=/x\n")}})
	if ref, ok := UnitConfig(u, u.Environment); !ok || ref.Config != "${CFG}" || ref.Var != "" {
		t.Errorf("':' prefix: UnitConfig = %+v, want the literal ${CFG}", ref)
	}
	// KUBELET_CONFIG_ARGS split as systemd splits $VAR: quotes group.
	u = systemd.ParseServiceUnit(Unit, []systemd.UnitFile{{Path: "/u", Data: []byte("[Service]\nExecStart=/usr/bin/kubelet\nEnvironment=\"KUBELET_CONFIG_ARGS=--v=2 --config '/etc/k 8s/c.yaml'\"\n")}})
	if ref, ok := UnitConfig(u, u.Environment); !ok || ref.Config != "/etc/k 8s/c.yaml" || ref.Referenced || ref.Var != "KUBELET_CONFIG_ARGS" {
		t.Errorf("quoted KUBELET_CONFIG_ARGS: UnitConfig = %+v, %v", ref, ok)
	}
}

// FuzzUnitConfig: whatever the unit and environment file, a config found is a config.
func FuzzUnitConfig(f *testing.F) {
	for _, name := range []string{"kubespray-kubelet.service", "kubeadm-kubelet.service", "10-kubeadm.conf"} {
		f.Add(readFixture(f, name), readFixture(f, "kubespray-kubelet.env"))
	}
	f.Add([]byte("[Service]\nExecStart=/usr/bin/kubelet\nEnvironment=KUBELET_CONFIG=/k.yaml\n"), []byte("KUBELET_CONFIG_ARGS='--config /x'\n"))
	f.Fuzz(func(t *testing.T, unit, env []byte) {
		u := systemd.ParseServiceUnit(Unit, []systemd.UnitFile{{Path: "/etc/systemd/system/kubelet.service", Data: unit}})
		vars, _, err := systemd.ParseEnvFile("/etc/kubernetes/kubelet.env", env)
		if err != nil {
			vars = nil
		}
		if ref, ok := UnitConfig(u, systemd.MergeEnv(u.Environment, vars)); ok && !ref.HasConfig {
			t.Errorf("UnitConfig ok without a config: %+v", ref)
		}
	})
}
