package packaging_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/testutil/nstest"
	"github.com/nodedns/nodedns/probes"
)

// The versions the install tests build: install the first, upgrade to the second.
const (
	v1 = "0.1.0"
	v2 = "0.1.1"
)

// packages are the deb and rpm files built from this tree, per version.
type packages struct {
	deb, rpm map[string]string
}

var (
	pkgOnce sync.Once
	pkgs    packages
	pkgErr  error
	pkgDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if pkgDir != "" {
		os.RemoveAll(pkgDir)
	}
	os.Exit(code)
}

// cacheDir is where .ci/run keeps slow downloads and builds ($NODEDNS_CACHE).
func cacheDir() string {
	if d := os.Getenv("NODEDNS_CACHE"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "nodedns-ci")
}

func lookNfpm(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("nfpm"); err == nil {
		return p
	}
	p := filepath.Join(cacheDir(), "bin", "nfpm")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	t.Skip("nfpm not installed (.ci/run installs v2.45.2 into $NODEDNS_CACHE/bin)")
	return ""
}

// buildPackages builds the deb and rpm of both test versions once per test binary, the way
// `make package` does (static binary stamped with the version, `nodedns gen`, gzip -9n, nfpm with
// the repository's nfpm.yaml), into a temporary directory.
func buildPackages(t *testing.T) packages {
	t.Helper()
	nfpm := lookNfpm(t)
	pkgOnce.Do(func() {
		pkgDir, pkgErr = os.MkdirTemp("", "nodedns-pkg-")
		if pkgErr != nil {
			return
		}
		repo, err := filepath.Abs("..")
		if err != nil {
			pkgErr = err
			return
		}
		pkgs = packages{deb: map[string]string{}, rpm: map[string]string{}}
		for _, v := range []string{v1, v2} {
			w := filepath.Join(pkgDir, v)
			if pkgErr = errors.Join(os.MkdirAll(filepath.Join(w, "dist", "gen"), 0o755), os.MkdirAll(filepath.Join(w, "out"), 0o755)); pkgErr != nil {
				return
			}
			steps := [][]string{
				{"go", "build", "-C", repo + "/cmd/nodedns", "-trimpath", "-ldflags", "-s -w -X main.version=" + v, "-o", w + "/bin/nodedns", "."},
				{w + "/bin/nodedns", "gen", w + "/dist/gen"},
				{"gzip", "-9n", w + "/dist/gen/nodedns.1"},
				{"ln", "-s", repo + "/packaging", w + "/packaging"},
				{"cp", repo + "/nfpm.yaml", w + "/nfpm.yaml"},
				{nfpm, "package", "-f", "nfpm.yaml", "-p", "deb", "-t", "out/"},
				{nfpm, "package", "-f", "nfpm.yaml", "-p", "rpm", "-t", "out/"},
			}
			for _, s := range steps {
				cmd := exec.Command(s[0], s[1:]...)
				cmd.Dir = w
				cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "NODEDNS_VERSION="+v, "NODEDNS_ARCH=amd64")
				if out, err := cmd.CombinedOutput(); err != nil {
					pkgErr = fmt.Errorf("%s: %v\n%s", strings.Join(s, " "), err, out)
					return
				}
			}
			pkgs.deb[v] = filepath.Join(w, "out", "nodedns_"+v+"-1_amd64.deb")
			pkgs.rpm[v] = filepath.Join(w, "out", "nodedns-"+v+"-1.x86_64.rpm")
		}
	})
	if pkgErr != nil {
		t.Fatalf("build packages: %v", pkgErr)
	}
	return pkgs
}

// TestLintian is the lintian gate: no error and no warning that is not overridden (with its reason)
// in packaging/debian/lintian-overrides.
func TestLintian(t *testing.T) {
	if testing.Short() {
		t.Skip("builds packages")
	}
	lintian, err := exec.LookPath("lintian")
	if err != nil {
		t.Skip("lintian not installed (.ci/run installs it)")
	}
	p := buildPackages(t)
	out, err := exec.Command(lintian, "--pedantic", "--fail-on", "error,warning", p.deb[v1]).CombinedOutput()
	if err != nil {
		t.Errorf("lintian %s: %v\n%s", filepath.Base(p.deb[v1]), err, out)
	}
	t.Logf("lintian:\n%s", out)
}

