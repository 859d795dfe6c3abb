package node_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/internal/policy"
	"github.com/nodedns/nodedns/internal/testutil/fixture"
)

// snapshotOpts compare two snapshots field by field: unexported fields too (a parsed file keeps its
// lines there), errors by message (a fresh read makes new error values).
var snapshotOpts = cmp.Options{
	cmp.Exporter(func(reflect.Type) bool { return true }),
	cmp.Comparer(func(a, b error) bool {
		if a == nil || b == nil {
			return a == nil && b == nil
		}
		return a.Error() == b.Error()
	}),
}

// TestIncrementalObserveEqualsFull drives random sequences of writes, removals and mode changes of
// files in the directories the daemon watches, on every test node tree, and after each compares the
// snapshot an Observer re-reads from the changed path alone with a fresh full Observe, and the plans
// computed on both. The seed is logged: NODEDNS_PROPERTY_SEED=<seed> replays a failure.
func TestIncrementalObserveEqualsFull(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("NODEDNS_PROPERTY_SEED"); s != "" {
		fmt.Sscan(s, &seed)
	}
	t.Logf("seed %d", seed)
	steps := 25
	if testing.Short() {
		steps = 8
	}
	cfg := config.Default()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	roots := testRoots(t)
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range roots {
			if !yield(n) {
				return
			}
		}
	})
	for i, name := range names {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			root := t.TempDir()
			if out, err := exec.Command("cp", "-a", roots[name]+"/.", root).CombinedOutput(); err != nil {
				t.Fatalf("copy %s: %v: %s", roots[name], err, out)
			}
			r := nodefs.NewReader(root)
			var o node.Observer
			s := o.Observe(r, cfg, now, nil)
			contents := treeContents(t, root)
			for step := range steps {
				what, changed := randomChange(t, rng, root, node.Watches(cfg, s), contents)
				s = o.Observe(r, cfg, now, changed)
				full := node.Observe(r, cfg, now)
				if d := cmp.Diff(full, s, snapshotOpts); d != "" {
					t.Fatalf("step %d, %s (re-read %v): incremental snapshot differs from a full read (-full +incremental):\n%s", step, what, o.Read, d)
				}
				if d := cmp.Diff(policy.Compute(full, cfg), policy.Compute(s, cfg), snapshotOpts); d != "" {
					t.Fatalf("step %d, %s: incremental plan differs from a full read's (-full +incremental):\n%s", step, what, d)
				}
			}
		})
	}
}

