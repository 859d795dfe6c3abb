package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/internal/testutil/kubeletjudge"
	"github.com/nodedns/nodedns/internal/testutil/nstest"
	"github.com/nodedns/nodedns/systemd"
)

// envRecorder stands in for kubelet under systemd: it writes the arguments it was started with,
// NUL-separated, to /run/nds/out/UNIT (the unit from its cgroup).
const envRecorder = `#!/bin/sh
u=$(sed -n 's#.*/\([^/]*\)\.service$#\1#p' /proc/self/cgroup | head -n 1)
printf '%s\000' "$@" > /run/nds/out/"$u".tmp && mv /run/nds/out/"$u".tmp /run/nds/out/"$u"
`

// TestKubeletEnvFilesUnderSystemd: the kubelet command lines TestKubeletManageRealKubelet hands the
// real kubelet on systemd-started trees come from nodedns's own systemd reader
// (kubeletjudge.FromUnit); here systemd itself, as PID 1 (252 on bookworm, 262 on forky), starts
// each of those kubelet units (the trees and their hostile variants: env files with quotes,
// continuations, CRLF, comments, escapes) as they are and as nodedns's apply with kubelet.manage
// leaves them, with a recorder as kubelet, and its arguments must be exactly the reader's.
func TestKubeletEnvFilesUnderSystemd(t *testing.T) { nstest.Suites(t, testKubeletEnvFilesUnderSystemd) }

func testKubeletEnvFilesUnderSystemd(t *testing.T, suite nstest.Suite) {
	nstest.Require(t)
	const nds = "/run/nds"
	work := t.TempDir()
	type unit struct {
		name, what string
		want       []string
	}
	var units []unit
	put := func(p string, data []byte, mode os.FileMode) {
		full := filepath.Join(work, p)
		must(t, os.MkdirAll(filepath.Dir(full), 0o755))
		must(t, os.WriteFile(full, data, mode))
	}
	// add copies the kubelet unit of the tree under root, its drop-ins and environment files into
	// the namespace's unit path as k<N>.service, the environment files under /run/nds/trees/N.
	add := func(root, what string) {
		s, _, err := kubeletjudge.FromUnit(root, "kubelet.service")
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		n := len(units)
		name := fmt.Sprintf("k%d.service", n)
		file, dropIns, _ := systemd.FindUnit(nodefs.NewReader(root), "kubelet.service")
		move := func(data []byte) []byte {
			s := string(data)
			for _, prog := range []string{"/usr/bin/kubelet", "/usr/local/bin/kubelet"} {
				s = strings.ReplaceAll(s, "ExecStart="+prog, "ExecStart="+nds+"/bin/kubelet")
			}
			s = strings.ReplaceAll(s, "EnvironmentFile=-/", fmt.Sprintf("EnvironmentFile=-%s/trees/%d/", nds, n))
			s = strings.ReplaceAll(s, "EnvironmentFile=/", fmt.Sprintf("EnvironmentFile=%s/trees/%d/", nds, n))
			return []byte(s)
		}
		data, err := os.ReadFile(filepath.Join(root, file))
		must(t, err)
		put("units/"+name, move(data), 0o644)
		for _, d := range dropIns {
			data, err := os.ReadFile(filepath.Join(root, d))
			must(t, err)
			put("units/"+name+".d/"+filepath.Base(d), move(data), 0o644)
		}
		put("units/"+name+".d/zzzz-test.conf", []byte("[Unit]\nDefaultDependencies=no\n[Service]\nRestart=no\n"), 0o644)
		for _, d := range []string{"etc", "var/lib/kubelet"} {
			if _, err := os.Stat(filepath.Join(root, d)); err == nil {
				copyDir(t, filepath.Join(root, d), filepath.Join(work, fmt.Sprintf("trees/%d", n), d))
			}
		}
		units = append(units, unit{name: name, what: what, want: s.Args})
	}
	for _, tc := range realKubeletCases() {
		root := t.TempDir()
		copyDir(t, tc.tree, root)
		if unit, _, _ := systemd.FindUnit(nodefs.NewReader(root), "kubelet.service"); unit == "" {
			continue // RKE2, k3s and the trees with no unit: no kubelet.service to start
		}
		if _, err := os.Lstat(filepath.Join(root, "lib/systemd/system/nodedns.service")); err != nil {
			installUnit(t, root)
		}
		if tc.edit != nil {
			tc.edit(t, root)
		}
		add(root, tc.name)
		if ap := nodedns(t, "--config", manageConfig(t, ""), "--root", root, "apply"); ap.code == 0 {
			add(root, tc.name+", after apply")
		}
	}
	var names []string
	for _, u := range units {
		names = append(names, u.name)
	}
	put("units/nds-test.target", []byte("[Unit]\nDefaultDependencies=no\nWants="+strings.Join(names, " ")+"\n"), 0o644)
	put("units/system.slice", []byte("[Unit]\nDefaultDependencies=no\n"), 0o644)
	put("bin/kubelet", []byte(envRecorder), 0o755)

	sd := nstest.BootSystemd(t, nstest.SystemdOptions{Suite: suite, Work: work, Target: "nds-test.target", Setup: []string{"mkdir -p " + nds + "/out"}})
	out := func(u string) string {
		return fmt.Sprintf("/proc/%d/root%s/out/%s", sd.PID1, nds, strings.TrimSuffix(u, ".service"))
	}
	for _, u := range units {
		sd.WaitFor(u.name+" ("+u.what+") to run its command", u.name, 60*time.Second, func() bool {
			_, err := os.Stat(out(u.name))
			return err == nil
		})
		data, err := os.ReadFile(out(u.name))
		must(t, err)
		got := strings.Split(strings.TrimSuffix(string(data), "\x00"), "\x00")
		if len(data) == 0 {
			got = nil
		}
		if diff := cmp.Diff(u.want, got); diff != "" {
			t.Errorf("%s: kubelet's arguments as systemd %s starts it (+) and as nodedns's reader expands them (-):\n%s", u.what, suite, diff)
		}
	}
	t.Logf("%d kubelet units: systemd's arguments are the reader's", len(units))
	sd.Poweroff()
}
