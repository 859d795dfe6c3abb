package systemd

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodedns/nodedns/internal/testutil/nstest"
)

// recorder stands in for kubelet: it writes the arguments systemd started it with, NUL-separated,
// to /run/nds/out/UNIT (the unit from its cgroup).
const recorder = `#!/bin/sh
u=$(sed -n 's#.*/\([^/]*\)\.service$#\1#p' /proc/self/cgroup | head -n 1)
printf '%s\000' "$@" > /run/nds/out/"$u".tmp && mv /run/nds/out/"$u".tmp /run/nds/out/"$u"
`

// testDropin is added to every unit of the test: no default dependencies (there is no
// sysinit.target here), and no restarts.
const testDropin = "[Unit]\nDefaultDependencies=no\n[Service]\nRestart=no\n"

// tortureUnit and tortureEnv exercise quoting, escapes, specifiers, resets and expansion.
const tortureUnit = `[Unit]
Description=argument torture
[Service]
Type=oneshot
Environment="A=one two" 'B=x "y" z' C=\x41\sB
Environment=D=%n E=100%% F=gone
Environment=
Environment="A=one two" 'B=x "y" z' C=\x41\sB D=%n E=100%%
EnvironmentFile=/run/nds/env/torture.env
EnvironmentFile=-/run/nds/env/missing.env
# a comment between settings
ExecStart=/usr/local/bin/kubelet $A ${A} "$A" pre${B}post $$A a$A '${C}' \
   "quoted arg" $UNSET ${UNSET}x $ --config $KARGS $Q ${E} $D \
; a comment line (';' starts one too) inside the continued value, which ends at the end of the file
`

// depsUnit and depsDropin exercise dependency lists: continuations with a comment inside, empty
// assignments (which reset nothing), blanks, specifiers.
const (
	depsUnit = "[Unit]\nDescription=dependency lists\nBefore=ndsdep-a.service \\\n# ndsdep-commented.service\n  ndsdep-b.service\n" +
		"Before=\nBefore=%p-c.service\tndsdep-d.service\n[Service]\nType=oneshot\nExecStart=/bin/true\n"
	depsDropin = "[Unit]\nBefore=\nBefore=ndsdep-e.service ndsdep-a.service\n"
)

const tortureEnv = `# comment \
continued comment
KARGS="--a=1 \
  --b=\"two words\" --c=\$HOME --config=/etc/kubernetes/kubelet-config.yaml"
Q='single \n quoted'
B=from-file
export BAD=1
T=trailing   
`

// TestUnitsUnderSystemd checks ParseServiceUnit, ParseEnvFile, MergeEnv and ExpandArgv against the
// real systemd 252 as PID 1 of fresh namespaces (testing.md, "systemd as PID 1"): each unit's
// command is a recorder that writes the arguments it was started with, and they must be exactly
// what these functions compute from the same files. The kubelet units are kubespray's and
// kubeadm's, with only their file paths moved under /run/nds.
func TestUnitsUnderSystemd(t *testing.T) { nstest.Suites(t, testUnitsUnderSystemd) }

