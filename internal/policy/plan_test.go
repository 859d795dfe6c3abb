package policy

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/leases"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/resolvconf"
	"github.com/nodedns/nodedns/systemd"
)

var (
	awsResolver = netip.MustParseAddr("169.254.169.253")
	clusterIP   = netip.MustParseAddr("10.233.0.3")
	now         = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
)

// addrPool mixes loop addresses, loopback, real upstreams, AWS's link-local resolver and IPv6 with a
// zone: everything a node's sources may list.
var addrPool = []string{
	"169.254.25.10", "169.254.20.10", "10.233.0.3", "127.0.0.53", "127.0.0.1", "::1",
	"192.168.1.1", "10.0.0.2", "169.254.169.253", "fe80::1%eth0", "2001:db8::53", "8.8.8.8",
}

var domainPool = []string{"example.org", "corp.example", "cluster.local", "svc.cluster.local", "default.svc.cluster.local.", "lan", "ec2.internal"}

func pick[T any](r *rand.Rand, pool []T, max int) []T {
	n := r.IntN(max + 1)
	out := make([]T, 0, n)
	for range n {
		out = append(out, pool[r.IntN(len(pool))])
	}
	return out
}

func mustParse(t testing.TB, data string) *resolvconf.File {
	t.Helper()
	f, err := resolvconf.Parse([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func resolvFile(t testing.TB, path, data string) node.ResolvFile {
	return node.ResolvFile{Path: path, Target: path, Exists: true, Mode: 0o644, Data: []byte(data), File: mustParse(t, data)}
}

func resolvText(ns, search []string) string {
	var b strings.Builder
	for _, n := range ns {
		fmt.Fprintf(&b, "nameserver %s\n", n)
	}
	if len(search) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(search, " "))
	}
	return b.String()
}

// randomSnapshot builds a node from random sources: a regular or resolved-owned /etc/resolv.conf,
// resolved global and per-link servers, leases (some expired) and config upstreams.
func randomSnapshot(t testing.TB, r *rand.Rand) (*node.Snapshot, config.Config) {
	cfg := config.Default()
	cfg.ClusterDNS = []netip.Addr{clusterIP}
	for _, a := range pick(r, addrPool, 2) {
		if r.IntN(3) == 0 {
			cfg.Upstreams = append(cfg.Upstreams, netip.MustParseAddr(a))
		}
	}
	s := &node.Snapshot{Now: now}
	if r.IntN(2) == 0 {
		s.ResolvConf = resolvFile(t, node.EtcResolvConf, resolvText(pick(r, addrPool, 5), pick(r, domainPool, 3)))
	} else {
		s.ResolvConf = resolvFile(t, node.EtcResolvConf, "nameserver 127.0.0.53\noptions edns0 trust-ad\nsearch "+strings.Join(append(pick(r, domainPool, 2), "x.example"), " ")+"\n")
		s.ResolvConf.Symlink, s.ResolvConf.Target = true, node.ResolvedStubConf
		s.ResolvedStub = s.ResolvConf
		s.ResolvedResolv = resolvFile(t, node.ResolvedResolvConf, resolvText(pick(r, addrPool, 3), nil))
	}
	rc := &systemd.ResolvedConfig{}
	for _, a := range pick(r, addrPool, 3) {
		rc.DNS = append(rc.DNS, systemd.Server{Addr: netip.MustParseAddr(a), Raw: a})
	}
	s.Resolved, s.ResolvedOthers, s.ResolvedPersistent = rc, rc, rc
	for i := range r.IntN(3) {
		ls := systemd.LinkState{IfIndex: i + 2, IfName: fmt.Sprintf("eth%d", i), NetworkdManaged: r.IntN(2) == 0}
		for _, a := range pick(r, addrPool, 2) {
			ls.DNS = append(ls.DNS, netip.MustParseAddr(a))
		}
		for _, d := range pick(r, domainPool, 2) {
			ls.Domains = append(ls.Domains, systemd.Domain{Name: d})
		}
		s.Links = append(s.Links, ls)
	}
	for i := range r.IntN(3) {
		l := leases.Lease{Path: fmt.Sprintf("/var/lib/dhcp/dhclient.eth%d.leases", i), Client: leases.Dhclient, Interface: fmt.Sprintf("eth%d", i), SearchDomains: pick(r, domainPool, 2)}
		for _, a := range pick(r, addrPool, 2) {
			l.DNS = append(l.DNS, netip.MustParseAddr(a))
		}
		if r.IntN(3) == 0 {
			l.Expire = now.Add(-time.Hour)
		}
		s.Leases = append(s.Leases, l)
	}
	s.DhclientConf = r.IntN(2) == 0
	return s, cfg
}

// TestPlanInvariants is the property test of docs/contract.md's invariants 1 and 2 over generated nodes:
// every resolv.conf the plan writes has 1 to 3 nameservers and none is a loop address; the resolved
// drop-in never lists a loop address and never leaves resolved without a server; with no upstream the
// kubelet file is blocked, not written.
func TestPlanInvariants(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	root := t.TempDir()
	var writes, blocked, awsKept int
	for i := range 3000 {
		s, cfg := randomSnapshot(t, r)
		p := Compute(s, cfg)
		f := p.Facts
		for _, c := range p.Changes {
			if c.Op != OpWrite {
				continue
			}
			writes++
			switch c.Path {
			case cfg.Kubelet.ResolvConf, node.EtcResolvConf:
				rf := mustParse(t, string(c.After))
				ns := rf.Nameservers()
				if len(ns) < 1 || len(ns) > 3 {
					t.Fatalf("case %d: %s has %d nameservers:\n%s", i, c.Path, len(ns), c.After)
				}
				for _, a := range ns {
					// The host's own libc may use its loopback stub; kubelet's file may not.
					if f.IsLoop(a, c.Path == cfg.Kubelet.ResolvConf) {
						t.Fatalf("case %d: %s lists loop address %s:\n%s", i, c.Path, a, c.After)
					}
					if a == awsResolver {
						awsKept++
					}
				}
				for _, d := range rf.Search() {
					if f.IsDHCPDomain(d) {
						t.Fatalf("case %d: %s searches DHCP domain %s:\n%s", i, c.Path, d, c.After)
					}
				}
			case node.ResolvedDropIn:
				// Read back as node reads it: resolved's configuration under a root.
				dropIn := filepath.Join(root, filepath.FromSlash(c.Path))
				if err := os.MkdirAll(filepath.Dir(dropIn), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(dropIn, c.After, 0o644); err != nil {
					t.Fatal(err)
				}
				dc := systemd.LoadResolvedConfig(nodefs.NewReader(root))
				if len(dc.Warnings) > 0 || dc.Halted != nil || !slices.Contains(dc.Files, c.Path) {
					t.Fatalf("case %d: drop-in read back with %v (halted %v), files %v:\n%s", i, dc.Warnings, dc.Halted, dc.Files, c.After)
				}
				for _, sv := range dc.DNS {
					if f.IsLoop(sv.Addr, false) {
						t.Fatalf("case %d: drop-in lists loop address %s:\n%s", i, sv.Addr, c.After)
					}
				}
				if len(dc.DNS) == 0 && !slices.ContainsFunc(s.Links, func(l systemd.LinkState) bool {
					return slices.ContainsFunc(l.DNS, func(a netip.Addr) bool { return !f.IsLoop(a, false) && !systemd.IsStub(a) })
				}) {
					t.Fatalf("case %d: drop-in leaves resolved with no server:\n%s", i, c.After)
				}
			}
		}
		if len(f.Upstreams) == 0 {
			if !slices.ContainsFunc(p.Blocked, func(b Blocked) bool { return b.Target == cfg.Kubelet.ResolvConf }) {
				t.Fatalf("case %d: no upstream but the kubelet file is not blocked", i)
			}
			blocked++
		}
		if len(f.Upstreams) > 3 {
			t.Fatalf("case %d: %d upstreams", i, len(f.Upstreams))
		}
	}
	// The generator must reach every branch it exists for.
	if writes < 1000 || blocked < 10 || awsKept < 10 {
		t.Errorf("generator too narrow: %d writes, %d blocked, %d files kept 169.254.169.253", writes, blocked, awsKept)
	}
}

func TestIsLoop(t *testing.T) {
	f := Facts{CacheAddrs: []netip.Addr{netip.MustParseAddr("169.254.30.10")}, ClusterDNS: []netip.Addr{clusterIP}}
	tests := []struct {
		addr         string
		withLoopback bool
		want         bool
	}{
		{"169.254.25.10", false, true},
		{"169.254.20.10", false, true},
		{"169.254.30.10", false, true},
		{"10.233.0.3", false, true},
		{"127.0.0.53", false, false},
		{"127.0.0.53", true, true},
		{"::1", true, true},
		{"169.254.169.253", true, false}, // AWS's resolver is a real upstream
		{"169.254.25.11", true, false},
		{"fe80::1%eth0", true, false},
		{"::ffff:169.254.25.10", false, true},
	}
	for _, tc := range tests {
		if got := f.IsLoop(netip.MustParseAddr(tc.addr), tc.withLoopback); got != tc.want {
			t.Errorf("IsLoop(%s, %v) = %v, want %v", tc.addr, tc.withLoopback, got, tc.want)
		}
	}
}

func TestUpstreamsFirstSourceWins(t *testing.T) {
	lease := func(dns string, expire time.Time) leases.Lease {
		return leases.Lease{Path: "/var/lib/dhcp/dhclient.eth0.leases", Interface: "eth0", DNS: []netip.Addr{netip.MustParseAddr(dns)}, Expire: expire}
	}
	tests := []struct {
		name       string
		upstreams  []string
		leases     []leases.Lease
		resolv     string
		want       []string
		wantSource string
	}{
		{"config first", []string{"10.0.0.9"}, []leases.Lease{lease("192.168.1.1", time.Time{})}, "nameserver 8.8.8.8\n", []string{"10.0.0.9"}, "config upstreams"},
		{"current lease, not the resolv.conf", nil, []leases.Lease{lease("192.168.1.1", time.Time{})}, "nameserver 8.8.8.8\n", []string{"192.168.1.1"}, "DHCP leases"},
		{"an expired lease is not a source", nil, []leases.Lease{lease("192.168.1.1", now.Add(-time.Minute))}, "nameserver 8.8.8.8\n", []string{"8.8.8.8"}, "/etc/resolv.conf"},
		{"loop addresses never count", []string{"169.254.25.10"}, nil, "nameserver 169.254.25.10\nnameserver 127.0.0.53\nnameserver 169.254.169.253\n", []string{"169.254.169.253"}, "/etc/resolv.conf"},
		{"at most three, deduplicated", nil, nil, "nameserver 1.1.1.1\nnameserver 1.1.1.1\nnameserver 2.2.2.2\nnameserver 3.3.3.3\nnameserver 4.4.4.4\n", []string{"1.1.1.1", "2.2.2.2", "3.3.3.3"}, "/etc/resolv.conf"},
		{"none", nil, nil, "nameserver 169.254.25.10\n", nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			for _, u := range tc.upstreams {
				cfg.Upstreams = append(cfg.Upstreams, netip.MustParseAddr(u))
			}
			s := &node.Snapshot{Now: now, Leases: tc.leases, ResolvConf: resolvFile(t, node.EtcResolvConf, tc.resolv)}
			f := Derive(s, cfg)
			var got []string
			for _, a := range f.Upstreams {
				got = append(got, a.String())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" || f.UpstreamSource != tc.wantSource {
				t.Errorf("upstreams (-want +got):\n%s source %q, want %q", diff, f.UpstreamSource, tc.wantSource)
			}
		})
	}
}

func TestEtcResolvConfEdit(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		leases  []leases.Lease
		want    string // "" means no change
		blocked bool
	}{
		{
			name: "loop and DHCP domain out, rest kept",
			in:   "# from dhclient\nsearch example.org corp.example\nnameserver 169.254.25.10\nnameserver 10.0.0.2\noptions ndots:2 trust-ad\n",
			leases: []leases.Lease{{Path: "/var/lib/dhcp/x.leases", Interface: "eth0", DomainName: "example.org",
				DNS: []netip.Addr{netip.MustParseAddr("10.0.0.2")}}},
			want: "# " + EditedHeader + "\n# from dhclient\nsearch corp.example\nnameserver 10.0.0.2\noptions ndots:2 trust-ad\n",
		},
		{name: "clean file untouched", in: "nameserver 10.0.0.2\nsearch corp.example\n"},
		{name: "loopback stub is fine for the host", in: "nameserver 127.0.0.53\n"},
		{
			name: "only a loop address and no upstream: blocked, untouched",
			in:   "nameserver 169.254.25.10\n", blocked: true,
		},
		{
			name: "an older nodedns's header is replaced, not doubled",
			in:   "# Edited by nodedns: loop addresses and DHCP search domains removed (nodedns restore undoes it).\nnameserver 169.254.25.10\nnameserver 10.0.0.2\n",
			want: "# " + EditedHeader + "\nnameserver 10.0.0.2\n",
		},
		{
			name: "past the third nameserver goes when edited",
			in:   "nameserver 169.254.25.10\nnameserver 1.1.1.1\nnameserver 2.2.2.2\nnameserver 3.3.3.3\nnameserver 4.4.4.4\n",
			want: "# " + EditedHeader + "\nnameserver 1.1.1.1\nnameserver 2.2.2.2\nnameserver 3.3.3.3\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &node.Snapshot{Now: now, Leases: tc.leases, ResolvConf: resolvFile(t, node.EtcResolvConf, tc.in)}
			p := Compute(s, config.Default())
			var got string
			for _, c := range p.Changes {
				if c.Path == node.EtcResolvConf {
					got = string(c.After)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("/etc/resolv.conf (-want +got):\n%s", diff)
			}
			isBlocked := slices.ContainsFunc(p.Blocked, func(b Blocked) bool { return b.Target == node.EtcResolvConf })
			if isBlocked != tc.blocked {
				t.Errorf("blocked = %v, want %v (%v)", isBlocked, tc.blocked, p.Blocked)
			}
		})
	}
}

