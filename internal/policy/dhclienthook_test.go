package policy

import (
	"bytes"
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/leases"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/testutil/golden"
)

// hostileDomains are DHCP domain values a rogue server can make dhclient write to its lease (dhclient
// 4.4.3 logs "suspect value" and writes them all the same): command substitutions, a syntax error
// that would stop a shell half-way, quotes, globs, newlines.
var hostileDomains = []string{
	"x.example$(echo>pwned-dollar)`echo>pwned-tick`",
	"x.example$(echo >pwned-space)",
	`x.example'$(echo>pwned-quote)'"$(echo>pwned-dq)"`,
	"x.example\n$(echo>pwned-nl)\necho>pwned-line",
	"* ? [a] ../* /*",
	`\$(echo>pwned-bs) \" \\`,
	"$IFS${IFS}x;echo>pwned-semi;",
	"a.example. b.example\tc.example",
	"'; echo>pwned-sq; '",
}

// hookSandbox sources hook with the given shell, as dhclient-script does, with vars as its
// environment (never as script text), then calls make_resolv_conf on rc. It runs in an empty
// directory with an empty PATH: any command the values smuggle in either fails ("not found" on
// stderr) or, being a builtin, creates a file there. It fails the test on either, on a non-zero
// exit, and when the hook did not run to its end; it returns the variables the hook left.
func hookSandbox(t *testing.T, shell, hook, rc string, vars map[string]string) string {
	t.Helper()
	cwd := t.TempDir()
	empty := t.TempDir()
	env := []string{"PATH=" + empty, "nodedns_resolv_conf=" + rc, "interface=eth0"}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	script := `make_resolv_conf() { echo "the stock make_resolv_conf ran" >&2; exit 3; }
. "$1"
make_resolv_conf
printf 'servers=%s|search=%s|name=%s|done' "$new_domain_name_servers" "$new_domain_search" "$new_domain_name"
`
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, shell, "-c", script, "hook-test", hook)
	cmd.Dir = cwd
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstderr: %s\nvars: %q", shell, err, stderr.String(), vars)
	}
	if stderr.Len() > 0 {
		t.Errorf("%s printed on stderr (a command ran?): %s\nvars: %q", shell, stderr.String(), vars)
	}
	if !strings.HasSuffix(stdout.String(), "|done") {
		t.Errorf("%s did not run to the end: %q", shell, stdout.String())
	}
	for _, dir := range []string{cwd, empty} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			t.Errorf("%s created %s in %s\nvars: %q", shell, e.Name(), dir, vars)
		}
	}
	entries, _ := os.ReadDir(filepath.Dir(rc))
	for _, e := range entries {
		if e.Name() != filepath.Base(rc) && e.Name() != "nodedns" {
			t.Errorf("%s created %s next to resolv.conf\nvars: %q", shell, e.Name(), vars)
		}
	}
	return stdout.String()
}