func testUnitsUnderSystemd(t *testing.T, suite nstest.Suite) {
	nstest.Require(t)
	const nds = "/run/nds"
	work := t.TempDir()
	files := map[string]string{} // path under work -> content
	// The node paths of every file, as ParseServiceUnit sees them (the paths inside the namespace).
	type unit struct {
		name  string
		files []string // unit file, then drop-ins, as paths under nds
		env   []string // environment files that exist, as paths under nds
	}
	moved := func(s string) string {
		r := strings.NewReplacer(
			"/etc/kubernetes/kubelet.env", nds+"/env/kubelet.env",
			"/var/lib/kubelet/kubeadm-flags.env", nds+"/env/kubeadm-flags.env",
			"/etc/default/kubelet", nds+"/env/default-kubelet",
			"ExecStart=/usr/bin/kubelet", "ExecStart=/usr/local/bin/kubelet")
		return r.Replace(s)
	}
	files["units/ks-kubelet.service"] = moved(string(readKubelet(t, "kubespray-kubelet.service")))
	files["units/ks-kubelet.service.d/zz-test.conf"] = testDropin
	files["env/kubelet.env"] = string(readKubelet(t, "kubespray-kubelet.env"))
	files["units/ka-kubelet.service"] = moved(string(readKubelet(t, "kubeadm-kubelet.service")))
	files["units/ka-kubelet.service.d/10-kubeadm.conf"] = moved(string(readKubelet(t, "10-kubeadm.conf")))
	files["units/ka-kubelet.service.d/zz-test.conf"] = testDropin
	files["env/kubeadm-flags.env"] = string(readKubelet(t, "kubeadm-flags.env"))
	files["env/default-kubelet"] = "KUBELET_EXTRA_ARGS=--config /etc/kubelet/override.yaml \"--node-labels=a=b\"\n"
	files["units/torture.service"] = tortureUnit
	files["units/torture.service.d/zz-test.conf"] = testDropin
	files["env/torture.env"] = tortureEnv
	files["units/ndsdep.service"] = depsUnit
	files["units/ndsdep.service.d/10-more.conf"] = depsDropin
	files["units/ndsdep.service.d/zz-test.conf"] = testDropin
	files["units/nds-test.target"] = "[Unit]\nDefaultDependencies=no\nWants=ks-kubelet.service ka-kubelet.service torture.service ndsdep.service\n"
	files["units/system.slice"] = "[Unit]\nDefaultDependencies=no\n"
	files["bin/kubelet"] = recorder
	for p, c := range files {
		full := filepath.Join(work, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	units := []unit{
		{"ks-kubelet.service", []string{"units/ks-kubelet.service", "units/ks-kubelet.service.d/zz-test.conf"}, []string{"env/kubelet.env"}},
		{"ka-kubelet.service", []string{"units/ka-kubelet.service", "units/ka-kubelet.service.d/10-kubeadm.conf", "units/ka-kubelet.service.d/zz-test.conf"}, []string{"env/kubeadm-flags.env", "env/default-kubelet"}},
		{"torture.service", []string{"units/torture.service", "units/torture.service.d/zz-test.conf"}, []string{"env/torture.env"}},
	}

	sd := nstest.BootSystemd(t, nstest.SystemdOptions{Suite: suite, Work: work, Target: "nds-test.target", Setup: []string{
		"mkdir -p " + nds + "/out",
		// The recorder is /usr/local/bin/kubelet inside this mount namespace only.
		"mount -t tmpfs -o mode=0755 tmpfs /usr/local/bin && cp " + nds + "/bin/kubelet /usr/local/bin/kubelet",
	}})
	pid1 := sd.PID1
	// The systemd that booted is the suite's (its first console line names its version).
	want := map[string]string{nstest.Bookworm: "systemd 252", nstest.Forky: "systemd 262"}[suite.String()]
	sd.WaitFor("systemd's banner", "nds-test.target", 10*time.Second, func() bool { return strings.Contains(sd.Console(), want) })
	out := func(u string) string {
		return fmt.Sprintf("/proc/%d/root%s/out/%s", pid1, nds, strings.TrimSuffix(u, ".service"))
	}
	for _, u := range units {
		deadline := time.Now().Add(30 * time.Second)
		for {
			if _, err := os.Stat(out(u.name)); err == nil {
				break
			}
			if time.Now().After(deadline) {
				st, _ := sd.Systemctl("status", "--no-pager", u.name)
				t.Fatalf("%s never ran its command\nstatus:\n%s\nconsole:\n%s", u.name, st, sd.Console())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	for _, u := range units {
		t.Run(u.name, func(t *testing.T) {
			var ufs []UnitFile
			for _, p := range u.files {
				ufs = append(ufs, UnitFile{Path: nds + "/" + p, Data: []byte(files[p])})
			}
			su := ParseServiceUnit(u.name, ufs)
			if su.Err != nil || len(su.ExecStart) != 1 {
				t.Fatalf("ParseServiceUnit: Err %v, ExecStart %+v", su.Err, su.ExecStart)
			}
			lists := [][]EnvVar{su.Environment}
			for _, p := range u.env {
				vars, _, err := ParseEnvFile(nds+"/"+p, []byte(files[p]))
				if err != nil {
					t.Fatal(err)
				}
				lists = append(lists, vars)
			}
			var want []string
			for _, a := range ExpandArgv(su.ExecStart[0].Argv, MergeEnv(lists...))[1:] {
				want = append(want, a.Value)
			}
			data, err := os.ReadFile(out(u.name))
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Split(strings.TrimSuffix(string(data), "\x00"), "\x00")
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("arguments systemd 252 started %s with (+) and what ExpandArgv computes (-):\n%s", u.name, diff)
			}
			t.Logf("%s started with %q", u.name, got)
		})
	}
	// Before= as systemd loaded it (a set: systemctl prints it in its own order) and as
	// UnitDependencies reads the same files.
	t.Run("ndsdep.service Before=", func(t *testing.T) {
		var ufs []UnitFile
		for _, p := range []string{"units/ndsdep.service", "units/ndsdep.service.d/10-more.conf", "units/ndsdep.service.d/zz-test.conf"} {
			ufs = append(ufs, UnitFile{Path: nds + "/" + p, Data: []byte(files[p])})
		}
		deps, fatal := UnitDependencies("ndsdep.service", "Before", ufs)
		if fatal != nil {
			t.Fatal(fatal)
		}
		want := map[string]bool{}
		for _, d := range deps {
			want[d] = true
		}
		got := map[string]bool{}
		for _, d := range strings.Fields(sd.Show("ndsdep.service", "Before")) {
			got[d] = true
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Before= of ndsdep.service as systemd loaded it (+) and as UnitDependencies reads it (-):\n%s", diff)
		}
		t.Logf("ndsdep.service Before=%v", deps)
	})
	sd.Poweroff()
}