func TestKubeletResolvConf(t *testing.T) {
	f := Facts{Upstreams: []netip.Addr{netip.MustParseAddr("10.0.0.2")}, UpstreamSource: "DHCP leases",
		ClusterDomain: "cluster.local", DHCPDomains: map[string][]string{"example.org": {"x"}}}
	got := string(KubeletResolvConf(f, []string{"default.svc.cluster.local", "svc.cluster.local", "Example.ORG.", "corp.example.", "corp.example"}, []string{"edns0", "trust-ad", "ndots:2"}))
	want := "# " + KubeletHeader + "\n# Upstreams from DHCP leases.\nnameserver 10.0.0.2\nsearch corp.example\noptions edns0 ndots:2\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestResolvedDropIn(t *testing.T) {
	srv := func(a string) systemd.Server { return systemd.Server{Addr: netip.MustParseAddr(a), Raw: a} }
	tests := []struct {
		name      string
		global    []systemd.Server
		linkDNS   []netip.Addr
		upstreams []netip.Addr
		want      string // the DNS= lines of the drop-in; "" no drop-in
		blocked   bool
	}{
		{name: "kubespray DNS=169.254.25.10, link has a server: reset only", global: []systemd.Server{srv("169.254.25.10")}, linkDNS: []netip.Addr{netip.MustParseAddr("192.168.1.1")}, want: "DNS=\n"},
		{name: "keep the real global servers", global: []systemd.Server{srv("169.254.25.10"), srv("10.0.0.2")}, want: "DNS=\nDNS=10.0.0.2\n"},
		{name: "nothing left anywhere: upstreams", global: []systemd.Server{srv("169.254.25.10")}, upstreams: []netip.Addr{netip.MustParseAddr("9.9.9.9")}, want: "DNS=\nDNS=9.9.9.9\n"},
		{name: "nothing left, no upstream: blocked", global: []systemd.Server{srv("169.254.25.10")}, blocked: true},
		{name: "no loop: no drop-in", global: []systemd.Server{srv("10.0.0.2")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rc := &systemd.ResolvedConfig{DNS: tc.global}
			cfg := config.Default()
			cfg.Upstreams = tc.upstreams
			s := &node.Snapshot{Now: now, Resolved: rc, ResolvedOthers: rc, ResolvedPersistent: rc,
				ResolvedResolv: resolvFile(t, node.ResolvedResolvConf, "nameserver 169.254.25.10\n"),
				Links:          []systemd.LinkState{{IfIndex: 2, IfName: "eth0", DNS: tc.linkDNS}}}
			p := Compute(s, cfg)
			var got string
			for _, c := range p.Changes {
				if c.Path == node.ResolvedDropIn {
					_, body, _ := strings.Cut(string(c.After), "[Resolve]\n")
					got = body
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("drop-in DNS lines (-want +got):\n%s", diff)
			}
			isBlocked := slices.ContainsFunc(p.Blocked, func(b Blocked) bool { return b.Target == node.ResolvedDropIn })
			if isBlocked != tc.blocked {
				t.Errorf("blocked = %v, want %v", isBlocked, tc.blocked)
			}
			if tc.want != "" && !slices.ContainsFunc(p.Actions, func(a Action) bool { return a.Kind() == "restart-resolved" }) {
				t.Errorf("drop-in written without a resolved restart: %+v", p.Actions)
			}
		})
	}
}

// TestDhclientHook sources the rendered hook in a real POSIX shell, as dhclient-script does, then
// runs its make_resolv_conf on a resolv.conf, and checks the variables and the file it leaves.
func TestDhclientHook(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh on this machine")
	}
	f := Facts{CacheAddrs: []netip.Addr{KubesprayCache}, ClusterDNS: []netip.Addr{clusterIP}, ClusterDomain: "cluster.local",
		DHCPDomains: map[string][]string{"example.org": {"lease"}}}
	withUp := f
	withUp.Upstreams = []netip.Addr{netip.MustParseAddr("10.0.0.2")}
	route := f
	route.RouteClusterDomainToCache = true
	// What apply leaves on a kubespray host_resolvconf node: the renewal must not change a byte.
	applied := "# Edited by nodedns: loop addresses and DHCP search domains removed (nodedns restore undoes it).\n" +
		"# Ansible entries BEGIN\nnameserver 10.66.0.53\noptions ndots:2 timeout:2 attempts:2\n# Ansible entries END\n"
	tests := []struct {
		name     string
		facts    Facts
		env      string
		file     string // "" : no resolv.conf
		wantVars string
		wantFile string
	}{
		{"after apply, kubespray's supersede: not a byte changes", f,
			`new_domain_name_servers="169.254.25.10 10.66.0.53"; new_domain_search="default.svc.cluster.local. svc.cluster.local."; new_domain_name="cluster.local"`,
			applied, "servers=10.66.0.53 search= name=", applied},
		{"loop servers, DHCP and cluster domains dropped; the rest kept in place", f,
			`new_domain_name_servers="169.254.25.10 192.168.1.1 10.233.0.3"; new_domain_search="example.org."; new_domain_name="example.org"`,
			"domain cluster.local\nsearch cluster.local default.svc.cluster.local. svc.cluster.local. example.org. corp.example\n# a comment\nnameserver 169.254.25.10\nnameserver 192.168.1.9\noptions edns0\nsortlist 10.0.0.0/8\n",
			"servers=192.168.1.1 search= name=",
			"search corp.example\n# a comment\nnameserver 192.168.1.1\noptions edns0\nsortlist 10.0.0.0/8\n"},
		{"cluster domains kept with routeClusterDomainToCache", route,
			`new_domain_name_servers="10.66.0.53"; new_domain_search="default.svc.cluster.local. svc.cluster.local. example.org."`,
			"search default.svc.cluster.local svc.cluster.local example.org\nnameserver 10.66.0.53\n",
			"servers=10.66.0.53 search= name=",
			"search default.svc.cluster.local svc.cluster.local\nnameserver 10.66.0.53\n"},
		{"only loop servers: upstreams instead", withUp, `new_domain_name_servers="169.254.25.10"`,
			"nameserver 169.254.25.10\noptions ndots:2\n", "servers=10.0.0.2 search= name=", "nameserver 10.0.0.2\noptions ndots:2\n"},
		{"only loop servers, no upstream: keep the last good resolv.conf", f, `new_domain_name_servers="169.254.20.10"`,
			"nameserver 10.66.0.53\n", "servers= search= name=", "nameserver 10.66.0.53\n"},
		{"a domain this run does not carry stays: apply removes an older lease's", f,
			`new_domain_name_servers="10.66.0.53"; new_domain_name="corp.example"; old_domain_search="old.example."`,
			"search example.org corp.example old.example\nnameserver 10.66.0.53\n",
			"servers=10.66.0.53 search= name=",
			"search example.org\nnameserver 10.66.0.53\n"},
		{"no servers offered: unchanged", f, `new_domain_name_servers=""`,
			"nameserver 10.66.0.53\nsearch example.org\n", "servers= search= name=", "nameserver 10.66.0.53\nsearch example.org\n"},
		{"no resolv.conf yet", f, `new_domain_name_servers="10.66.0.53 169.254.25.10"`,
			"", "servers=10.66.0.53 search= name=", "nameserver 10.66.0.53\n"},
		{"glob characters and a last line without newline", f, `new_domain_name_servers="10.66.0.54"`,
			"# * ? [a]\nnameserver 10.66.0.53", "servers=10.66.0.54 search= name=", "# * ? [a]\nnameserver 10.66.0.54\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			hook := filepath.Join(dir, "nodedns")
			if err := os.WriteFile(hook, DhclientHook(tc.facts), 0o644); err != nil {
				t.Fatal(err)
			}
			rc := filepath.Join(dir, "resolv.conf")
			if tc.file != "" {
				if err := os.WriteFile(rc, []byte(tc.file), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			script := `make_resolv_conf() { echo "the stock make_resolv_conf ran" >&2; exit 3; }
interface=eth0
nodedns_resolv_conf=` + rc + `
` + tc.env + `
. ` + hook + `
make_resolv_conf
printf 'servers=%s search=%s name=%s' "$new_domain_name_servers" "$new_domain_search" "$new_domain_name"
`
			out, err := exec.Command(sh, "-c", script).CombinedOutput()
			if err != nil {
				t.Fatalf("sh: %v\n%s", err, out)
			}
			if got := string(out); got != tc.wantVars {
				t.Errorf("variables %q, want %q", out, tc.wantVars)
			}
			got, _ := os.ReadFile(rc)
			if string(got) != tc.wantFile {
				t.Errorf("resolv.conf:\n%s\nwant:\n%s", got, tc.wantFile)
			}
		})
	}
}