// TestRPMContents reads the rpm back with rpm itself: the files, the conffile flag and the erase
// scriptlet that restores the node.
func TestRPMContents(t *testing.T) {
	if testing.Short() {
		t.Skip("builds packages")
	}
	rpm, err := exec.LookPath("rpm")
	if err != nil {
		t.Skip("rpm not installed (.ci/run installs it)")
	}
	p := buildPackages(t)
	db := t.TempDir() // without --dbpath rpm writes ~/.rpmdb
	query := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(rpm, append([]string{"--dbpath", db, "-qp"}, append(args, p.rpm[v1])...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("rpm -qp %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	list := query("-l")
	for _, f := range []string{"/usr/bin/nodedns", "/usr/lib/systemd/system/nodedns.service", "/etc/nodedns/config.yaml", "/usr/share/man/man1/nodedns.1.gz", "/usr/share/nodedns/npd/nodedns-monitor.json",
		"/usr/lib/systemd/system-preset/80-nodedns.preset", "/usr/share/nodedns/prometheus/nodedns.rules.yml", "/usr/share/nodedns/grafana/nodedns.json",
		// every directory the package creates is its own, so erase leaves none behind
		"/etc/nodedns", "/usr/share/nodedns", "/usr/share/nodedns/npd", "/usr/share/nodedns/systemd", "/usr/share/licenses/nodedns"} {
		if !strings.Contains(list, f+"\n") {
			t.Errorf("rpm lacks %s:\n%s", f, list)
		}
	}
	if req := query("--requires"); !regexp.MustCompile(`(?m)^systemd$`).MatchString(req) {
		t.Errorf("the rpm does not require systemd:\n%s", req)
	}
	// %post follows systemd's presets, as %systemd_post does, instead of enabling the unit outright.
	if scripts := query("--scripts"); !strings.Contains(scripts, "systemctl --no-reload preset nodedns.service") || strings.Contains(scripts, "systemctl --no-reload enable") {
		t.Errorf("the rpm's %%post does not follow presets:\n%s", scripts)
	}
	if got := strings.TrimSpace(query("-c")); got != "/etc/nodedns/config.yaml" {
		t.Errorf("rpm config files = %q, want /etc/nodedns/config.yaml", got)
	}
	if !strings.Contains(query("--scripts"), "/usr/bin/nodedns restore") {
		t.Error("the rpm's scriptlets do not run nodedns restore")
	}
}

// chroot is a Debian minbase tree (debootstrap, cached by .ci/run) unpacked for one test: bookworm's,
// or with a suite's tree (nstest.Suite) that suite's (forky: dpkg and init-system-helpers of Debian
// testing, systemd 262 installed but not running).
type chroot struct {
	t   *testing.T
	dir string
}

func newSuiteChroot(t *testing.T, s nstest.Suite) *chroot {
	t.Helper()
	nstest.Require(t)
	tarball := os.Getenv("NODEDNS_CHROOT_TAR")
	if tarball == "" {
		tarball = filepath.Join(cacheDir(), "bookworm-minbase.tar")
	}
	if s.Chrooted() {
		tarball = os.Getenv(nstest.ForkyTarEnv)
	}
	if _, err := os.Stat(tarball); err != nil {
		t.Skipf("no debootstrap tree at %q (.ci/run builds it)", tarball)
	}
	dir := t.TempDir()
	if out, err := exec.Command("tar", "-C", dir, "-xf", tarball).CombinedOutput(); err != nil {
		t.Fatalf("unpack %s: %v\n%s", tarball, err, out)
	}
	return &chroot{t: t, dir: dir}
}

// cmd runs a command in the chroot inside a fresh, empty network namespace and a private mount
// namespace: nothing it does (nodedns's live checks, apt) reaches the host's network or mounts.
func (c *chroot) cmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "unshare", append([]string{"--net", "--mount", "--fork", "--propagation", "private", "chroot", c.dir}, args...)...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "DEBIAN_FRONTEND=noninteractive", "LANG=C.UTF-8", "HOME=/root"}
	cmd.Stdin = nil
	return cmd
}

// sh runs a script in the chroot and returns its output; a failure fails the test.
func (c *chroot) sh(script string) string {
	c.t.Helper()
	out, err := c.try(script)
	if err != nil {
		c.t.Fatalf("in chroot: %s\n%v\n%s", script, err, out)
	}
	return out
}

func (c *chroot) try(script string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := c.cmd(ctx, "/bin/sh", "-ec", script).CombinedOutput()
	return string(out), err
}

func (c *chroot) path(p string) string { return filepath.Join(c.dir, p) }

func (c *chroot) read(p string) string {
	c.t.Helper()
	data, err := os.ReadFile(c.path(p))
	if err != nil {
		c.t.Fatal(err)
	}
	return string(data)
}

// write writes a file in the chroot; a symlink there is replaced by the file (forky's tree has
// systemd-resolved installed, whose /etc/resolv.conf is a symlink to its stub: the node these
// tests set up is kubespray's host_resolvconf one, with a plain file).
func (c *chroot) write(p, data string) {
	c.t.Helper()
	if err := os.MkdirAll(filepath.Dir(c.path(p)), 0o755); err != nil {
		c.t.Fatal(err)
	}
	if fi, err := os.Lstat(c.path(p)); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		if err := os.Remove(c.path(p)); err != nil {
			c.t.Fatal(err)
		}
	}
	if err := os.WriteFile(c.path(p), []byte(data), 0o644); err != nil {
		c.t.Fatal(err)
	}
}