func shells(t *testing.T) []string {
	var out []string
	for _, sh := range []string{"dash", "bash"} {
		if p, err := exec.LookPath(sh); err == nil {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		t.Skip("neither dash nor bash on this machine")
	}
	return out
}

// TestDhclientHookHostileValues: every hostile domain value, in every variable dhclient-script hands
// the hook, is data: nothing runs, no file appears, and the hook still edits resolv.conf (the offered
// domain is not searched, the loop address is dropped, the host's own search domain stays).
func TestDhclientHookHostileValues(t *testing.T) {
	f := Facts{CacheAddrs: []netip.Addr{KubesprayCache}, ClusterDNS: []netip.Addr{clusterIP}, ClusterDomain: "cluster.local",
		Upstreams: []netip.Addr{netip.MustParseAddr("10.0.0.2")}}
	for _, sh := range shells(t) {
		for _, d := range hostileDomains {
			dir := t.TempDir()
			hook := filepath.Join(dir, "nodedns")
			if err := os.WriteFile(hook, DhclientHook(f), 0o644); err != nil {
				t.Fatal(err)
			}
			rc := filepath.Join(dir, "resolv.conf")
			if err := os.WriteFile(rc, []byte("search corp.example svc.cluster.local\nnameserver 169.254.25.10\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			got := hookSandbox(t, sh, hook, rc, map[string]string{
				"new_domain_name_servers": "169.254.25.10 192.168.1.1 " + d,
				"new_domain_search":       d,
				"new_domain_name":         d,
				"old_domain_search":       d,
				"new_dhcp6_domain_search": d,
			})
			if want := "servers=192.168.1.1|search=|name=|done"; got != want {
				t.Errorf("%s, %q: variables %q, want %q", sh, d, got, want)
			}
			data, _ := os.ReadFile(rc)
			if want := "search corp.example\nnameserver 192.168.1.1\n"; string(data) != want {
				t.Errorf("%s, %q: resolv.conf %q, want %q", sh, d, data, want)
			}
		}
	}
}

// FuzzDhclientHook fuzzes both sides of the hook: what nodedns embeds (the cluster domain, the
// addresses with their zones) and what dhclient-script hands it. The rendered hook must parse
// (`sh -n`), and sourced in the sandbox with the fuzzed variables it must run nothing, create no
// file and run to its end, in dash and in bash.
func FuzzDhclientHook(f *testing.F) {
	for _, d := range hostileDomains {
		f.Add(d, "cluster.local", "", false, d, "169.254.25.10 "+d, "search "+d+"\nnameserver 1.1.1.1\n")
		f.Add("cluster.local'"+d, d, d, true, "example.org.", "10.0.0.9", "")
	}
	f.Fuzz(func(t *testing.T, cluster, zone, upZone string, route bool, domain, servers, resolv string) {
		for _, s := range []*string{&cluster, &zone, &upZone, &domain, &servers} {
			*s = strings.ReplaceAll(*s, "\x00", "") // no environment variable holds a NUL
		}
		facts := Facts{CacheAddrs: []netip.Addr{KubesprayCache.WithZone("")}, ClusterDomain: cluster, RouteClusterDomainToCache: route,
			Upstreams: []netip.Addr{netip.MustParseAddr("fe80::1").WithZone(upZone), netip.MustParseAddr("10.0.0.2")}}
		if zone != "" {
			facts.ClusterDNS = []netip.Addr{netip.MustParseAddr("fe80::53").WithZone(zone)}
		}
		src := DhclientHook(facts)
		dir := t.TempDir()
		hook := filepath.Join(dir, "nodedns")
		if err := os.WriteFile(hook, src, 0o644); err != nil {
			t.Fatal(err)
		}
		rc := filepath.Join(dir, "resolv.conf")
		if err := os.WriteFile(rc, []byte(resolv), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, sh := range shells(t) {
			if out, err := exec.Command(sh, "-n", hook).CombinedOutput(); err != nil {
				t.Fatalf("%s -n: %v\n%s\n%s", sh, err, out, src)
			}
			hookSandbox(t, sh, hook, rc, map[string]string{
				"new_domain_name_servers": servers,
				"new_dhcp6_name_servers":  servers,
				"new_domain_search":       domain,
				"new_domain_name":         domain,
				"old_domain_name":         domain,
				"new_dhcp6_domain_search": domain,
			})
		}
	})
}

// TestDhclientHookGolden pins the rendered hook's bytes for a kubespray node (the cache, CoreDNS's
// service, upstreams, the cluster domain); go test -update rewrites it after a deliberate change to
// dhclienthook.sh. Values that need quoting or checking (zones, a cluster domain that is no domain
// name) are written as the lines below say.
func TestDhclientHookGolden(t *testing.T) {
	kubespray := Facts{CacheAddrs: []netip.Addr{KubesprayCache, netip.MustParseAddr("fd00:25::10")}, ClusterDNS: []netip.Addr{clusterIP},
		ClusterDomain: "cluster.local", Upstreams: []netip.Addr{netip.MustParseAddr("10.66.0.53"), netip.MustParseAddr("2001:db8::53")}}
	golden.Check(t, filepath.Join("testdata", "dhclienthook.golden"), DhclientHook(kubespray))

	odd := Facts{CacheAddrs: []netip.Addr{netip.MustParseAddr("fe80::10").WithZone("x'$(echo>p)")}, ClusterDomain: "it's.$(bad)",
		RouteClusterDomainToCache: true, Upstreams: []netip.Addr{netip.MustParseAddr("fe80::1").WithZone("eth0'")}}
	got := DhclientHook(odd)
	for _, line := range []string{"nodedns_loop=' fe80::10 169.254.25.10 169.254.20.10 '\n", "nodedns_upstreams='fe80::1'\n",
		"nodedns_cluster=''\n", "nodedns_keep_cluster='1'\n"} {
		if !bytes.Contains(got, []byte(line)) {
			t.Errorf("the hook lacks %q", line)
		}
	}
	if q := shellQuote("a'b"); q != `'a'\''b'` {
		t.Errorf("shellQuote(a'b) = %s", q)
	}
}

// TestHostileDHCPOffer: a lease's domain value that is no domain name is a hostile offer, kept whole
// with its lease; it is not listed as a DHCP search domain, yet its words still leave the search
// list apply writes, and the hook's bytes are the same as with no lease at all.
func TestHostileDHCPOffer(t *testing.T) {
	const lease = "/var/lib/dhcp/dhclient.eth0.leases"
	hostile := "x.example$(echo>pwned) corp.example"
	s := &node.Snapshot{Now: now, DhclientConf: true,
		Leases:     []leases.Lease{{Path: lease, Client: leases.Dhclient, Interface: "eth0", DomainName: hostile, SearchDomains: []string{"ok.example."}, DNS: []netip.Addr{netip.MustParseAddr("10.0.0.2")}}},
		ResolvConf: resolvFile(t, node.EtcResolvConf, "nameserver 10.0.0.2\nsearch x.example$(echo>pwned) corp.example ok.example host.example\n")}
	p := Compute(s, config.Default())
	f := p.Facts
	if len(f.HostileDHCP) != 1 || f.HostileDHCP[0].Value != hostile || f.HostileDHCP[0].Source != lease {
		t.Errorf("HostileDHCP = %+v, want %q from %s", f.HostileDHCP, hostile, lease)
	}
	if got := f.SortedDHCPDomains(); len(got) != 1 || got[0] != "ok.example" {
		t.Errorf("DHCP domains %v, want only ok.example", got)
	}
	for _, d := range []string{"x.example$(echo>pwned)", "CORP.example.", "ok.example"} {
		if !f.IsDHCPDomain(d) {
			t.Errorf("IsDHCPDomain(%q) = false", d)
		}
	}
	var rc string
	for _, c := range p.Changes {
		if c.Path == node.EtcResolvConf {
			rc = string(c.After)
		}
	}
	if !strings.Contains(rc, "search host.example\n") || strings.Contains(rc, "pwned") {
		t.Errorf("/etc/resolv.conf after apply:\n%s", rc)
	}
	clean := *s
	clean.Leases = []leases.Lease{{Path: lease, Client: leases.Dhclient, Interface: "eth0", DNS: []netip.Addr{netip.MustParseAddr("10.0.0.2")}}}
	if !bytes.Equal(DhclientHook(f), DhclientHook(Compute(&clean, config.Default()).Facts)) {
		t.Error("the hook's bytes depend on the lease's domains")
	}
}
