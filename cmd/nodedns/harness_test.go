package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/nodedns/nodedns/probes"
)

// result is one nodedns invocation.
type result struct {
	stdout, stderr string
	code           int
}

// nodedns runs the command in-process, as main does, with its own stdout and stderr.
func nodedns(t *testing.T, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := newRootCmd(&out, &errb)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	code := 0
	if err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
			if ee.err != nil {
				errb.WriteString("nodedns: " + ee.err.Error() + "\n")
			}
		} else {
			code = 1
			errb.WriteString("nodedns: " + err.Error() + "\n")
		}
	}
	return result{out.String(), errb.String(), code}
}

// copyTree copies a fixture root into a fresh temporary directory, keeping symlinks as symlinks and
// file modes, and installs the packaged unit as a deb would (enabled for multi-user.target), so the
// fixture is "a node with nodedns installed".
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	copyDir(t, src, dst)
	installUnit(t, dst)
	return dst
}

// copyDir copies the tree src into the existing directory dst, keeping symlinks as symlinks and the
// files' permission bits.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		default:
			info, err := d.Info()
			if err != nil {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(to, data, info.Mode().Perm())
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

func installUnit(t *testing.T, root string) {
	t.Helper()
	unit, err := os.ReadFile("../../packaging/systemd/nodedns.service")
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.MkdirAll(filepath.Join(root, "lib/systemd/system"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "lib/systemd/system/nodedns.service"), unit, 0o644))
	must(t, os.MkdirAll(filepath.Join(root, "etc/systemd/system/multi-user.target.wants"), 0o755))
	must(t, os.Symlink("/lib/systemd/system/nodedns.service", filepath.Join(root, "etc/systemd/system/multi-user.target.wants/nodedns.service")))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// treeState hashes every file and records every symlink under root, except nodedns's own state
// directory: comparing two states proves a restore gave back the original bytes.
func treeState(t *testing.T, root string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "var/lib/nodedns" && d.IsDir() {
			return filepath.SkipDir
		}
		info, _ := d.Info()
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			m[rel] = "symlink " + target
		case d.IsDir():
		case !info.Mode().IsRegular():
			m[rel] = "special " + info.Mode().String() // a FIFO: reading it would block
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(data)
			m[rel] = hex.EncodeToString(sum[:]) + " " + info.Mode().Perm().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func checkReport(t *testing.T, root string) (probes.Report, result) {
	t.Helper()
	r := nodedns(t, "--root", root, "check", "-o", "json")
	var rep probes.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("check -o json printed no JSON: %v\nstdout:\n%s\nstderr:\n%s", err, r.stdout, r.stderr)
	}
	return rep, r
}

// problems lists the ids whose status is problem, sorted.
func problems(rep probes.Report) []string {
	var out []string
	for _, c := range rep.Checks {
		if c.Status == probes.Problem {
			out = append(out, c.ID)
		}
	}
	sort.Strings(out)
	return out
}

func byID(rep probes.Report, id string) probes.Result {
	for _, c := range rep.Checks {
		if c.ID == id {
			return c
		}
	}
	return probes.Result{}
}

func readFile(t *testing.T, root, p string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, p))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func contains(t *testing.T, what, s, sub string) {
	t.Helper()
	if !strings.Contains(s, sub) {
		t.Errorf("%s: want %q in:\n%s", what, sub, s)
	}
}

func notContains(t *testing.T, what, s, sub string) {
	t.Helper()
	if strings.Contains(s, sub) {
		t.Errorf("%s: do not want %q in:\n%s", what, sub, s)
	}
}

// fileHas checks node files under root: each of want's strings is in its file, none of notWant's.
func fileHas(t *testing.T, root string, want, notWant map[string][]string) {
	t.Helper()
	for p, subs := range want {
		got := readFile(t, root, p)
		for _, s := range subs {
			contains(t, p, got, s)
		}
	}
	for p, subs := range notWant {
		got := readFile(t, root, p)
		for _, s := range subs {
			notContains(t, p, got, s)
		}
	}
}
