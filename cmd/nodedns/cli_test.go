package main

import (
	"strings"
	"testing"
)

// TestCLIConventions: what a user expects of a CLI, each asserted.
func TestCLIConventions(t *testing.T) {
	t.Run("--version prints what version prints", func(t *testing.T) {
		v, ver := nodedns(t, "--version"), nodedns(t, "version")
		if v.code != 0 || v.stdout != ver.stdout || !strings.HasPrefix(v.stdout, "nodedns ") {
			t.Errorf("--version: code %d %q, version: %q", v.code, v.stdout, ver.stdout)
		}
	})
	t.Run("a mistyped command gets a suggestion", func(t *testing.T) {
		r := nodedns(t, "chekc")
		if r.code != 1 || !strings.Contains(r.stderr, "Did you mean this?\n\tcheck") {
			t.Errorf("chekc: code %d, stderr:\n%s", r.code, r.stderr)
		}
		if r := nodedns(t, "aply"); !strings.Contains(r.stderr, "\tapply") {
			t.Errorf("aply: stderr:\n%s", r.stderr)
		}
	})
	t.Run("switches are shown without a value", func(t *testing.T) {
		for _, args := range [][]string{{"--help"}, {"netplan", "pin", "--help"}} {
			out := nodedns(t, args...).stdout
			for _, bad := range []string{"--check nodedns check", "--apply netplan apply", "--dry-run netplan get"} {
				if strings.Contains(out, bad) {
					t.Errorf("%v shows %q as if the switch took a value:\n%s", args, bad, out)
				}
			}
		}
	})
	t.Run("completion offers flag values", func(t *testing.T) {
		for _, tt := range []struct {
			args []string
			want []string
		}{
			{[]string{"__complete", "check", "-o", ""}, []string{"text", "json"}},
			{[]string{"__complete", "plan", "--output", ""}, []string{"text", "json"}},
			{[]string{"__complete", "--check", "-o", ""}, []string{"text", "json"}},
			{[]string{"__complete", "check", "--log-level", ""}, []string{"debug", "info", "warn", "error"}},
		} {
			out := nodedns(t, tt.args...).stdout
			for _, w := range tt.want {
				if !strings.Contains(out, "\n"+w) && !strings.HasPrefix(out, w) {
					t.Errorf("%v offers no %q:\n%s", tt.args, w, out)
				}
			}
		}
	})
	t.Run("writing commands must run as root on a live node", func(t *testing.T) {
		defer func(f func() int) { euid = f }(euid)
		euid = func() int { return 1000 }
		for _, args := range [][]string{{"apply"}, {"restore"}, {"run"}, {"netplan", "pin"}} {
			r := nodedns(t, args...)
			if r.code != 1 || !strings.Contains(r.stderr, "must run as root (sudo nodedns "+strings.Join(args, " ")+")") {
				t.Errorf("%v as uid 1000: code %d, stderr:\n%s", args, r.code, r.stderr)
			}
		}
		// Under --root a user works on a copy of their own: a DIR root owns is refused at once
		// (TestNonRootSaysRootIsNeeded runs the real binary as another user); check, plan and
		// netplan pin --dry-run never write.
		root := t.TempDir()
		copyDir(t, "../../examples/kubespray-host-resolvconf", root)
		if r := nodedns(t, "--root", root, "apply"); r.code != 1 || !strings.Contains(r.stderr, "which uid 0 owns: it must run as root (sudo nodedns apply)") {
			t.Errorf("apply under a --root DIR root owns, as uid 1000: code %d, stderr:\n%s", r.code, r.stderr)
		}
		for _, args := range [][]string{{"--root", root, "plan"}, {"--root", root, "check"}, {"--root", root, "netplan", "pin", "--dry-run"}} {
			if r := nodedns(t, args...); strings.Contains(r.stderr, "must run as root") {
				t.Errorf("%v: %s", args, r.stderr)
			}
		}
	})
}
