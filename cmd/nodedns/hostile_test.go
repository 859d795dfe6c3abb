package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/testutil/nstest"
)

// Inputs nodedns must survive: FIFOs, huge sparse files and devices where a file should be. Each
// runs the real binary with a deadline, so a blocking open fails the test instead of hanging it.

// hostileInputs are node paths nodedns reads, each on the seed 001 node with the packaged unit
// installed.
var hostileInputs = []string{
	"/etc/netplan/60-x.yaml",
	"/etc/systemd/resolved.conf.d/60-x.conf",
	"/etc/nodedns/config.yaml",
	"/lib/systemd/system/nodedns.service.d/x.conf",
	"/var/lib/nodedns/writers.json",
	"/sys/class/net/enp1s0/ifindex",
	"/run/systemd/netif/links/2",
}

type runResult struct {
	out    string
	code   int
	maxRSS int64 // bytes
}

// runBin runs the nodedns binary with a deadline and reports its exit code and peak RSS (measured
// through the rusage wrapper of main_test.go, so the test binary's own size does not count).
func runBin(t *testing.T, deadline time.Duration, args ...string) runResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, self, append([]string{nstest.Build(t)}, args...)...)
	cmd.Env = append(os.Environ(), rusageWrapperEnv+"=1")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("nodedns %s did not finish within %v (a blocking read?):\n%s", strings.Join(args, " "), deadline, out)
	}
	r := runResult{out: string(out)}
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("nodedns %s: %v", strings.Join(args, " "), err)
		}
		r.code = ee.ExitCode()
	}
	i := strings.LastIndex(r.out, "maxrss-kib ")
	if i < 0 {
		t.Fatalf("nodedns %s: the wrapper reported no RSS:\n%s", strings.Join(args, " "), r.out)
	}
	var kib int64
	if _, err := fmt.Sscan(r.out[i+len("maxrss-kib "):], &kib); err != nil {
		t.Fatal(err)
	}
	r.maxRSS = kib * 1024
	r.out = r.out[:i]
	return r
}

// TestFIFOInputs: a FIFO as a netplan file, a resolved drop-in, the config file, a unit drop-in,
// writers.json, an ifindex or a networkd link state file never blocks: plan and check finish, and
// the file is named (plan does not read writers.json, which only check and the daemon use).
func TestFIFOInputs(t *testing.T) {
	for _, p := range hostileInputs {
		t.Run(p, func(t *testing.T) {
			root := copyTree(t, "testdata/seeds/001")
			full := filepath.Join(root, p)
			must(t, os.MkdirAll(filepath.Dir(full), 0o755))
			_ = os.Remove(full)
			must(t, syscall.Mkfifo(full, 0o644))
			for _, args := range [][]string{{"plan"}, {"check", "-o", "json"}} {
				r := runBin(t, 10*time.Second, append([]string{"--root", root}, args...)...)
				if args[0] == "plan" && p == "/var/lib/nodedns/writers.json" {
					continue
				}
				if !strings.Contains(r.out, p) || !strings.Contains(r.out, "not a regular file but a named pipe") {
					t.Errorf("%s (exit %d) does not name %s as a FIFO:\n%s", args[0], r.code, p, r.out)
				}
			}
		})
	}
}

// TestHugeAndDeviceInputs: a sparse 1 GiB file and a character device (/dev/zero's 1:5) as a unit
// drop-in, writers.json, an ifindex and the backup manifest: a clear error naming the file, and the
// process stays under 100 MB of RSS (reading either whole would cost 1 GiB or never end).
func TestHugeAndDeviceInputs(t *testing.T) {
	inputs := []string{
		"/lib/systemd/system/nodedns.service.d/x.conf",
		"/var/lib/nodedns/writers.json",
		"/sys/class/net/enp1s0/ifindex",
		"/var/lib/nodedns/backup/manifest.json",
	}
	type maker struct {
		name string
		want string
		make func(t *testing.T, full string)
	}
	makers := []maker{
		{"sparse 1 GiB", "1073741824 bytes, over the", func(t *testing.T, full string) {
			f, err := os.Create(full)
			must(t, err)
			must(t, f.Truncate(1<<30))
			must(t, f.Close())
		}},
		{"character device", "not a regular file but a device", func(t *testing.T, full string) {
			if os.Geteuid() != 0 {
				t.Skip("mknod needs root")
			}
			must(t, syscall.Mknod(full, syscall.S_IFCHR|0o644, int(1<<8|5)))
		}},
	}
	for _, m := range makers {
		for _, p := range inputs {
			t.Run(m.name+" "+p, func(t *testing.T) {
				root := copyTree(t, "testdata/seeds/001")
				full := filepath.Join(root, p)
				must(t, os.MkdirAll(filepath.Dir(full), 0o700))
				_ = os.Remove(full)
				m.make(t, full)
				cmds := [][]string{{"plan"}, {"check", "-o", "json"}}
				if strings.Contains(p, "/backup/") {
					cmds = [][]string{{"apply"}, {"restore"}}
				}
				for _, args := range cmds {
					r := runBin(t, 20*time.Second, append([]string{"--root", root}, args...)...)
					t.Logf("%s: exit %d, peak RSS %.1f MB", args[0], r.code, float64(r.maxRSS)/(1<<20))
					if r.maxRSS > 100<<20 {
						t.Errorf("%s peaked at %d MB of RSS", args[0], r.maxRSS>>20)
					}
					if args[0] == "plan" && p == "/var/lib/nodedns/writers.json" {
						continue // plan does not read it
					}
					if !strings.Contains(r.out, p) || !strings.Contains(r.out, m.want) {
						t.Errorf("%s (exit %d) does not say %q naming %s:\n%s", args[0], r.code, m.want, p, r.out)
					}
				}
			})
		}
	}
}

