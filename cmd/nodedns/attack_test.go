package main

import (
	"context"
	"encoding/json"
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

// The attacker's tests: what an unprivileged user (uid 65534, nobody, no passwd entry added) can
// do to nodedns's inputs and outputs when something on the node is theirs, each attack run as that
// user, its effect measured before the fix in the test's comment.

// asNobody runs a shell script as uid and gid 65534 in dir (setpriv, as SysProcAttr.Credential
// would), failing the test if it fails: the attack itself must work.
func asNobody(t *testing.T, dir, script string) {
	t.Helper()
	cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-ec", script)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the attack as nobody: %v\n%s\n%s", err, script, out)
	}
}

// attackTree copies a fixture tree for an attack: the temporary directories above it opened for
// walking (0755), so that nobody reaches the parts of the tree that are theirs.
func attackTree(t *testing.T, src string) string {
	t.Helper()
	root := copyTree(t, src)
	for d := root; d != "/" && strings.HasPrefix(d, os.TempDir()); d = filepath.Dir(d) {
		if d == filepath.Clean(os.TempDir()) {
			break
		}
		must(t, os.Chmod(d, 0o755))
	}
	return root
}

// TestAttackKubeletManageEdits (docs/contract.md "kubelet.manage"; "Where things live"): a place
// kubelet.manage edits that another user can change (its directory theirs, or the file itself) is
// refused, named, and nothing is written through it: nobody plants a symlink to a file of root's
// (/etc/victim, 0600) where apply would write, or owns the file apply would edit, or adds a drop-in
// of their own that would win, in /etc/sysconfig and /etc/default (kubeadm's environment files),
// /etc/rancher/k3s/config.yaml.d, /etc/rancher/rke2 and a kubelet --config-dir; or root's own link
// leads to a file of nobody's. apply exits 1 with the target blocked, naming it: plan says so too.
//
// Measured before: every link planted in a directory of nobody's, and root's link to a file in
// one, was refused by the store at write time ("write failed ... the directory /etc/sysconfig on the
// way to it is owned by uid 65534"; plan still proposed the edit), root's file behind it unchanged;
// but the file of nobody's in /etc/sysconfig (root's) was edited, exit 0, and kept nobody's (the
// store keeps a rewritten file's owner): its owner could point kubelet elsewhere again at once, and
// restore would hand the original back to them.
func TestAttackKubeletManageEdits(t *testing.T) {
	nstest.Require(t)
	cfg := manageConfig(t, "")
	for _, tc := range []struct {
		name, tree string
		setup      string // as root, in the tree: what makes the place another user's
		attack     string // as nobody, in the tree
		refused    string // what apply's output names
	}{
		{"/etc/sysconfig is nobody's: the environment file a link to root's file", "kubelet/kubeadm-looping",
			"chown 65534:65534 etc/sysconfig && cp etc/sysconfig/kubelet etc/victim && chmod 0600 etc/victim",
			"rm etc/sysconfig/kubelet && ln -s /etc/victim etc/sysconfig/kubelet", "/etc/sysconfig"},
		{"/etc/sysconfig/kubelet is nobody's", "kubelet/kubeadm-looping",
			"chown 65534:65534 etc/sysconfig/kubelet && : > etc/victim",
			"printf 'KUBELET_EXTRA_ARGS=--resolv-conf=/etc/resolv.conf\\n' > etc/sysconfig/kubelet", "/etc/sysconfig/kubelet"},
		{"/etc/sysconfig/kubelet root's link to a file of nobody's", "kubelet/kubeadm-looping",
			"mkdir -p srv/x && mv etc/sysconfig/kubelet srv/x/kubelet && ln -s /srv/x/kubelet etc/sysconfig/kubelet && chown -R 65534:65534 srv/x && : > etc/victim",
			"printf 'KUBELET_EXTRA_ARGS=--resolv-conf=/etc/resolv.conf\n' > srv/x/kubelet", "/etc/sysconfig/kubelet"},
		{"/etc/default is nobody's: the environment file a link to root's file", "kubelet/kubeadm-looping",
			"mkdir -p etc/default && mv etc/sysconfig/kubelet etc/default/kubelet && sed -i 's|/etc/sysconfig/kubelet|/etc/default/kubelet|' usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf && " +
				"chown 65534:65534 etc/default && cp etc/default/kubelet etc/victim && chmod 0600 etc/victim",
			"rm etc/default/kubelet && ln -s /etc/victim etc/default/kubelet", "/etc/default"},
		{"k3s's config.yaml.d is nobody's: the drop-in a link to root's file", "kubelet/k3s-dropin-uppercase",
			"chown 65534:65534 etc/rancher/k3s/config.yaml.d && cp etc/rancher/k3s/config.yaml.d/50-dns.YAML etc/victim && chmod 0600 etc/victim",
			"rm etc/rancher/k3s/config.yaml.d/50-dns.YAML && ln -s /etc/victim etc/rancher/k3s/config.yaml.d/50-dns.YAML", "/etc/rancher/k3s/config.yaml.d"},
		{"k3s's config.yaml.d is nobody's: a drop-in of theirs that wins", "kubelet/k3s-dropin-uppercase",
			"chown 65534:65534 etc/rancher/k3s/config.yaml.d && : > etc/victim",
			"printf 'resolv-conf: /etc/resolv.conf\\n' > etc/rancher/k3s/config.yaml.d/90-mine.yaml", "/etc/rancher/k3s/config.yaml.d"},
		{"/etc/rancher/rke2 is nobody's: config.yaml a link to root's file", "kubelet/rke2-looping",
			"chown 65534:65534 etc/rancher/rke2 && cp etc/rancher/rke2/config.yaml etc/victim && chmod 0600 etc/victim",
			"rm etc/rancher/rke2/config.yaml && ln -s /etc/victim etc/rancher/rke2/config.yaml", "/etc/rancher/rke2"},
		{"the --config-dir is nobody's: zz-nodedns.conf a link to root's file", "kubelet/kubeadm-configdir-looping",
			"chown 65534:65534 etc/kubernetes/kubelet.conf.d && : > etc/victim && chmod 0600 etc/victim",
			"ln -s /etc/victim etc/kubernetes/kubelet.conf.d/zz-nodedns.conf", "/etc/kubernetes/kubelet.conf.d"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := attackTree(t, "testdata/"+tc.tree)
			run := exec.Command("sh", "-ec", tc.setup)
			run.Dir = root
			if out, err := run.CombinedOutput(); err != nil {
				t.Fatalf("setup: %v\n%s", err, out)
			}
			// root's file an attacker wants written through a link (a copy of the file apply would
			// edit, so that the plan is the same through the link), 0600: it must not change.
			victim := filepath.Join(root, "etc/victim")
			victimData, err := os.ReadFile(victim)
			must(t, err)
			asNobody(t, root, tc.attack)
			before := treeState(t, root)
			r := nodedns(t, "--config", cfg, "--root", root, "apply")
			t.Logf("apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			if data, err := os.ReadFile(victim); err != nil || string(data) != string(victimData) {
				t.Errorf("root's file behind the link was changed (%v): %q", err, data)
			}
			if r.code == 0 {
				t.Errorf("apply exit 0: it did not refuse the place nobody can change")
			}
			if !strings.Contains(r.stdout+r.stderr, tc.refused) {
				t.Errorf("apply does not name %s", tc.refused)
			}
			if !strings.Contains(r.stdout, "blocked "+tc.refused) && !strings.Contains(r.stdout, "blocked /"+strings.TrimPrefix(tc.refused, "/")) {
				t.Errorf("apply does not block the target in %s: %s", tc.refused, r.stdout)
			}
			after := treeState(t, root)
			for _, p := range changedFiles(before, after) {
				if strings.HasPrefix(p, strings.TrimPrefix(tc.refused, "/")) {
					t.Errorf("apply changed %s, in the place nobody can change", p)
				}
			}
		})
	}
}

