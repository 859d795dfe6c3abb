package nstest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Suite is one set of real components a live test runs against. The zero Suite is Bookworm: this
// machine's own Debian 12 (systemd-networkd 252, netplan 0.106, dnsmasq, dhclient) with the cached
// systemd-resolved 252 (NODEDNS_RESOLVED_DIR) and NetworkManager 1.42 (NODEDNS_NM_DIR). A Suite with
// a Tree is a newer Debian's cached tree (Forky: systemd 262, NetworkManager 1.58, netplan 1.2):
// a sandbox made with Options.Suite runs chrooted in an overlay of it, so every program a test or
// the harness starts in the sandbox (the daemons, their tools and nodedns's own calls) is the
// tree's.
type Suite struct {
	// Name names the subtest: "bookworm" or "forky".
	Name string
	// Tree is the unpacked tree ("" for Bookworm: the host's own files).
	Tree string
}

// Bookworm and Forky are the suites Suites runs, in that order.
const (
	Bookworm = "bookworm"
	Forky    = "forky"
)

// Chrooted reports whether the suite's sandboxes run in a tree of their own.
func (s Suite) Chrooted() bool { return s.Tree != "" }

// String is the suite's name.
func (s Suite) String() string {
	if s.Name == "" {
		return Bookworm
	}
	return s.Name
}

// missing says why a suite lacks a program a test needs, where the reason is a fact about the
// distribution rather than this machine's set-up (the test's subtest is then skipped with it).
var missing = map[string]map[string]string{
	Forky: {
		"dhclient": "Debian forky ships no isc-dhcp-client (its package index has none) and NetworkManager 1.58 has no dhclient backend",
	},
}

// Suites runs body once per suite, as subtests named by suite: "bookworm" (this machine's Debian 12
// with the cached resolved and NetworkManager) and "forky" (the cached Debian testing tree,
// NODEDNS_FORKY_TAR). A suite whose components are not cached is skipped with a message saying
// which variable to set; the body makes its sandboxes with Options{Suite: s}. A suite's tree runs
// only in a sandbox, so its subtest is privileged (Require); the bookworm one is what the body
// makes it (a body without sandboxes runs unprivileged on this machine's own components).
func Suites(t *testing.T, body func(t *testing.T, s Suite)) {
	t.Helper()
	t.Run(Bookworm, func(t *testing.T) { body(t, Suite{Name: Bookworm}) })
	t.Run(Forky, func(t *testing.T) {
		Require(t)
		body(t, Suite{Name: Forky, Tree: SuiteTree(t, ForkyTarEnv)})
	})
}

// Need skips t unless every program is in the suite (on this machine's PATH for Bookworm, in the
// tree's /usr/sbin, /usr/bin, /sbin or /bin otherwise, or an absolute path there). Where the suite
// lacks a program for a reason of its own (dhclient in forky), the skip says that reason.
func (s Suite) Need(t testing.TB, hint string, programs ...string) {
	t.Helper()
	for _, p := range programs {
		if why, ok := missing[s.String()][filepath.Base(p)]; ok {
			t.Skipf("%s: no %s: %s", s, p, why)
		}
		if !s.Chrooted() {
			if _, err := exec.LookPath(p); err != nil {
				t.Skipf("needs %s (%s): %v", p, hint, err)
			}
			continue
		}
		if !s.has(p) {
			t.Skipf("%s: the tree %s has no %s (rebuild it with .ci/suite-tree)", s, s.Tree, p)
		}
	}
}

func (s Suite) has(p string) bool {
	if filepath.IsAbs(p) {
		_, err := os.Stat(filepath.Join(s.Tree, p))
		return err == nil
	}
	for _, d := range []string{"/usr/sbin", "/usr/bin", "/sbin", "/bin"} {
		if fi, err := os.Stat(filepath.Join(s.Tree, d, p)); err == nil && !fi.IsDir() {
			return true
		}
	}
	return false
}

// root is where a chrooted sandbox's tree is mounted (inside its mount namespace only).
func (sb *Sandbox) root() string { return filepath.Join(sb.dir, "root") }

// chrootSetup returns the holder's lines that mount the suite's tree at root: an overlay (upper
// layer in the sandbox's directory), its own /proc, the network namespace's sysfs (writable, as a
// Bookworm sandbox's: StartNetworkd and NetworkManager remount it read-only), a tmpfs /run with
// the runtime directories resolved 257+ and networkd will not start without (PID 1 is not systemd
// here), the host's /dev, this machine's temporary directory and the cached CoreDNS at their own
// paths, and an empty /etc/resolv.conf as every sandbox has.
func (sb *Sandbox) chrootSetup(t testing.TB, empty string) []string {
	t.Helper()
	r := sb.root()
	up, work := filepath.Join(sb.dir, "tree-up"), filepath.Join(sb.dir, "tree-work")
	for _, d := range []string{r, up, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	q := Quote(r)
	lines := []string{
		"mount -t overlay overlay -o lowerdir=" + Quote(sb.Opts.Suite.Tree) + ",upperdir=" + Quote(up) + ",workdir=" + Quote(work) + " " + q,
		"mount -t proc proc " + q + "/proc",
		"mount -t sysfs sysfs " + q + "/sys",
		"mount -t tmpfs -o mode=0755 tmpfs " + q + "/run",
		"mount --bind /dev " + q + "/dev",
		"mkdir -p " + q + "/run/systemd/resolve " + q + "/run/systemd/netif " + q + "/run/dbus " + q + "/run/netns",
		"chroot " + q + " chown systemd-resolve:systemd-resolve /run/systemd/resolve",
		"chroot " + q + " chown systemd-network:systemd-network /run/systemd/netif",
		"rm -f " + q + "/etc/resolv.conf; : > " + q + "/etc/resolv.conf; mount --bind " + Quote(empty) + " " + q + "/etc/resolv.conf",
	}
	// netplan 1.1+'s generate asks systemctl for a daemon-reload and fails when it cannot; PID 1 is
	// not systemd here, so a stand-in answers that one request and refuses every other.
	standIn := filepath.Join(sb.dir, "systemctl")
	if err := os.WriteFile(standIn, []byte(systemctlStandIn), 0o755); err != nil {
		t.Fatal(err)
	}
	lines = append(lines, "cp "+Quote(standIn)+" "+q+"/usr/local/sbin/systemctl")
	binds := []string{os.TempDir()}
	if c := os.Getenv(CoreDNSEnv); c != "" {
		binds = append(binds, filepath.Dir(c))
	}
	for _, d := range binds {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			continue
		}
		lines = append(lines, "mkdir -p "+Quote(r+d), "mount --bind "+Quote(d)+" "+Quote(r+d))
	}
	return lines
}

const systemctlStandIn = `#!/bin/sh
# nstest: PID 1 is not systemd in this sandbox. netplan generate's daemon-reload is answered; every
# other request fails as the real systemctl would here.
for a in "$@"; do [ "$a" = daemon-reload ] && exit 0; done
echo "System has not been booted with systemd as init system (PID 1). Can't operate. (nstest stand-in: systemctl $*)" >&2
exit 1
`
