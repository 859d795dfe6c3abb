package main

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
)

// TestNonRootSaysRootIsNeeded runs the real binary as uid 65534 (docs/contract.md "Command line"):
// every command that changes the node, whatever fails first (the command itself on the live
// node, a --root DIR someone else owns, the state lock, a write under /etc), exits 1 with one
// error line that says it must run as root, and changes nothing it was refused.
func TestNonRootSaysRootIsNeeded(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run nodedns as uid 65534")
	}
	bin := buildBinary(t)
	openUp(t, filepath.Dir(bin))
	_, netplanErr := exec.LookPath("netplan")

	// setup makes the node for one command and returns the arguments before the command.
	type setup func(t *testing.T, cmd []string) (args, env []string)
	// copyAs copies seed 001 (resolved, a networkd lease, netplan) owned by uid, its /etc root's.
	copyAs := func(t *testing.T, uid int) string {
		dir := t.TempDir()
		openUp(t, dir)
		root := filepath.Join(dir, "node")
		must(t, os.Mkdir(root, 0o755))
		copyDir(t, "testdata/seeds/001", root)
		chownTree(t, root, uid)
		chownTree(t, filepath.Join(root, "etc"), 0)
		return root
	}
	setups := []struct {
		name  string
		setup setup
		// unchanged is the part of the node the refused command must leave as it was.
		unchanged string
	}{
		{
			name:  "the live node",
			setup: func(*testing.T, []string) ([]string, []string) { return nil, nil },
		},
		{
			name: "--root DIR owned by root",
			setup: func(t *testing.T, _ []string) ([]string, []string) {
				return []string{"--root", copyAs(t, 0)}, nil
			},
			unchanged: ".",
		},
		{
			name: "NODEDNS_ROOT=DIR owned by root",
			setup: func(t *testing.T, _ []string) ([]string, []string) {
				return nil, []string{"NODEDNS_ROOT=" + copyAs(t, 0)}
			},
			unchanged: ".",
		},
		{
			// DIR and its state are the user's, /etc is root's: the first write into /etc (or,
			// for run, the state lock under a root-owned /var/lib) is refused.
			name: "--root DIR owned by the user, /etc by root",
			setup: func(t *testing.T, cmd []string) ([]string, []string) {
				root := copyAs(t, nobody)
				switch cmd[0] {
				case "restore":
					// Backups to restore: an apply as root on the node as root's, then the node
					// but /etc handed to the user.
					chownTree(t, root, 0)
					if out, err := exec.Command(bin, "--root", root, "apply").CombinedOutput(); err != nil {
						t.Fatalf("apply as root: %v\n%s", err, out)
					}
					chownTree(t, root, nobody)
					chownTree(t, filepath.Join(root, "etc"), 0)
				case "run":
					chownTree(t, filepath.Join(root, "var/lib"), 0)
				case "netplan":
					if netplanErr != nil {
						t.Skip("netplan is not installed (apt-get install --no-install-recommends netplan.io)")
					}
				}
				return []string{"--root", root}, nil
			},
			unchanged: "etc",
		},
	}
	for _, c := range writingCommands() {
		for _, st := range setups {
			t.Run(strings.Join(c, " ")+"/"+st.name, func(t *testing.T) {
				args, env := st.setup(t, c)
				var node string
				for i, a := range args {
					if a == "--root" {
						node = args[i+1]
					}
				}
				for _, e := range env {
					if v, ok := strings.CutPrefix(e, "NODEDNS_ROOT="); ok {
						node = v
					}
				}
				var before map[string]string
				if st.unchanged != "" {
					before = treeState(t, filepath.Join(node, st.unchanged))
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				cmd := exec.CommandContext(ctx, bin, append(args, c...)...)
				cmd.Env = append(os.Environ(), env...)
				cmd.Dir = "/"
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
				var stdout, stderr strings.Builder
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				err := cmd.Run()
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != 1 {
					t.Fatalf("%v as uid %d: %v, want exit 1\nstdout:\n%s\nstderr:\n%s", c, nobody, err, stdout.String(), stderr.String())
				}
				var errLines []string
				for _, l := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
					if strings.HasPrefix(l, "nodedns: ") {
						errLines = append(errLines, l)
					}
				}
				name := "nodedns " + strings.Join(slices.DeleteFunc(slices.Clone(c), func(a string) bool { return strings.HasPrefix(a, "-") }), " ")
				if len(errLines) != 1 || !strings.Contains(errLines[0], "must run as root (sudo "+name+")") {
					t.Errorf("%v as uid %d: want one error line saying it must run as root, stderr:\n%s", c, nobody, stderr.String())
				}
				t.Logf("%s", errLines)
				if before != nil {
					if diff := cmp.Diff(before, treeState(t, filepath.Join(node, st.unchanged))); diff != "" {
						t.Errorf("%v as uid %d changed %s (-before +after):\n%s", c, nobody, st.unchanged, diff)
					}
				}
			})
		}
	}
}

// writingCommands lists every command that changes the node, as the command line is typed.
func writingCommands() [][]string {
	var out [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		if writers[c.Name()] && c.Runnable() {
			out = append(out, path)
			if c.Name() == "restore" {
				out = append(out, append(append([]string{}, path...), "--forget"))
			}
		}
		for _, sub := range c.Commands() {
			walk(sub, append(append([]string{}, path...), sub.Name()))
		}
	}
	walk(newRootCmd(nil, nil), nil)
	return out
}

// TestEveryCommandDeclaresWhetherItWrites: a command either changes the node (writers: it gets the
// root check) or is one of these, which only read it; a new command must choose.
func TestEveryCommandDeclaresWhetherItWrites(t *testing.T) {
	readOnly := map[string]bool{"check": true, "plan": true, "version": true, "gen": true, "help": true, "completion": true, "netplan": true}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if !writers[sub.Name()] && !readOnly[sub.Name()] && sub.Parent().Name() != "completion" {
				t.Errorf("%s neither changes the node (writers) nor is known to only read it", sub.CommandPath())
			}
			walk(sub)
		}
	}
	root := newRootCmd(nil, nil)
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	walk(root)
	if got := len(writingCommands()); got != 5 {
		t.Errorf("%d writing commands, want apply, restore, restore --forget, netplan pin and run: %v", got, writingCommands())
	}
}

// openUp lets every user reach dir, a directory under os.TempDir(): t.TempDir's directories are
// 0700. Nothing above os.TempDir() is touched.
func openUp(t *testing.T, dir string) {
	t.Helper()
	tmp := filepath.Clean(os.TempDir())
	if !strings.HasPrefix(dir, tmp+"/") {
		t.Fatalf("%s is not under %s", dir, tmp)
	}
	for d := dir; d != tmp; d = filepath.Dir(d) {
		must(t, os.Chmod(d, 0o755))
	}
}

// chownTree gives everything under root (root included, symlinks themselves) to uid:uid.
func chownTree(t *testing.T, root string, uid int) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
	must(t, err)
}