// treeContents are the regular files' contents of a tree, the pool random writes draw from (a
// resolv.conf may get a netplan file's bytes: the readers must cope, and both reads the same way).
func treeContents(t *testing.T, root string) [][]byte {
	var out [][]byte
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		if data, err := os.ReadFile(p); err == nil && len(data) < 64<<10 {
			out = append(out, data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return append(out, nil, []byte("nameserver 10.99.0.1\n"), []byte("nameserver 169.254.25.10\nsearch example.com\n"), []byte("\x00{[garbage"))
}

// candidateNames are names tried in a watched directory besides the files already there; each is
// used where the watch's Match takes it (and some where it does not: a file the readers may list).
var candidateNames = []string{"resolv.conf", "stub-resolv.conf", "dhclient.conf", "10-x.network", "50-x.yaml",
	"x.conf", "dhclient.eth0.leases", "dhclient-eth0.lease", "1", "2", "x.nmconnection", "internal-x-eth0.lease",
	"kubelet.env", "config.yaml", "nodedns", "offered.json", "notes.txt"}

// randomChange makes one change to a file in a watched directory and returns what it did and the
// node paths it changed (as the daemon's events name them: a directory it had to create, the file).
func randomChange(t *testing.T, rng *rand.Rand, root string, ws []nodefs.Watch, contents [][]byte) (string, []string) {
	t.Helper()
	w := ws[rng.IntN(len(ws))]
	var names []string
	if es, err := os.ReadDir(filepath.Join(root, w.Dir)); err == nil {
		for _, e := range es {
			if !e.IsDir() {
				names = append(names, e.Name())
			}
		}
	}
	for _, n := range candidateNames {
		if w.Match(n) || rng.IntN(8) == 0 {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		names = []string{"x"}
	}
	np := path.Join(w.Dir, names[rng.IntN(len(names))])
	hp := filepath.Join(root, np)
	changed := []string{np}
	// A missing directory is created: the daemon sees it appear (its path is what changed).
	for d := path.Dir(np); d != "/"; d = path.Dir(d) {
		if _, err := os.Lstat(filepath.Join(root, d)); err != nil {
			changed = append(changed, d)
		}
	}
	if err := os.MkdirAll(filepath.Dir(hp), 0o755); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(hp)
	if err == nil && fi.IsDir() {
		return "nothing (" + np + " is a directory)", changed
	}
	switch k := rng.IntN(10); {
	case k < 2:
		if err := os.Remove(hp); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return "remove " + np, changed
	case k < 3:
		mode := os.FileMode(0o600)
		if rng.IntN(2) == 0 {
			mode = 0o644
		}
		if err := os.Chmod(hp, mode); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		// chmod(2) follows a symlink: the kernel reports the change on the target, in the
		// target's directory, which is what the daemon's watches see.
		if fi != nil && fi.Mode()&os.ModeSymlink != 0 {
			if target, err := filepath.EvalSymlinks(hp); err == nil {
				if rel, err := filepath.Rel(root, target); err == nil && !strings.HasPrefix(rel, "..") {
					changed = append(changed, "/"+filepath.ToSlash(rel))
				}
			}
		}
		return fmt.Sprintf("chmod %v %s", mode, np), changed
	default:
		data := contents[rng.IntN(len(contents))]
		if old, err := os.ReadFile(hp); err == nil && rng.IntN(3) == 0 {
			data = append(slices.Clip(old), "nameserver 10.0.0.9\n"...) // an edit of what is there
		}
		if err := os.Remove(hp); err != nil && !os.IsNotExist(err) { // a symlink is replaced, not followed
			t.Fatal(err)
		}
		if err := os.WriteFile(hp, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("write %d bytes to %s", len(data), np), changed
	}
}

// TestObserverReadsOnlyWhatChanged: a change to /etc/resolv.conf re-reads it and the sources built
// on it (NetworkManager's judgement of it, not NM's files; the kubelet's, which names it here), not
// the rest of the node; no change re-reads nothing.
func TestObserverReadsOnlyWhatChanged(t *testing.T) {
	root := t.TempDir()
	if out, err := exec.Command("cp", "-a", "../../examples/kubespray-host-resolvconf/.", root).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	cfg := config.Default()
	r := nodefs.NewReader(root)
	var o node.Observer
	o.Observe(r, cfg, time.Now(), nil)
	if len(o.Read) < 12 {
		t.Fatalf("a first read must read every source, read %v", o.Read)
	}
	o.Observe(r, cfg, time.Now(), []string{})
	if len(o.Read) != 0 {
		t.Errorf("nothing changed, but re-read %v", o.Read)
	}
	o.Observe(r, cfg, time.Now(), []string{node.EtcResolvConf})
	for _, src := range o.Read {
		if !slices.Contains([]string{"resolv.conf", "kubelet resolv.conf", "NetworkManager's resolv.conf"}, src) {
			t.Errorf("a change to %s re-read %q", node.EtcResolvConf, src)
		}
	}
	if !slices.Contains(o.Read, "resolv.conf") {
		t.Errorf("a change to %s did not re-read it: %v", node.EtcResolvConf, o.Read)
	}
}

// TestObserverRereadsWhatItTookBefore: nodedns's kubelet resolv.conf is taken from the kubelet's
// while the kubelet's config names the same file (read once, a bad line reported once); when the
// kubelet's config stops naming it, nodedns's part reads the file itself and its problem stays.
func TestObserverRereadsWhatItTookBefore(t *testing.T) {
	root := t.TempDir()
	if out, err := exec.Command("cp", "-a", "../../cmd/nodedns/testdata/seeds/003/.", root).CombinedOutput(); err != nil {
		t.Fatalf("copy: %v: %s", err, out)
	}
	cfg := config.Default()
	fixture.TreeAt(t, root, map[string]string{cfg.Kubelet.ResolvConf: "bogus\n"}) // seed 003's kubelet config names it
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := nodefs.NewReader(root)
	var o node.Observer
	if s := o.Observe(r, cfg, now, nil); s.Kubelet.ResolvConf != cfg.Kubelet.ResolvConf {
		t.Fatalf("the kubelet reads %q, want %s", s.Kubelet.ResolvConf, cfg.Kubelet.ResolvConf)
	}
	fixture.TreeAt(t, root, map[string]string{"/var/lib/kubelet/config.yaml": "kind: KubeletConfiguration\nresolvConf: /run/systemd/resolve/resolv.conf\n"})
	s := o.Observe(r, cfg, now, []string{"/var/lib/kubelet/config.yaml"})
	if d := cmp.Diff(node.Observe(r, cfg, now), s, snapshotOpts); d != "" {
		t.Errorf("re-read %v: incremental snapshot differs from a full read (-full +incremental):\n%s", o.Read, d)
	}
	if len(s.ProblemsFrom(node.SourceResolvConf)) != 1 {
		t.Errorf("problems %v, want the bad line of %s once", s.Problems, cfg.Kubelet.ResolvConf)
	}
}
