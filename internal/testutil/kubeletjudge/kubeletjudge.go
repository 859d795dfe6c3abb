// Package kubeletjudge runs the real kubelet on a node tree and reports what it would read: its whole
// effective KubeletConfiguration, and the resolv.conf its pod DNS configurer gives a pod. Tests of
// kubelet.manage are judged by it instead of by nodedns's own parsers. Test-only.
//
// kubelet (v1.36.3, from k8s.io/kubernetes on the module proxy) and the judge built beside it
// (.ci/kubelet-judge: kubelet's pkg/kubelet/network/dns configurer, and RKE2's and k3s's command line
// modelled from their sources) come from .ci/kubelet-build, which .ci/run runs once into its cache;
// tests find them through NODEDNS_REAL_KUBELET and NODEDNS_REAL_KUBELET_JUDGE and skip with a message when they
// are absent.
//
// How kubelet is made to report and stop (testing.md "The real kubelet"): started with -v=5 and
// --exit-on-lock-contention, kubelet logs its configuration after its flags, --config, the
// --config-dir drop-ins and its validation (cmd/kubelet/app/server.go, NewKubeletCommand: the
// "KubeletConfiguration" line), then exits in run() with "cannot exit on lock file contention: no
// lock file specified" before it touches a container runtime. It runs chrooted in an overlay of the
// tree (so the tree is never written: kubelet creates its directories, k3s's model its drop-in, in
// the overlay's upper layer) inside private mount and PID namespaces, with a read-only cgroup2 mount
// (kubelet 1.36 refuses cgroup v1, which this machine's /sys/fs/cgroup is) and its own /proc.
package kubeletjudge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodedns/nodedns/internal/testutil/nstest"
	"github.com/nodedns/nodedns/internal/testutil/tied"
)

// The variables .ci/run exports with the binaries of .ci/kubelet-build. Not NODEDNS_KUBELET: nodedns
// reads NODEDNS_* as its configuration (cmd/nodedns parseConfig), and a NODEDNS_KUBELET would
// stand for the whole kubelet section, shadowing kubelet.config and the rest.
const (
	EnvKubelet = "NODEDNS_REAL_KUBELET"
	EnvJudge   = "NODEDNS_REAL_KUBELET_JUDGE"
)

// Kubelet is the real kubelet and its judge, ready to run.
type Kubelet struct {
	bin, judge string
}

// Require skips t unless privileged tests run here and the real kubelet and its judge are built.
func Require(t testing.TB) *Kubelet {
	t.Helper()
	nstest.Require(t)
	k := &Kubelet{bin: os.Getenv(EnvKubelet), judge: os.Getenv(EnvJudge)}
	for name, p := range map[string]string{EnvKubelet: k.bin, EnvJudge: k.judge} {
		if p == "" {
			t.Skipf("the real kubelet is not built: set %s and %s (.ci/run builds them with .ci/kubelet-build into its cache)", EnvKubelet, EnvJudge)
		}
		if fi, err := os.Stat(p); err != nil || fi.Mode()&0o111 == 0 {
			t.Skipf("%s=%s is not an executable (.ci/kubelet-build builds it): %v", name, p, err)
		}
	}
	return k
}

// Config is kubelet's effective configuration as it logs it: its internal KubeletConfiguration as
// JSON (Go field names: ResolverConfig, ClusterDNS, ClusterDomain).
type Config map[string]any

// ResolvConf is the file kubelet reads for pods' DNS ("" disables it).
func (c Config) ResolvConf() string { s, _ := c["ResolverConfig"].(string); return s }

// ClusterDomain is kubelet's clusterDomain.
func (c Config) ClusterDomain() string { s, _ := c["ClusterDomain"].(string); return s }