func (c *chroot) copyIn(src, dst string) {
	c.t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(c.path(dst), data, 0o644); err != nil {
		c.t.Fatal(err)
	}
}

// same reports whether node paths a and b are one file in the chroot (links followed inside it).
func (c *chroot) same(a, b string) bool {
	out, err := c.try("[ " + shq(a) + " -ef " + shq(b) + " ]")
	return err == nil && out == ""
}

func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func (c *chroot) mode(p string) fs.FileMode {
	c.t.Helper()
	fi, err := os.Lstat(c.path(p))
	if err != nil {
		c.t.Errorf("%s: %v", p, err)
		return 0
	}
	return fi.Mode()
}

func (c *chroot) absent(p string) {
	c.t.Helper()
	if _, err := os.Lstat(c.path(p)); err == nil {
		c.t.Errorf("%s is still there", p)
	}
}

// loopResolvConf is a node after kubespray's host_resolvconf: the cache first, a real server after.
const loopResolvConf = "# the node's own resolv.conf\nnameserver 169.254.25.10\nnameserver 192.0.2.53\noptions timeout:2\n"

// bootPersistence runs the file-level self-check in the chroot and returns boot.persistence.
func (c *chroot) bootPersistence() probes.Result {
	c.t.Helper()
	out, _ := c.try("nodedns --root / check -o json 2>/dev/null")
	var rep probes.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		c.t.Fatalf("check -o json: %v\n%s", err, out)
	}
	for _, r := range rep.Checks {
		if r.ID == "boot.persistence" {
			return r
		}
	}
	c.t.Fatal("no boot.persistence in the report")
	return probes.Result{}
}

// TestDebInstallUpgradePurge installs the deb into a real Debian chroot with dpkg, upgrades it with
// an edited conffile, and purges it: the purge must give the node its original resolv.conf back.
func TestDebInstallUpgradePurge(t *testing.T) { nstest.Suites(t, testDebInstallUpgradePurge) }

