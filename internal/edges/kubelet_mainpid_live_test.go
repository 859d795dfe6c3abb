package edges

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/kubelet"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/internal/testutil/nstest"
)

// TestKubeletMainPIDLive (docs/contract.md "Kubelet's config"): two kubelets of root's run, both
// passing every rule of the kernel's: kubelet.service's, and one started later by another unit (a
// kubelet run by hand, another supervisor). With systemd to ask (a real systemd 252 as PID 1 of
// its own namespaces, over its private D-Bus socket) the unit's MainPID wins; without a bus the
// rule is the newest, the other one. Both kubelets are a copy of sh named kubelet, root's, in
// systemd's /run/nds (a tmpfs of root's).
func TestKubeletMainPIDLive(t *testing.T) {
	nstest.Require(t)
	work, put := systemdWork(t)
	write := func(name, data string) { put(name, []byte(data), 0o644) }
	sh, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(sh)
	if err != nil {
		t.Fatal(err)
	}
	put("kubelet", data, 0o755)
	// Type=exec: a unit is active once its kubelet runs, not from systemd's fork, after which the
	// process is systemd's child, its comm "(kubelet)", until its exec (exec_child in
	// src/core/execute.c, systemd 252): a kubelet the source must find.
	service := func(config, extra string) string {
		return "[Unit]\nDefaultDependencies=no\n" + extra + "[Service]\nType=exec\nExecStart=/run/nds/kubelet -c \"while :; do sleep 3600; done\" kubelet --config=/run/nds/" + config + "\n"
	}
	write("units/kubelet.service", service("unit.yaml", ""))
	write("units/by-hand.service", service("by-hand.yaml", "After=kubelet.service\n"))
	write("units/nds-test.target", "[Unit]\nDefaultDependencies=no\nWants=kubelet.service by-hand.service\n")
	write("unit.yaml", "kind: KubeletConfiguration\nresolvConf: /run/nds/unit-resolv.conf\n")
	write("by-hand.yaml", "kind: KubeletConfiguration\nresolvConf: /run/nds/by-hand-resolv.conf\n")
	// The source runs in systemd's namespace (TestKubeletMainPIDInNamespace).
	sd := nstest.BootSystemd(t, nstest.SystemdOptions{Work: work, Target: "nds-test.target"})
	for _, u := range []string{"kubelet.service", "by-hand.service"} {
		sd.WaitFor(u+" active", u, 20*time.Second, func() bool { return sd.Show(u, "ActiveState") == "active" })
	}
	mainPID, byHand := sd.Show("kubelet.service", "MainPID"), sd.Show("by-hand.service", "MainPID")
	c := exec.Command("nsenter", "-t", strconv.Itoa(sd.PID1), "-m", "-p", "--", "env", mainPIDHelperEnv+"=1",
		sd.Dir+"/edges.test", "-test.run", "^TestKubeletMainPIDInNamespace$", "-test.v")
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("the source in systemd's namespace: %v\n%s\n%s", err, out, sd.Console())
	}
	got := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		if _, rest, ok := strings.Cut(l, "answer "); ok {
			k, v, _ := strings.Cut(rest, ": ")
			got[k] = v
		}
	}
	want := map[string]string{
		"bus":    fmt.Sprintf("/run/nds/unit.yaml pid %s (--config of the running kubelet, pid %s; the main process of kubelet.service (systemd's MainPID), pid %s also runs, root's)", mainPID, mainPID, byHand),
		"no bus": fmt.Sprintf("/run/nds/by-hand.yaml pid %s (--config of the running kubelet, pid %s; the newest of 2 kubelet processes of root's, pid %s also runs, root's)", byHand, byHand, mainPID),
	}
	for k, w := range want {
		t.Logf("%s: %s", k, got[k])
		if got[k] != w {
			t.Errorf("%s: the source read\n  %s\nwant\n  %s\n(output:\n%s)", k, got[k], w, out)
		}
	}
	sd.Poweroff()
}

// mainPIDHelperEnv makes TestKubeletMainPIDInNamespace run.
const mainPIDHelperEnv = "NODEDNS_TEST_KUBELET_MAINPID"

// TestKubeletMainPIDInNamespace is TestKubeletMainPIDLive's source, run inside the namespace of its
// systemd, once asking systemd over D-Bus and once without a bus; it does nothing elsewhere.
func TestKubeletMainPIDInNamespace(t *testing.T) {
	if os.Getenv(mainPIDHelperEnv) == "" {
		t.Skip("run by TestKubeletMainPIDLive inside its systemd's namespace")
	}
	for name, units := range map[string]func(context.Context) (map[string]kubelet.UnitProcess, error){"bus": unitProcesses, "no bus": nil} {
		cfg := config.Default()
		r := nodefs.NewReader("/")
		s := node.Observe(r, cfg, time.Now())
		if err := (kubeletProcess{cfg: cfg, proc: "/proc", files: r, units: units}).Observe(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		if len(s.KubeletIgnored) > 0 {
			t.Errorf("%s: ignored %q", name, s.KubeletIgnored)
		}
		t.Logf("answer %s: %s pid %d (%s)", name, s.Kubelet.Path, s.Kubelet.PID, s.Kubelet.How)
	}
}
