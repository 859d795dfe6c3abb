package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodedns/nodedns/probes"
)

// TestBadInput feeds nodedns broken sources. Each must give a clear error naming the file and the
// reason, leave what depends on it untouched, and still fix what does not (docs/contract.md, invariant 5).
func TestBadInput(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, root string)
		// untouched: node paths whose bytes must not change through apply.
		untouched []string
		// fixed: node path -> substring apply must still write there.
		fixed     map[string]string
		checkCode int
		applyCode int
		planCode  int
		// stderr/stdout of apply must name these.
		say []string
		// unknownIDs: check ids that must report unknown (they could not tell).
		unknownIDs []string
	}{
		{
			name: "binary garbage resolv.conf",
			setup: func(t *testing.T, root string) {
				must(t, os.WriteFile(filepath.Join(root, "etc/resolv.conf"), []byte("\x7fELF\x02\x01\x01\x00\x00\x00nameserver 169.254.25.10\n\x00\xff"), 0o644))
			},
			untouched:  []string{"/etc/resolv.conf"},
			fixed:      map[string]string{"/var/lib/nodedns/resolv.conf": "nameserver 192.168.2.1\n"},
			checkCode:  2,
			applyCode:  1,
			planCode:   1,
			say:        []string{"/etc/resolv.conf", "NUL byte"},
			unknownIDs: []string{"resolvconf.loop", "resolvconf.search", "resolvconf.nameservers", "kubelet.resolvconf"},
		},
		{
			name: "20 MiB resolv.conf",
			setup: func(t *testing.T, root string) {
				big := bytes.Repeat([]byte("# padding padding padding padding padding padding padding padding\n"), 20<<20/66)
				must(t, os.WriteFile(filepath.Join(root, "etc/resolv.conf"), append([]byte("nameserver 169.254.25.10\n"), big...), 0o644))
			},
			untouched:  []string{"/etc/resolv.conf"},
			fixed:      map[string]string{"/var/lib/nodedns/resolv.conf": "nameserver 192.168.2.1\n"},
			checkCode:  2,
			applyCode:  1,
			planCode:   1,
			say:        []string{"/etc/resolv.conf", "over the 1 MiB limit of a resolv.conf file"},
			unknownIDs: []string{"resolvconf.loop"},
		},
		{
			name: "lease cut off mid-block",
			setup: func(t *testing.T, root string) {
				must(t, os.WriteFile(filepath.Join(root, "var/lib/dhcp/dhclient.eth1.leases"), []byte("lease {\n  interface \"eth1\";\n  fixed-address 10.9.0.5;\n  option domain-search \"leak.example.\";\n  option domain-name-se"), 0o644))
			},
			fixed: map[string]string{
				"/etc/resolv.conf":             "nameserver 192.168.2.1\n",
				"/var/lib/nodedns/resolv.conf": "nameserver 192.168.2.1\n",
			},
			checkCode:  1,
			applyCode:  0,
			planCode:   0,
			say:        []string{"/var/lib/dhcp/dhclient.eth1.leases:1"},
			unknownIDs: []string{"dhcp.search"},
		},
		{
			name: "invalid netplan YAML",
			setup: func(t *testing.T, root string) {
				must(t, os.MkdirAll(filepath.Join(root, "etc/netplan"), 0o755))
				must(t, os.WriteFile(filepath.Join(root, "etc/netplan/01-netcfg.yaml"), []byte("network:\n  ethernets:\n    eth0: {dhcp4: true\n"), 0o600))
			},
			untouched: []string{"/etc/netplan/01-netcfg.yaml"},
			fixed: map[string]string{
				"/etc/resolv.conf": "nameserver 192.168.2.1\n",
			},
			checkCode: 1,
			// The netplan change is blocked (the tree may have DHCP interfaces nodedns cannot see):
			// apply makes every other change and exits 1.
			applyCode:  1,
			planCode:   1,
			say:        []string{"/etc/netplan/01-netcfg.yaml:"},
			unknownIDs: []string{"dhcp.search"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := copyTree(t, "testdata/seeds/002")
			tc.setup(t, root)
			before := map[string][]byte{}
			for _, p := range tc.untouched {
				data, err := os.ReadFile(filepath.Join(root, p))
				must(t, err)
				before[p] = data
			}

			rep, r := checkReport(t, root)
			if r.code != tc.checkCode {
				t.Errorf("check: exit %d, want %d\n%s%s", r.code, tc.checkCode, r.stdout, r.stderr)
			}
			for _, id := range tc.unknownIDs {
				if got := byID(rep, id); got.Status != probes.Unknown {
					t.Errorf("check %s = %s (%s), want unknown", id, got.Status, got.Message)
				}
			}
			if p := nodedns(t, "--root", root, "plan"); p.code != tc.planCode {
				t.Errorf("plan: exit %d, want %d\n%s%s", p.code, tc.planCode, p.stdout, p.stderr)
			}
			ap := nodedns(t, "--root", root, "apply")
			if ap.code != tc.applyCode {
				t.Errorf("apply: exit %d, want %d\n%s%s", ap.code, tc.applyCode, ap.stdout, ap.stderr)
			}
			for _, s := range tc.say {
				contains(t, "apply output", ap.stdout+ap.stderr, s)
			}
			for p, want := range before {
				got, err := os.ReadFile(filepath.Join(root, p))
				must(t, err)
				if !bytes.Equal(got, want) {
					t.Errorf("%s changed although its input was bad", p)
				}
			}
			for p, sub := range tc.fixed {
				contains(t, p+" (the rest of the node is still fixed)", readFile(t, root, p), sub)
			}
		})
	}
}