func testDebInstallUpgradePurge(t *testing.T, s nstest.Suite) {
	c := newSuiteChroot(t, s)
	p := buildPackages(t)
	c.write("/etc/resolv.conf", loopResolvConf)
	c.copyIn(p.deb[v1], "/tmp/nodedns-1.deb")
	c.copyIn(p.deb[v2], "/tmp/nodedns-2.deb")

	// Install.
	c.sh("dpkg -i /tmp/nodedns-1.deb </dev/null")
	if got := c.sh("nodedns version"); !strings.Contains(got, "nodedns "+v1+" ") {
		t.Errorf("nodedns version after install: %q, want %s", got, v1)
	}
	for p, want := range map[string]fs.FileMode{
		"/usr/bin/nodedns":                               0o755,
		"/lib/systemd/system/nodedns.service":            0o644,
		"/etc/nodedns/config.yaml":                       0o644,
		"/usr/share/man/man1/nodedns.1.gz":               0o644,
		"/usr/share/bash-completion/completions/nodedns": 0o644,
	} {
		if got := c.mode(p); got != want {
			t.Errorf("%s: mode %v, want %v", p, got, want)
		}
	}
	if got := c.sh("dpkg-query -W -f '${Conffiles}' nodedns"); !strings.Contains(got, "/etc/nodedns/config.yaml") {
		t.Errorf("dpkg does not list /etc/nodedns/config.yaml as a conffile: %q", got)
	}
	// Enabled without systemd running (deb-systemd-helper), so the next boot starts it before kubelet.
	// bookworm's deb-systemd-helper links to /lib/systemd/system/nodedns.service, forky's (merged
	// /usr) to /usr/lib/systemd/system/nodedns.service: the same file there.
	if target, err := os.Readlink(c.path("/etc/systemd/system/multi-user.target.wants/nodedns.service")); err != nil || !c.same(target, "/lib/systemd/system/nodedns.service") ||
		(target != "/lib/systemd/system/nodedns.service" && target != "/usr/lib/systemd/system/nodedns.service") {
		t.Errorf("enable symlink: %q, %v", target, err)
	}
	if r := c.bootPersistence(); r.Status != probes.OK {
		t.Errorf("boot.persistence after install: %s: %s", r.Status, r.Message)
	}
	// The shipped default config is accepted by the installed binary.
	c.sh("nodedns --config /etc/nodedns/config.yaml version >/dev/null")

	// nodedns fixes the node (file level: the chroot has no bus and no links).
	out, _ := c.try("nodedns --root / apply")
	fixed := c.read("/etc/resolv.conf")
	if strings.Contains(fixed, "nameserver 169.254.25.10") {
		t.Fatalf("apply left the loop in /etc/resolv.conf:\n%s\napply:\n%s", fixed, out)
	}

	// Upgrade with an edited conffile: the operator's edit stays, dpkg asks nothing.
	edited := c.read("/etc/nodedns/config.yaml") + "upstreams: [192.0.2.53]   # set by the operator\n"
	c.write("/etc/nodedns/config.yaml", edited)
	c.sh("dpkg -i /tmp/nodedns-2.deb </dev/null")
	if got := c.sh("nodedns version"); !strings.Contains(got, "nodedns "+v2+" ") {
		t.Errorf("nodedns version after upgrade: %q, want %s", got, v2)
	}
	if got := c.read("/etc/nodedns/config.yaml"); got != edited {
		t.Errorf("upgrade replaced the edited conffile:\n%s", got)
	}
	c.sh("nodedns --config /etc/nodedns/config.yaml version >/dev/null")
	if r := c.bootPersistence(); r.Status != probes.OK {
		t.Errorf("boot.persistence after upgrade: %s: %s", r.Status, r.Message)
	}

	// Remove keeps the fix and the config; purge restores the original bytes and leaves nothing.
	c.sh("dpkg --remove nodedns </dev/null")
	if got := c.read("/etc/resolv.conf"); got != fixed {
		t.Errorf("remove changed /etc/resolv.conf (only purge restores):\n%s", got)
	}
	c.absent("/usr/bin/nodedns")
	purge := c.sh("dpkg --purge nodedns </dev/null")
	if got := c.read("/etc/resolv.conf"); got != loopResolvConf {
		t.Errorf("purge did not restore the original /etc/resolv.conf:\n--- got\n%s--- want\n%s--- dpkg:\n%s", got, loopResolvConf, purge)
	}
	for _, p := range []string{"/var/lib/nodedns", "/etc/nodedns", "/etc/systemd/system/multi-user.target.wants/nodedns.service", "/etc/systemd/system/nodedns.service"} {
		c.absent(p)
	}
	if got, _ := c.try("dpkg-query -W -f '${db:Status-Status}' nodedns"); strings.Contains(got, "installed") || strings.Contains(got, "config-files") {
		t.Errorf("dpkg still knows the package after purge: %q", got)
	}
}

// TestRPMInstallRoot installs the rpm with `rpm --root` into a Debian chroot (no systemctl there:
// %post makes the enable symlink itself) and erases it: erase restores the node.
func TestRPMInstallRoot(t *testing.T) { nstest.Suites(t, testRPMInstallRoot) }