// openForNobody opens root's temporary directories above dir for walking (0755), so nobody reaches
// the parts of a tree that are theirs.
func openForNobody(t *testing.T, dir string) {
	t.Helper()
	for d := dir; d != "/" && strings.HasPrefix(d, os.TempDir()); d = filepath.Dir(d) {
		if d == filepath.Clean(os.TempDir()) {
			break
		}
		must(t, os.Chmod(d, 0o755))
	}
}

// TestAttackStateRecords (docs/contract.md "Where things live"): nodedns's own records are believed
// only when nobody else could have written them, as the store's state is. nobody plants
// /var/lib/nodedns/kubelet-restart.json naming another unit (sshd.service) with a change in the
// future, and dhcp-domains.json saying a search domain the node has on purpose (corp.example) came
// from DHCP on lo (a link without a networkd lease, where the record bridges a lease gap): where the state directory is nobody's, and where the record itself is nobody's in
// root's directory. Neither changes what nodedns restarts or writes; check names the record.
func TestAttackStateRecords(t *testing.T) {
	nstest.Require(t)
	const sshd = `{"unit":"sshd.service","file":"/var/lib/kubelet/config.yaml","changed":"2999-01-01T00:00:00Z"}`
	// lo: a link every node has, with no networkd lease, whose record the plan would believe.
	const domains = `{"comment":"x","links":{"lo":{"domains":["corp.example"],"from":"x"}}}`
	for _, own := range []struct{ name, setup string }{
		{"the state directory is nobody's", "mkdir -p var/lib/nodedns && chown 65534:65534 var/lib/nodedns"},
		{"the record is nobody's", "mkdir -p var/lib/nodedns && touch var/lib/nodedns/RECORD && chown 65534:65534 var/lib/nodedns/RECORD"},
	} {
		t.Run("kubelet-restart.json: "+own.name, func(t *testing.T) {
			root := attackTree(t, "testdata/kubelet/kubeadm-healthy")
			// kubelet already pointed at nodedns's file: the record's restart is all that is left.
			cfg := manageConfig(t, "  restart: true\n")
			if r := nodedns(t, "--config", manageConfig(t, ""), "--root", root, "apply"); r.code != 0 {
				t.Fatalf("apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			setup := exec.Command("sh", "-ec", strings.ReplaceAll(own.setup, "RECORD", "kubelet-restart.json"))
			setup.Dir = root
			if out, err := setup.CombinedOutput(); err != nil {
				t.Fatalf("setup: %v\n%s", err, out)
			}
			asNobody(t, root, "rm -f var/lib/nodedns/kubelet-restart.json 2>/dev/null || true; printf '%s\\n' '"+sshd+"' > var/lib/nodedns/kubelet-restart.json")
			p, r := planOf(t, "--config", cfg, "--root", root)
			for _, a := range p.Actions {
				if a.Target == "sshd.service" {
					t.Errorf("the plan restarts %s, the unit nobody's record names: %+v", a.Target, a)
				}
			}
			if t.Failed() {
				t.Logf("plan:\n%s", r.stdout)
			}
			kc := byIDIn(t, nodedns(t, "--config", cfg, "--root", root, "check", "-o", "json").stdout, "kubelet.resolvconf")
			if !strings.Contains(kc, "refusing untrusted state /var/lib/nodedns") {
				t.Errorf("check does not name the untrusted record: %s", kc)
			}
		})
		t.Run("dhcp-domains.json: "+own.name, func(t *testing.T) {
			root := networkdGapNode(t)
			// The node searches corp.example on purpose (resolved's Domains=), and DHCP hands
			// ens3 example.org: kubelet's file keeps the former, drops the latter.
			putFile(t, root, "/run/systemd/resolve/resolv.conf", "nameserver 10.77.0.53\nsearch corp.example example.org\n")
			putFile(t, root, "/run/systemd/resolve/stub-resolv.conf", "nameserver 127.0.0.53\noptions edns0 trust-ad\nsearch corp.example example.org\n")
			putFile(t, root, "/etc/systemd/resolved.conf", "[Resolve]\nDomains=corp.example\n")
			putFile(t, root, "/sys/class/net/lo/ifindex", "1\n")
			if p, r := planOf(t, "--root", root); !strings.Contains(r.stdout, `search corp.example`) {
				t.Fatalf("without the attack kubelet's resolv.conf does not search corp.example: the case proves nothing\n%+v", p.Changes)
			}
			openForNobody(t, root)
			setup := exec.Command("sh", "-ec", strings.ReplaceAll(own.setup, "RECORD", "dhcp-domains.json"))
			setup.Dir = root
			if out, err := setup.CombinedOutput(); err != nil {
				t.Fatalf("setup: %v\n%s", err, out)
			}
			asNobody(t, root, "printf '%s\\n' '"+domains+"' > var/lib/nodedns/dhcp-domains.json")
			p, r := planOf(t, "--root", root)
			found := false
			for _, c := range p.Changes {
				if c.Path == "/var/lib/nodedns/resolv.conf" {
					found = true
					if !strings.Contains(c.Diff, "+search corp.example") && !strings.Contains(c.Diff, " search corp.example") {
						t.Errorf("kubelet's resolv.conf loses corp.example, which nobody's record says DHCP gave:\n%s", c.Diff)
					}
				}
			}
			if !found {
				t.Errorf("the plan writes no kubelet resolv.conf:\n%s", r.stdout)
			}
			dc := byIDIn(t, nodedns(t, "--root", root, "check", "-o", "json").stdout, "dhcp.search")
			if !strings.Contains(dc, "refusing untrusted state /var/lib/nodedns") {
				t.Errorf("dhcp.search does not name the untrusted record: %s", dc)
			}
		})
	}
}

// byIDIn is the status and message of check id in a check -o json report.
func byIDIn(t *testing.T, out, id string) string {
	t.Helper()
	var rep struct {
		Checks []struct{ ID, Status, Message string }
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("check -o json: %v\n%s", err, out)
	}
	for _, c := range rep.Checks {
		if c.ID == id {
			return c.Status + ": " + c.Message
		}
	}
	t.Fatalf("no %s in\n%s", id, out)
	return ""
}

// hostileVarlink is a varlink server that misbehaves as the mode says (python3 of the node's, run as
// nobody): huge (64 MiB of one reply, no end), deep (4 MiB of nesting), slow (a space every 100 ms,
// never a reply's end), options (a valid reply of 4 MiB: 150,000 DHCP options).
const hostileVarlink = `import os, socket, sys, time
mode, path = sys.argv[1], sys.argv[2]
try:
    os.unlink(path)
except FileNotFoundError:
    pass
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(path)
s.listen(16)
open(path + ".ready", "w").close()
while True:
    c, _ = s.accept()
    if os.fork() == 0:
        try:
            buf = b""
            while not buf.endswith(b"\0"):
                d = c.recv(4096)
                if not d:
                    break
                buf += d
            if mode == "huge":
                c.sendall(b'{"parameters":{"Interfaces":[{"Name":"' + b"a" * (64 << 20) + b'"}]}}\0')
            elif mode == "deep":
                c.sendall(b'{"parameters":' + b"[" * (4 << 20) + b"\0")
            elif mode == "slow":
                while True:
                    c.sendall(b" ")
                    time.sleep(0.1)
            elif mode == "options":
                opt = b'{"tag":6,"data":"0a000002"},'
                n = (4 << 20) // len(opt) - 64
                c.sendall(b'{"parameters":{"Interfaces":[{"Index":2,"Name":"eth0","DHCPv4Client":{"Lease":{"Message":{"yiaddr":"0a000005","options":[' + opt * n + b'{"tag":1,"data":"ffffff00"}]}}}}]}}\0')
        finally:
            os._exit(0)
    c.close()
`

// TestAttackVarlinkServer (docs/contract.md "Upstreams"): networkd's varlink socket
// /run/systemd/netif/io.systemd.Network is asked for leases on every live pass. Who can bind it is
// whoever can write /run/systemd/netif: networkd's own user, as systemd makes the directory
// (systemd-network, 0755), else root. Run as that user (nobody here), a hostile server costs a pass
// bounded time and memory whatever it answers: 64 MiB of one reply, 4 MiB of nesting, a reply that
// never ends, a valid reply of 150,000 options: `nodedns check` takes at most the varlink timeout
// (5 s) longer than without the server and its peak RSS grows by at most 64 MiB. Where the directory
// is writable by others, anyone could bind the socket: nodedns does not ask it at all.
//
// Measured before: held for the four replies (here: check 10 ms and 17 MiB without a server; 113 ms
// and 26 MiB with the huge reply, 35 ms and 26 MiB deep, 5.014 s and 18 MiB slow, 125 ms and 41 MiB
// with the 150,000 options: the 4 MiB reply bound and the 5 s timeout). But with
// /run/systemd/netif root's and 0777, nobody's server was asked and held check 5.014 s (every pass
// alike), its answer taken as networkd's.
func TestAttackVarlinkServer(t *testing.T) {
	nstest.Require(t)
	sb := nstest.New(t)
	bin := nstest.Build(t)
	sb.Isolate(t)
	sb.Run(t, "mount -t tmpfs -o mode=1777 tmpfs /var/tmp && mkdir -p /run/systemd/netif && chown 65534:65534 /run/systemd/netif")
	must(t, os.WriteFile(sb.Path("/var/tmp/hostile.py"), []byte(hostileVarlink), 0o644))
	const sock = "/run/systemd/netif/io.systemd.Network"
	check := func() (time.Duration, int64, string) {
		t.Helper()
		cmd := sb.Cmd(context.Background(), bin, "check", "-o", "json")
		start := time.Now()
		out, _ := cmd.Output()
		took := time.Since(start)
		ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		var rss int64
		if ru != nil {
			rss = ru.Maxrss // KiB; nsenter's child's, the largest of the waited-for tree
		}
		return took, rss, string(out)
	}
	baseTook, baseRSS, _ := check()
	t.Logf("without a server: check took %v, peak RSS %d KiB", baseTook.Round(time.Millisecond), baseRSS)
	serve := func(t *testing.T, mode string) {
		sb.Run(t, "rm -f "+sock+" "+sock+".ready")
		_, pid := sb.StartPID(t, "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "/var/tmp/hostile.py", mode, sock)
		t.Cleanup(func() { sb.Run(t, fmt.Sprintf("kill %d; pkill -U 65534 -f hostile.py; true", pid)) })
		nstest.WaitFor(t, 10*time.Second, "the hostile server", func() bool {
			_, err := os.Stat(sb.Path(sock + ".ready"))
			return err == nil
		})
	}
	for _, mode := range []string{"huge", "deep", "slow", "options"} {
		t.Run(mode, func(t *testing.T) {
			serve(t, mode)
			took, rss, out := check()
			t.Logf("%s: check took %v, peak RSS %d KiB", mode, took.Round(time.Millisecond), rss)
			if took > baseTook+5*time.Second+2*time.Second {
				t.Errorf("%s: check took %v, %v without the server: more than the varlink timeout (5 s) longer", mode, took, baseTook)
			}
			if rss > baseRSS+64<<10 {
				t.Errorf("%s: peak RSS %d KiB, %d KiB without the server: more than 64 MiB more", mode, rss, baseRSS)
			}
			if !strings.Contains(out, `"checks"`) {
				t.Errorf("%s: no report:\n%s", mode, out)
			}
		})
	}
	t.Run("a directory anyone can write", func(t *testing.T) {
		sb.Run(t, "chown 0:0 /run/systemd/netif && chmod 0777 /run/systemd/netif")
		serve(t, "slow")
		took, _, out := check()
		t.Logf("check took %v", took.Round(time.Millisecond))
		if took > baseTook+2*time.Second {
			t.Errorf("check took %v, %v without the server: it waited on a socket anyone could have bound", took, baseTook)
		}
		if !strings.Contains(out, "/run/systemd/netif") {
			t.Errorf("check does not name the socket it refused")
		}
	})
}

// delegateNode is a --root node with systemd 262 (its shared library names the version), resolved
// in use (/etc/resolv.conf its stub) with a loop-free global DNS, the cluster DNS in nodedns's
// config, and /run/systemd/dns-delegate.d made nobody's.
func delegateNode(t *testing.T) (root, cfg string) {
	t.Helper()
	root = t.TempDir()
	putFile(t, root, "/usr/lib/x86_64-linux-gnu/systemd/libsystemd-shared-262.so", "")
	putFile(t, root, "/run/systemd/resolve/resolv.conf", "nameserver 192.168.1.1\n")
	putFile(t, root, "/run/systemd/resolve/stub-resolv.conf", "nameserver 127.0.0.53\noptions edns0 trust-ad\n")
	must(t, os.MkdirAll(filepath.Join(root, "etc/systemd/dns-delegate.d"), 0o755))
	must(t, os.Symlink("/run/systemd/resolve/stub-resolv.conf", filepath.Join(root, "etc/resolv.conf")))
	must(t, os.MkdirAll(filepath.Join(root, "run/systemd/dns-delegate.d"), 0o755))
	cfg = filepath.Join(t.TempDir(), "config.yaml")
	must(t, os.WriteFile(cfg, []byte("clusterDNS: [10.233.0.3]\n"), 0o644))
	openForNobody(t, root)
	return root, cfg
}

// TestAttackDelegates (docs/contract.md "systemd-resolved 258 and later: DNS delegates"): a delegate
// file another user could have written is never copied or edited by nodedns, whatever it says:
// nobody plants, in /run/systemd/dns-delegate.d made theirs, a delegate listing the cache (a loop
// address) beside an address and a domain of theirs (203.0.113.66, ~attacker.example); a drop-in of
// their own under a delegate's drop-in directory; and owns a delegate file in root's /etc. No file
// nodedns writes names the attacker's address or domain, the attacker's file is left as it is, and
// apply blocks the file, naming it.
//
// Measured before: apply exit 0 each time, having written /etc/systemd/dns-delegate.d/evil.dns-delegate
// (and .../corp.dns-delegate.d/10-x.conf) with "DNS=203.0.113.66" and "Domains=~attacker.example":
// the attacker's server and domain, from a volatile /run file, made a file of root's in /etc that
// outlives a reboot; and nobody's file in /etc edited in place (kept nobody's), its original backed
// up.
func TestAttackDelegates(t *testing.T) {
	nstest.Require(t)
	const hostile = "[Delegate]\nDNS=169.254.25.10 203.0.113.66\nDomains=~attacker.example\nDefaultRoute=yes\n"
	for _, tc := range []struct {
		name, setup, attack, file string
	}{
		{"/run/systemd/dns-delegate.d is nobody's", "chown 65534:65534 run/systemd/dns-delegate.d",
			"printf '" + strings.ReplaceAll(hostile, "\n", `\n`) + "' > run/systemd/dns-delegate.d/evil.dns-delegate", "/run/systemd/dns-delegate.d/evil.dns-delegate"},
		{"a drop-in directory of nobody's", "printf '[Delegate]\\nDNS=192.168.1.1\\nDomains=~corp.example\\n' > run/systemd/dns-delegate.d/corp.dns-delegate && mkdir run/systemd/dns-delegate.d/corp.dns-delegate.d && chown 65534:65534 run/systemd/dns-delegate.d/corp.dns-delegate.d",
			"printf '" + strings.ReplaceAll(hostile, "\n", `\n`) + "' > run/systemd/dns-delegate.d/corp.dns-delegate.d/10-x.conf", "/run/systemd/dns-delegate.d/corp.dns-delegate.d/10-x.conf"},
		{"a delegate of nobody's in /etc", "touch etc/systemd/dns-delegate.d/evil.dns-delegate && chown 65534:65534 etc/systemd/dns-delegate.d/evil.dns-delegate",
			"printf '" + strings.ReplaceAll(hostile, "\n", `\n`) + "' > etc/systemd/dns-delegate.d/evil.dns-delegate", "/etc/systemd/dns-delegate.d/evil.dns-delegate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, cfg := delegateNode(t)
			setup := exec.Command("sh", "-ec", tc.setup)
			setup.Dir = root
			if out, err := setup.CombinedOutput(); err != nil {
				t.Fatalf("setup: %v\n%s", err, out)
			}
			asNobody(t, root, tc.attack)
			r := nodedns(t, "--config", cfg, "--root", root, "apply")
			t.Logf("apply: exit %d\n%s", r.code, r.stdout)
			err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
				if err != nil || d.IsDir() || strings.HasPrefix(p, filepath.Join(root, "run")) || p == filepath.Join(root, tc.file) {
					return err // the attacker's own file, checked below
				}
				data, _ := os.ReadFile(p)
				if strings.Contains(string(data), "203.0.113.66") || strings.Contains(string(data), "attacker.example") {
					rel, _ := filepath.Rel(root, p)
					t.Errorf("nodedns wrote the attacker's address or domain into /%s:\n%s", rel, data)
				}
				return nil
			})
			must(t, err)
			if data, err := os.ReadFile(filepath.Join(root, tc.file)); err != nil || string(data) != hostile {
				t.Errorf("the attacker's file was changed (%v):\n%s", err, data)
			}
			if r.code == 0 || !strings.Contains(r.stdout, "blocked "+tc.file) {
				t.Errorf("apply does not block %s (exit %d)", tc.file, r.code)
			}
		})
	}
}