func TestInvalidConfigChangesNothing(t *testing.T) {
	tests := []struct {
		name, yaml string
		say        []string
	}{
		{"bad ip", "upstreams: [10.0.0.300]\n", []string{"config.yaml", "upstreams", "10.0.0.300", "not an IP address"}},
		{"unknown key", "upstream: [10.0.0.3]\n", []string{"config key upstream: unknown key"}},
		{"bad duration", "probes:\n  timeout: soon\n", []string{"probes.timeout", `"soon"`, "not a duration"}},
		{"not yaml", "upstreams: [\n", []string{"config.yaml", "line"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := copyTree(t, "testdata/seeds/002")
			cfg := filepath.Join(root, "etc/nodedns/config.yaml")
			must(t, os.MkdirAll(filepath.Dir(cfg), 0o755))
			must(t, os.WriteFile(cfg, []byte(tc.yaml), 0o644))
			orig := treeState(t, root)
			for _, args := range [][]string{{"apply"}, {"plan"}, {"restore"}} {
				r := nodedns(t, append([]string{"--root", root}, args...)...)
				if r.code != 1 {
					t.Errorf("%v: exit %d, want 1", args, r.code)
				}
				for _, s := range tc.say {
					contains(t, strings.Join(args, " ")+" stderr", r.stderr, s)
				}
			}
			if r := nodedns(t, "--root", root, "check"); r.code != 2 {
				t.Errorf("check with a bad config: exit %d, want 2 (could not check)", r.code)
			}
			if diff := cmp.Diff(orig, treeState(t, root)); diff != "" {
				t.Errorf("an invalid config changed the node:\n%s", diff)
			}
		})
	}
	// A named config file that does not exist is an error; the default one missing is not.
	root := copyTree(t, "testdata/seeds/002")
	if r := nodedns(t, "--root", root, "--config", filepath.Join(root, "nope.yaml"), "plan"); r.code != 1 || !strings.Contains(r.stderr, "nope.yaml") {
		t.Errorf("missing named config: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestEnvConfig(t *testing.T) {
	root := copyTree(t, "testdata/seeds/002")
	t.Setenv("NODEDNS_UPSTREAMS", "10.1.1.1 10.1.1.2")
	r := nodedns(t, "--root", root, "plan")
	contains(t, "plan with NODEDNS_UPSTREAMS", r.stdout, "+nameserver 10.1.1.1\n+nameserver 10.1.1.2\n")
	t.Setenv("NODEDNS_PROBES_TIMEOUT", "fast")
	if r := nodedns(t, "--root", root, "plan"); r.code != 1 || !strings.Contains(r.stderr, "probes.timeout") {
		t.Errorf("bad env value: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestSymlinkedResolvConf: an /etc/resolv.conf that is an absolute symlink inside the root (as the
// resolvconf package makes it) is edited through the link, and stays the same symlink.
func TestSymlinkedResolvConf(t *testing.T) {
	root := copyTree(t, "testdata/seeds/002")
	must(t, os.MkdirAll(filepath.Join(root, "run/resolvconf"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "run/resolvconf/resolv.conf"), []byte("nameserver 169.254.25.10\nnameserver 10.0.0.2\nsearch corp.example\n"), 0o644))
	must(t, os.Remove(filepath.Join(root, "etc/resolv.conf")))
	must(t, os.Symlink("/run/resolvconf/resolv.conf", filepath.Join(root, "etc/resolv.conf")))

	if r := nodedns(t, "--root", root, "apply"); r.code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	fi, err := os.Lstat(filepath.Join(root, "etc/resolv.conf"))
	must(t, err)
	if fi.Mode()&os.ModeSymlink == 0 {
		t.Fatal("/etc/resolv.conf is no longer a symlink")
	}
	if target, _ := os.Readlink(filepath.Join(root, "etc/resolv.conf")); target != "/run/resolvconf/resolv.conf" {
		t.Errorf("symlink now points at %q", target)
	}
	got := readFile(t, root, "run/resolvconf/resolv.conf")
	want := "# Edited by nodedns: loop addresses and DHCP search domains removed (nodedns restore undoes it).\nnameserver 10.0.0.2\nsearch corp.example\n"
	if got != want {
		t.Errorf("target content (-want +got):\n%s", cmp.Diff(want, got))
	}
	if r := nodedns(t, "--root", root, "restore"); r.code != 0 {
		t.Fatalf("restore: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if target, _ := os.Readlink(filepath.Join(root, "etc/resolv.conf")); target != "/run/resolvconf/resolv.conf" {
		t.Errorf("after restore the symlink points at %q", target)
	}
	if got := readFile(t, root, "run/resolvconf/resolv.conf"); got != "nameserver 169.254.25.10\nnameserver 10.0.0.2\nsearch corp.example\n" {
		t.Errorf("restore did not give back the target's bytes: %q", got)
	}
}

// TestCheckUsageErrorIsUnknown: node-problem-detector reads check's exit code; a command line check
// cannot parse means it could not check (2), never "the node has a problem" (1). Other commands
// exit 1.
func TestCheckUsageErrorIsUnknown(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"check", "--bogus"}, 2},
		{[]string{"--check", "--bogus"}, 2},
		{[]string{"plan", "--bogus"}, 1},
	} {
		r := nodedns(t, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, "unknown flag: --bogus") {
			t.Errorf("nodedns %v: exit %d, want %d; stderr %q", tc.args, r.code, tc.code, r.stderr)
		}
	}
}