func testRPMInstallRoot(t *testing.T, s nstest.Suite) {
	c := newSuiteChroot(t, s)
	if _, err := exec.LookPath("rpm"); err != nil {
		t.Skip("rpm not installed (.ci/run installs it)")
	}
	p := buildPackages(t)
	c.write("/etc/resolv.conf", loopResolvConf)
	rpm := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		// rpm chroots into --root for the scriptlets; the namespaces keep them off the host's network.
		cmd := exec.CommandContext(ctx, "unshare", append([]string{"--net", "--mount", "--fork", "--propagation", "private", "rpm", "--root", c.dir, "--dbpath", "/var/lib/rpm"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("rpm %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	// --nodeps: the chroot's packages are in dpkg's database, not rpm's.
	rpm("-i", "--nodeps", p.rpm[v1])
	if got := c.sh("nodedns version"); !strings.Contains(got, "nodedns "+v1+" ") {
		t.Errorf("nodedns version: %q", got)
	}
	if got := c.mode("/usr/lib/systemd/system/nodedns.service"); got != 0o644 {
		t.Errorf("unit mode %v", got)
	}
	if target, err := os.Readlink(c.path("/etc/systemd/system/multi-user.target.wants/nodedns.service")); err != nil || target != "/usr/lib/systemd/system/nodedns.service" {
		t.Errorf("enable symlink: %q, %v", target, err)
	}
	if r := c.bootPersistence(); r.Status != probes.OK {
		t.Errorf("boot.persistence after rpm install: %s: %s", r.Status, r.Message)
	}
	c.try("nodedns --root / apply")
	if strings.Contains(c.read("/etc/resolv.conf"), "169.254.25.10") {
		t.Fatal("apply left the loop in /etc/resolv.conf")
	}
	rpm("-U", "--nodeps", p.rpm[v2])
	if got := c.sh("nodedns version"); !strings.Contains(got, "nodedns "+v2+" ") {
		t.Errorf("nodedns version after rpm -U: %q", got)
	}
	rpm("-e", "nodedns")
	if got := c.read("/etc/resolv.conf"); got != loopResolvConf {
		t.Errorf("rpm -e did not restore the original /etc/resolv.conf:\n%s", got)
	}
	for _, p := range []string{"/usr/bin/nodedns", "/var/lib/nodedns", "/etc/systemd/system/multi-user.target.wants/nodedns.service",
		"/etc/nodedns", "/usr/share/nodedns", "/usr/share/licenses/nodedns"} {
		c.absent(p)
	}

	// A site preset that disables nodedns wins over the package's: installed, not enabled.
	c.write("/etc/systemd/system-preset/10-site.preset", "disable nodedns.service\n")
	rpm("-i", "--nodeps", p.rpm[v1])
	c.absent("/etc/systemd/system/multi-user.target.wants/nodedns.service")
	rpm("-e", "nodedns")
}

// TestAnsibleLint: the role and the example playbook pass the ansible-lint Debian ships (6.13), with
// its production profile.
func TestAnsibleLint(t *testing.T) {
	al, err := exec.LookPath("ansible-lint")
	if err != nil {
		t.Skip("ansible-lint not installed (.ci/run installs it)")
	}
	work := t.TempDir()
	cmd := exec.Command(al, "--offline", "-p", "--profile", "production", "playbook.yml", "roles/nodedns")
	cmd.Dir = "ansible"
	cmd.Env = append(os.Environ(), "HOME="+work, "ANSIBLE_ROLES_PATH=roles", "ANSIBLE_LOCAL_TEMP="+filepath.Join(work, "tmp"), "NO_COLOR=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("ansible-lint: %v\n%s", err, out)
	}
}

// TestAnsibleRole runs the role for real against the debootstrap chroot over Ansible's
// community.general.chroot connection (no systemd there: nodedns_manage_service=false; the package
// still enables the unit). The chroot sits in an empty network namespace, so the live checks find no
// nodelocaldns interface: the preflight must fail the play with the check's own message, after the
// package is installed and the config templated. Per suite: Ansible (this machine's) runs its modules
// with the target's python3 and python3-apt, and installs the deb with the target's dpkg.
func TestAnsibleRole(t *testing.T) { nstest.Suites(t, testAnsibleRole) }

func testAnsibleRole(t *testing.T, s nstest.Suite) {
	ap, err := exec.LookPath("ansible-playbook")
	if err != nil {
		t.Skip("ansible-playbook not installed (.ci/run installs it)")
	}
	// Ansible's modules run with the target's python; ansible.builtin.apt also needs its apt
	// bindings (it would fetch python3-apt, and the play has no network).
	s.Need(t, "python3 and python3-apt in the target for Ansible's modules", "/usr/bin/python3", "/usr/lib/python3/dist-packages/apt/__init__.py")
	c := newSuiteChroot(t, s)
	p := buildPackages(t)
	work := t.TempDir()
	inv := filepath.Join(work, "inventory.ini")
	if err := os.WriteFile(inv, []byte("[k8s_cluster]\nnode ansible_connection=community.general.chroot ansible_host="+c.dir+" ansible_python_interpreter=/usr/bin/python3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "--net", "--mount", "--fork", "--propagation", "private",
		ap, "-i", inv, "playbook.yml",
		"-e", "nodedns_package_file="+p.deb[v1], "-e", "nodedns_manage_service=false", "-e", "nodedns_check_wait=2s",
		// The playbook passes no nodedns_config: on a Kubernetes node kubelet's config names the
		// cache. This chroot has no kubelet, so the cache address is given here, with upstreams: they
		// exercise the role's config template.
		// standby on: the role installs the standby's unit drop-in.
		"-e", `{"nodedns_config": {"upstreams": ["10.0.0.2"], "nodeLocalDNS": {"addresses": ["169.254.25.10"], "standby": "on"}}}`,
		// kubelet.manage on: the role sets both keys and installs kubelet.manage's unit drop-in.
		"-e", `{"nodedns_kubelet_manage": true, "nodedns_kubelet_restart": true}`)
	cmd.Dir = "ansible"
	cmd.Env = append(os.Environ(), "ANSIBLE_ROLES_PATH=roles", "ANSIBLE_LOCAL_TEMP="+filepath.Join(work, "tmp"), "HOME="+work,
		"ANSIBLE_NOCOLOR=1", "ANSIBLE_HOST_KEY_CHECKING=False")
	out, err := cmd.CombinedOutput()
	t.Logf("ansible-playbook:\n%s", out)
	if err == nil {
		t.Fatal("the play passed, but the chroot has no nodelocaldns interface: the preflight must fail it")
	}
	// The failure reads check by check: one line each, as Ansible prints a list message.
	for _, want := range []string{"Preflight - nodedns check", `"nodedns check: problem",`, `"PROBLEM nodelocaldns.interface: `, "TASK [nodedns : Apply nodedns once]"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("play output lacks %q", want)
		}
	}
	if got := c.sh("dpkg-query -W -f '${Version}' nodedns"); got != v1+"-1" {
		t.Errorf("installed version %q, want %s-1", got, v1)
	}
	cfg := c.read("/etc/nodedns/config.yaml")
	for _, want := range []string{"Managed by Ansible", "upstreams:", "10.0.0.2", "169.254.25.10", "kubelet:\n  manage: true\n  restart: true\n"} {
		if !strings.Contains(cfg, want) {
			t.Errorf("templated config lacks %q:\n%s", want, cfg)
		}
	}
	c.sh("nodedns --config /etc/nodedns/config.yaml version >/dev/null")
	if got, want := c.read("/etc/systemd/system/nodedns.service.d/standby.conf"), string(readRepo(t, "packaging/systemd/standby.conf")); got != want {
		t.Errorf("standby on: the role installed the standby drop-in as %q, want the package's", got)
	}
	if got, want := c.read("/etc/systemd/system/nodedns.service.d/kubelet-manage.conf"), string(readRepo(t, "packaging/systemd/kubelet-manage.conf")); got != want {
		t.Errorf("kubelet.manage on: the role installed its drop-in as %q, want the package's", got)
	}
	if _, err := os.Readlink(c.path("/etc/systemd/system/multi-user.target.wants/nodedns.service")); err != nil {
		t.Errorf("the unit is not enabled for the next boot: %v", err)
	}
}
