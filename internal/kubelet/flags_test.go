package kubelet

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCmdlineAndFlags(t *testing.T) {
	tests := []struct {
		name      string
		cmdline   string
		config    string
		hasConfig bool
		configDir string
	}{
		{"kubespray", "/usr/local/bin/kubelet\x00--v=2\x00--node-ip=10.66.0.100\x00--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf\x00--config=/etc/kubernetes/kubelet-config.yaml\x00--kubeconfig=/etc/kubernetes/kubelet.conf\x00", "/etc/kubernetes/kubelet-config.yaml", true, ""},
		{"separate value, last wins", "kubelet\x00--config\x00/a.yaml\x00--config\x00/b.yaml\x00", "/b.yaml", true, ""},
		{"config_dir normalised", "kubelet\x00--config_dir=/d\x00--config=\x00", "", true, "/d"},
		{"after --", "kubelet\x00--\x00--config=/x\x00", "", false, ""},
		{"single dash is not the flag", "kubelet\x00-config=/x\x00--configs=/y\x00", "", false, ""},
		{"value missing", "kubelet\x00--config\x00", "", false, ""},
		{"empty", "", "", false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			argv := ParseCmdline([]byte(tc.cmdline))
			var args []string
			if len(argv) > 0 {
				args = argv[1:]
			}
			f := FlagsFromArgs(args)
			if f.Config != tc.config || f.HasConfig != tc.hasConfig || f.ConfigDir != tc.configDir {
				t.Errorf("flags = %+v, want config %q (%v), config-dir %q", f, tc.config, tc.hasConfig, tc.configDir)
			}
		})
	}
	if got := ParseCmdline([]byte("a\x00\x00b\x00")); !cmp.Equal(got, []string{"a", "", "b"}) {
		t.Errorf("ParseCmdline kept empty arguments wrong: %q", got)
	}
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
		fl := FlagsFromArgs(argv[1:])
		if fl.HasConfig && (fl.ConfigIndex < 0 || fl.ConfigIndex >= len(argv)-1) {
			t.Errorf("ConfigIndex %d out of range", fl.ConfigIndex)
		}
		if !fl.HasConfig && fl.Config != "" {
			t.Errorf("Config %q without HasConfig", fl.Config)
		}
	})
}