// ClusterDNS is kubelet's clusterDNS.
func (c Config) ClusterDNS() []string {
	var out []string
	l, _ := c["ClusterDNS"].([]any)
	for _, v := range l {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// DiffBesidesResolvConf is the difference of two configurations in every field but resolvConf.
func DiffBesidesResolvConf(a, b Config) string {
	strip := func(c Config) Config {
		out := Config{}
		for k, v := range c {
			if k != "ResolverConfig" {
				out[k] = v
			}
		}
		return out
	}
	return cmp.Diff(strip(a), strip(b))
}

// Refused is kubelet not starting: what it said when it exited before reporting its configuration
// (an unknown flag, a config it cannot decode or that fails validation).
type Refused struct{ Msg string }

func (e *Refused) Error() string { return "kubelet refuses to start: " + e.Msg }

// Start is how a node starts kubelet: the arguments after the program, and files the starter writes
// before it starts kubelet (node path: content; k3s's drop-in, a resolv.conf it generates). Files
// go into the overlay, never into the tree.
type Start struct {
	Args  []string
	Files map[string][]byte
	// How says where Args come from, for messages.
	How string
}

// mountDir is where the binaries are bound inside the overlay (a directory no tree has).
const mountDir = "/.nodedns-kubeletjudge"

// Effective starts the real kubelet on the tree under root as s says and returns the configuration
// it reports. An error is a *Refused when kubelet exits without reporting one.
func (k *Kubelet) Effective(t testing.TB, root string, s Start) (Config, error) {
	t.Helper()
	// Last, so that they win over the node's own -v (kubelet's flags are last-wins).
	argv := append(append([]string{mountDir + "/kubelet"}, s.Args...), "-v=5", "--exit-on-lock-contention")
	_, stderr, _, err := k.run(t, root, s.Files, true, argv, nil)
	cfg, perr := ParseLog(stderr)
	if perr != nil {
		if msg := failure(stderr); msg != "" && !strings.Contains(msg, "no lock file specified") {
			return nil, &Refused{Msg: msg}
		}
		return nil, fmt.Errorf("kubelet %q (%s): %v; run: %v\n%s", s.Args, s.How, perr, err, tail(stderr))
	}
	// It must have stopped where it was told to: after the report, at the lock file.
	if !strings.Contains(stderr, "no lock file specified") {
		return nil, fmt.Errorf("kubelet %q did not stop at --exit-on-lock-contention (%v):\n%s", s.Args, err, tail(stderr))
	}
	return cfg, nil
}

// PodResolvConf is the resolv.conf kubelet's pod DNS configurer gives a pod with dnsPolicy policy
// (Default, ClusterFirst) under the configuration c, reading c's resolvConf from the tree.
func (k *Kubelet) PodResolvConf(t testing.TB, root string, c Config, policy string) (string, error) {
	t.Helper()
	args := []string{mountDir + "/kubelet-judge", "pod", "-resolv-conf=" + c.ResolvConf(), "-cluster-dns=" + strings.Join(c.ClusterDNS(), ","),
		"-cluster-domain=" + c.ClusterDomain(), "-policy=" + policy}
	stdout, stderr, _, err := k.run(t, root, nil, false, args, nil)
	if err != nil {
		return "", fmt.Errorf("kubelet's pod DNS configurer: %v: %s", err, strings.TrimSpace(stderr))
	}
	return stdout, nil
}

// Rancher is how RKE2 or k3s (shape) started with argv (after the program: "server" or "agent" and
// its flags) and the environment env (NAME=value) would start kubelet on the tree: the judge's
// model of them (.ci/kubelet-judge/rancher.go) run chrooted in the tree. The files it writes (k3s's
// drop-in, a generated resolv.conf) are returned in Start.Files.
func (k *Kubelet) Rancher(t testing.TB, root, shape string, argv, env []string) (Start, error) {
	t.Helper()
	args := append([]string{mountDir + "/kubelet-judge", "rancher", "-shape=" + shape}, argv...)
	stdout, stderr, up, err := k.run(t, root, nil, false, args, env)
	if err != nil {
		return Start{}, fmt.Errorf("%s's model: %v: %s", shape, err, strings.TrimSpace(stderr))
	}
	s := Start{Files: map[string][]byte{}, How: shape + " " + strings.Join(argv, " ") + " (RKE2/k3s modelled: .ci/kubelet-judge/rancher.go)"}
	if out := strings.TrimSuffix(stdout, "\x00"); out != "" {
		s.Args = strings.Split(out, "\x00")
	}
	// What the model wrote is in the overlay's upper layer: the regular files, the mounts aside.
	err = filepath.WalkDir(up, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel := "/" + filepath.ToSlash(strings.TrimPrefix(p, up+string(filepath.Separator)))
		if strings.HasPrefix(rel, mountDir+"/") {
			return nil
		}
		data, err := os.ReadFile(p)
		s.Files[rel] = data
		return err
	})
	return s, err
}

// run runs argv (argv[0] under mountDir) chrooted in an overlay of root with the environment env
// (NAME=value), in private mount and PID namespaces that end with it; files are written into the
// overlay first, cgroup mounts a read-only cgroup2 at /sys/fs/cgroup. It returns stdout, stderr and
// the overlay's upper layer.
func (k *Kubelet) run(t testing.TB, root string, files map[string][]byte, cgroup bool, argv, env []string) (string, string, string, error) {
	t.Helper()
	dir := t.TempDir()
	up, work, merged := filepath.Join(dir, "up"), filepath.Join(dir, "work"), filepath.Join(dir, "merged")
	for _, d := range []string{up, work, merged} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Files placed in the upper layer before the mount shadow the tree's, as if written over it.
	for p, data := range files {
		full := filepath.Join(up, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	q := nstest.Quote
	m := func(p string) string { return q(merged + p) }
	lines := []string{
		"set -e",
		fmt.Sprintf("mount -t overlay overlay -o lowerdir=%s,upperdir=%s,workdir=%s %s", q(root), q(up), q(work), q(merged)),
		"mkdir -p " + m(mountDir) + " " + m("/proc"),
		"mount -t tmpfs -o mode=0755 tmpfs " + m(mountDir),
		"touch " + m(mountDir+"/kubelet") + " " + m(mountDir+"/kubelet-judge"),
		"mount --bind -o ro " + q(k.bin) + " " + m(mountDir+"/kubelet"),
		"mount --bind -o ro " + q(k.judge) + " " + m(mountDir+"/kubelet-judge"),
		"mount -t proc proc " + m("/proc"),
	}
	if cgroup {
		lines = append(lines, "mkdir -p "+m("/sys/fs/cgroup"), "mount -t cgroup2 -o ro cgroup2 "+m("/sys/fs/cgroup"))
	}
	var words []string
	for _, a := range argv {
		words = append(words, q(a))
	}
	envWords := []string{"env", "-i"}
	for _, e := range env {
		envWords = append(envWords, q(e))
	}
	lines = append(lines, "exec "+strings.Join(envWords, " ")+` "$(command -v chroot)" `+q(merged)+" "+strings.Join(words, " "))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "--mount", "--pid", "--fork", "--kill-child", "--propagation", "private", "sh", "-c", strings.Join(lines, "\n"))
	// kubelet and the judge see no environment of the test's but what they are given.
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// Nothing may outlive the test: unshare dies with it (tied: forked from a thread that lives as
	// long as the test process), and its child with unshare (--kill-child).
	err := tied.Start(cmd)
	if err == nil {
		err = cmd.Wait()
	}
	return stdout.String(), stderr.String(), up, err
}

// ParseLog finds the configuration kubelet logs at -v=5 in its log: klog's text format writes the
// value as `configuration=<` then the JSON, each line indented with a tab, then ` >`; its JSON
// format (logging.format: json in the config) as the "configuration" field of the entry.
func ParseLog(log string) (Config, error) {
	const head = `"KubeletConfiguration" configuration=<`
	lines := strings.Split(log, "\n")
	for i, l := range lines {
		if strings.HasSuffix(l, head) {
			var js strings.Builder
			for _, v := range lines[i+1:] {
				if v == " >" {
					var c Config
					if err := json.Unmarshal([]byte(js.String()), &c); err != nil {
						return nil, fmt.Errorf("kubelet's configuration is not JSON: %w", err)
					}
					return c, nil
				}
				js.WriteString(strings.TrimPrefix(v, "\t"))
				js.WriteByte('\n')
			}
			return nil, errors.New("kubelet's configuration is cut short")
		}
		if strings.HasPrefix(l, "{") && strings.Contains(l, `"msg":"KubeletConfiguration"`) {
			var entry struct {
				Configuration Config `json:"configuration"`
			}
			if err := json.Unmarshal([]byte(l), &entry); err != nil {
				return nil, fmt.Errorf("kubelet's JSON log entry: %w", err)
			}
			return entry.Configuration, nil
		}
	}
	return nil, errors.New("kubelet logged no configuration")
}

// failure is the reason kubelet gave for exiting (cmd/kubelet's run.go: `"command failed" err=...`,
// or cobra's "Error: ..." for a flag it does not know).
func failure(log string) string {
	for _, l := range strings.Split(log, "\n") {
		if i := strings.Index(l, `"command failed" err=`); i >= 0 {
			return l[i+len(`"command failed" err=`):]
		}
		if strings.HasPrefix(l, "Error: ") {
			return strings.TrimPrefix(l, "Error: ")
		}
	}
	return ""
}

func tail(s string) string {
	if len(s) > 4000 {
		return "..." + s[len(s)-4000:]
	}
	return s
}