// TestRunSurvivesAFIFO: under `run`, a FIFO swapped in as /etc/resolv.conf does not freeze the event
// loop: a bad file written after it is still fixed, and SIGTERM still stops the daemon within a
// second.
func TestRunSurvivesAFIFO(t *testing.T) {
	root := t.TempDir()
	putFile(t, root, "/etc/resolv.conf", runGood)
	p := startRun(t, root)
	fifo := filepath.Join(root, "etc/.fifo")
	must(t, syscall.Mkfifo(fifo, 0o644))
	must(t, os.Rename(fifo, filepath.Join(root, "etc/resolv.conf")))
	waitUntil(t, "the daemon to judge the FIFO", func() bool { return strings.Contains(p.log.String(), "named pipe") })
	putFile(t, root, "/etc/resolv.conf", runBad)
	waitUntil(t, "the bad file fixed", func() bool {
		got := getFile(root, "/etc/resolv.conf")
		return strings.Contains(got, "nameserver 10.0.0.2") && !strings.Contains(got, "169.254.25.10")
	})
	start := time.Now()
	if code := p.stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("SIGTERM took %v to stop the daemon", d)
	}
}

// TestRunFollowsNetworkd: on a networkd node without netplan, a deleted nodedns drop-in comes back
// and an edited .network file is acted on within the settle time, not at the resync (set to an
// hour here, so only events can explain it).
func TestRunFollowsNetworkd(t *testing.T) {
	root := t.TempDir()
	putFile(t, root, "/etc/systemd/network/50-eth0.network", "[Match]\nName=eth0\n[Network]\nDHCP=yes\n")
	putFile(t, root, "/etc/systemd/network/60-eth1.network", "[Match]\nName=eth1\n[Network]\nAddress=10.1.0.5/24\n")
	putFile(t, root, "/sys/class/net/eth0/ifindex", "2\n")
	putFile(t, root, "/run/systemd/netif/leases/2", "ADDRESS=10.0.0.5\nDNS=10.0.0.2\nDOMAINNAME=example.org\n")
	putFile(t, root, "/etc/resolv.conf", "nameserver 10.0.0.2\n")
	putFile(t, root, "/etc/nodedns/config.yaml", "daemon:\n  resyncInterval: 1h\n")
	p := startRun(t, root)
	const eth0 = "/etc/systemd/network/50-eth0.network.d/nodedns.conf"
	const eth1 = "/etc/systemd/network/60-eth1.network.d/nodedns.conf"
	has := func(f string) func() bool {
		return func() bool { return strings.Contains(getFile(root, f), "UseDomains=no") }
	}
	waitUntil(t, "the drop-in for eth0", has(eth0))

	start := time.Now()
	must(t, os.Remove(filepath.Join(root, eth0)))
	waitUntil(t, "the deleted drop-in back", has(eth0))
	t.Logf("deleted drop-in back after %v", time.Since(start))

	start = time.Now()
	putFile(t, root, "/etc/systemd/network/60-eth1.network", "[Match]\nName=eth1\n[Network]\nDHCP=ipv4\n")
	waitUntil(t, "a drop-in for the edited eth1 network", has(eth1))
	t.Logf("edited .network acted on after %v", time.Since(start))
	if n := strings.Count(p.log.String(), `trigger=resync`); n > 0 {
		t.Errorf("%d resync passes: the changes must come from events", n)
	}
	if code := p.stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("exit %d", code)
	}
}

// TestNetplanRejectedByNetplan: a tab in the indentation on line 6 of 50-cloud-init.yaml. netplan
// itself is the judge: plan and apply exit 1 quoting netplan's own position (6:1) and message, not
// the YAML library's (which says line 5).
func TestNetplanRejectedByNetplan(t *testing.T) { nstest.Suites(t, testNetplanRejectedByNetplan) }

func testNetplanRejectedByNetplan(t *testing.T, s nstest.Suite) {
	s.Need(t, "apt-get install netplan.io; .ci/run does", "netplan")
	root := copyTree(t, "testdata/seeds/001")
	must(t, os.WriteFile(filepath.Join(root, "etc/netplan/50-cloud-init.yaml"),
		[]byte("network:\n  version: 2\n  ethernets:\n    enp1s0:\n      dhcp4: true\n\t  dhcp6: false\n"), 0o600))
	run := func(args ...string) runResult { return runBin(t, 30*time.Second, args...) }
	if s.Chrooted() {
		// The suite's netplan runs in its tree: nodedns runs there too, on the same --root copy.
		sb := nstest.NewWith(t, nstest.Options{Suite: s})
		bin := nstest.Build(t)
		run = func(args ...string) runResult {
			out, err := sb.Cmd(context.Background(), bin, args...).CombinedOutput()
			r := runResult{out: string(out)}
			if ee, ok := err.(*exec.ExitError); ok {
				r.code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			return r
		}
	}
	for _, cmd := range []string{"plan", "apply"} {
		r := run("--root", root, cmd)
		want := "/etc/netplan/50-cloud-init.yaml:6:1: Invalid YAML: tabs are not allowed for indent"
		if r.code != 1 || !strings.Contains(r.out, want) {
			t.Errorf("%s: exit %d, want 1 and %q in:\n%s", cmd, r.code, want, r.out)
		}
		if !strings.Contains(r.out, fmt.Sprintf("blocked %s", "/etc/netplan/90-nodedns.yaml")) && !strings.Contains(r.out, "# blocked /etc/netplan/90-nodedns.yaml") {
			t.Errorf("%s does not show the netplan change as blocked:\n%s", cmd, r.out)
		}
	}
}
