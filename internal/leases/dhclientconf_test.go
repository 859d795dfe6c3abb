package leases

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodedns/nodedns/internal/nodefs"
)

func TestParseDhclientConf(t *testing.T) {
	const path = "/etc/dhcp/dhclient.conf"
	tests := []struct {
		name     string
		in       string
		want     []Rule
		includes []Include
	}{
		{
			name: "kubespray host_resolvconf block before Debian's defaults",
			in: "# Ansible entries BEGIN\n" +
				"supersede domain-name-servers 169.254.25.10,10.66.0.53;\n" +
				"supersede domain-name \"cluster.local\";\n" +
				"supersede domain-search \"default.svc.cluster.local\",\"svc.cluster.local\";\n" +
				"# Ansible entries END\n" +
				"option rfc3442-classless-static-routes code 121 = array of unsigned integer 8;\n" +
				"send host-name = gethostname();\n" +
				"request subnet-mask, broadcast-address, time-offset, routers,\n\tdomain-name, domain-name-servers, domain-search, host-name;\n",
			want: []Rule{
				{Path: path, Line: 2, Policy: Supersede, Option: OptDomainNameServers, Servers: addrs("169.254.25.10", "10.66.0.53")},
				{Path: path, Line: 3, Policy: Supersede, Option: OptDomainName, Domains: []string{"cluster.local"}},
				{Path: path, Line: 4, Policy: Supersede, Option: OptDomainSearch, Domains: []string{"default.svc.cluster.local", "svc.cluster.local"}},
			},
		},
		{
			name: "every policy, case-insensitive, spaces after commas",
			in: "PREPEND Domain-Name-Servers 169.254.25.10;\nappend domain-name-servers 10.0.0.1, 10.0.0.2;\n" +
				"default domain-search \"a.example\";\nsupersede ntp-servers 10.0.0.9;\nsupersede host-name \"x\";\n",
			want: []Rule{
				{Path: path, Line: 1, Policy: Prepend, Option: OptDomainNameServers, Servers: addrs("169.254.25.10")},
				{Path: path, Line: 2, Policy: Append, Option: OptDomainNameServers, Servers: addrs("10.0.0.1", "10.0.0.2")},
				{Path: path, Line: 3, Policy: Default, Option: OptDomainSearch, Domains: []string{"a.example"}},
			},
		},
		{
			name: "interface blocks, an expression, a lease block and an include",
			in: "interface \"eth0\" {\n  supersede domain-name-servers 10.1.1.1;\n}\n" +
				"supersede domain-name-servers = option domain-name-servers;\n" +
				"lease {\n  interface \"eth0\";\n  fixed-address 10.0.0.5;\n  option domain-name-servers 10.9.9.9;\n}\n" +
				"include \"/etc/dhcp/extra.conf\";\n" +
				"if exists domain-name-servers {\n  supersede domain-name-servers 10.2.2.2;\n}\n",
			want: []Rule{
				{Path: path, Line: 2, Policy: Supersede, Option: OptDomainNameServers, Interface: "eth0", Servers: addrs("10.1.1.1")},
				{Path: path, Line: 4, Policy: Supersede, Option: OptDomainNameServers, Expr: true},
			},
			includes: []Include{{Path: path, Line: 10, File: "/etc/dhcp/extra.conf"}},
		},
		{
			name: "comments and a statement over several lines",
			in:   "# supersede domain-name-servers 1.1.1.1;\nsupersede # the cache first\n  domain-name-servers\n  169.254.25.10;\n",
			want: []Rule{{Path: path, Line: 2, Policy: Supersede, Option: OptDomainNameServers, Servers: addrs("169.254.25.10")}},
		},
		{name: "empty file", in: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseDhclientConf([]byte(tc.in), path)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got.Rules, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.includes, got.Includes); diff != "" {
				t.Errorf("includes (-want +got):\n%s", diff)
			}
			if got.Path != path {
				t.Errorf("Path = %q", got.Path)
			}
		})
	}
}

func TestParseDhclientConfErrors(t *testing.T) {
	const path = "/etc/dhcp/dhclient.conf"
	tests := []struct{ in, want string }{
		{"supersede domain-name-servers dns.example;\n", path + ":1: supersede domain-name-servers: invalid address \"dns.example\""},
		{"\n\nprepend domain-name-servers 169.254.25.10,;\n", path + ":3: prepend domain-name-servers: malformed list (trailing comma)"},
		{"supersede domain-name-servers;\n", path + ":1: supersede domain-name-servers: missing value"},
		{"supersede domain-name \"a\", \"b\";\n", path + ":1: supersede domain-name: want one quoted string"},
		{"supersede domain-search \"a.example;\n", path + ":1: unterminated quoted string"},
		{"interface \"eth0\" {\n supersede domain-name-servers 10.0.0.1;\n", path + ":1: unexpected end of file: interface block not closed"},
		{"include /etc/x;\n", path + ":1: include: want include \"FILE\";"},
		{"supersede domain-name-servers 10.0.0.1\x00;\n", path + ":1: binary data (byte 0x00)"},
	}
	for _, tc := range tests {
		_, err := ParseDhclientConf([]byte(tc.in), path)
		if err == nil || err.Error() != tc.want {
			t.Errorf("ParseDhclientConf(%q) error = %v, want %q", tc.in, err, tc.want)
		}
	}
}

func TestRuleString(t *testing.T) {
	r := Rule{Path: "/etc/dhcp/dhclient.conf", Line: 2, Policy: Supersede, Option: OptDomainNameServers, Servers: addrs("169.254.25.10", "10.66.0.53")}
	if got, want := r.String(), "/etc/dhcp/dhclient.conf:2: supersede domain-name-servers 169.254.25.10, 10.66.0.53"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestRulesForOrder(t *testing.T) {
	c, err := ParseDhclientConf([]byte("interface \"eth0\" { prepend domain-name-servers 10.0.0.3; }\nprepend domain-name-servers 10.0.0.1;\ninterface \"eth1\" { prepend domain-name-servers 10.0.0.9; }\nprepend domain-name-servers 10.0.0.2;\n"), "c")
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, r := range c.RulesFor(OptDomainNameServers, "eth0") {
		got = append(got, r.Line)
	}
	// Global statements first, in file order, then eth0's own block.
	if diff := cmp.Diff([]int{2, 4, 1}, got); diff != "" {
		t.Errorf("RulesFor order (-want +got):\n%s", diff)
	}
}

// readKubespray reads a file captured from a real dhclient 4.4.3-P1 run (see
// cmd/nodedns/testdata/kubespray/README.md).
func readKubespray(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata/kubespray", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestOfferedDNSRealDhclient runs OfferedDNS over lease files a real dhclient
// 4.4.3-P1 wrote under kubespray's dhclient.conf, with dnsmasq offering
// 10.66.0.53 on enp1s0.
func TestOfferedDNSRealDhclient(t *testing.T) {
	tests := []struct {
		name, conf, leases string
		wantServers        []netip.Addr
		wantKnown          bool
		wantLine           int  // the block the value comes from
		wantCurrent        bool // that block is the newest
		wantHiddenLine     int  // the dhclient.conf line hiding the newest block's offer, 0 for none
	}{
		{
			// Boot lease, then dhclient restarted with kubespray's supersede and one renewal: the
			// newest block lists the superseded servers; the block rewritten at the restart still
			// shows the offer.
			name: "supersede with an upstream, after a renewal", conf: "dhclient.conf", leases: "after-renew.leases",
			wantServers: addrs("10.66.0.53"), wantKnown: true, wantLine: 1, wantHiddenLine: 2,
		},
		{
			// A second restart trims the file to one block per address: only superseded blocks.
			name: "supersede with an upstream, after a second restart", conf: "dhclient.conf", leases: "after-second-restart.leases",
			wantKnown: false, wantHiddenLine: 2,
		},
		{
			// disable_host_nameservers: true: kubespray supersedes with the cache alone. Before dhclient
			// restarts, the file holds only what DHCP offered: the rule is not in force yet.
			name: "loop-only before dhclient restarts", conf: "dhclient-loop-only.conf", leases: "loop-only-boot.leases",
			wantServers: addrs("10.66.0.53"), wantKnown: true, wantLine: 1, wantCurrent: true,
		},
		{
			name: "loop-only after a renewal", conf: "dhclient-loop-only.conf", leases: "loop-only-after-renew.leases",
			wantServers: addrs("10.66.0.53"), wantKnown: true, wantLine: 1, wantHiddenLine: 2,
		},
		{
			// The offer has left no trace at all.
			name: "loop-only after a second restart", conf: "dhclient-loop-only.conf", leases: "loop-only-after-second-restart.leases",
			wantKnown: false, wantHiddenLine: 2,
		},
		{
			name: "prepend keeps the offer behind the cache", conf: "prepend.conf", leases: "prepend.leases",
			wantServers: addrs("10.66.0.53"), wantKnown: true, wantLine: 1, wantCurrent: true,
		},
		{
			name: "append keeps the offer ahead of the cache", conf: "append.conf", leases: "append.leases",
			wantServers: addrs("10.66.0.53"), wantKnown: true, wantLine: 1, wantCurrent: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			conf, err := ParseDhclientConf(readKubespray(t, tc.conf), "/etc/dhcp/dhclient.conf")
			if err != nil {
				t.Fatal(err)
			}
			ls, err := ParseDhclient(readKubespray(t, tc.leases), "/var/lib/dhcp/dhclient.enp1s0.leases")
			if err != nil {
				t.Fatal(err)
			}
			got := OfferedDNS(ls, conf, "enp1s0")
			if got.Known != tc.wantKnown {
				t.Fatalf("Known = %v, want %v (%+v)", got.Known, tc.wantKnown, got)
			}
			if diff := cmp.Diff(tc.wantServers, got.Servers, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmpEmpty); diff != "" {
				t.Errorf("Servers (-want +got):\n%s", diff)
			}
			if tc.wantKnown && (got.Lease.Line != tc.wantLine || got.Current != tc.wantCurrent) {
				t.Errorf("from block at line %d (current %v), want line %d (current %v)", got.Lease.Line, got.Current, tc.wantLine, tc.wantCurrent)
			}
			switch {
			case tc.wantHiddenLine == 0 && got.Hidden != nil:
				t.Errorf("Hidden = %v, want none", got.Hidden)
			case tc.wantHiddenLine != 0 && (got.Hidden == nil || got.Hidden.Line != tc.wantHiddenLine || got.Hidden.Policy != Supersede):
				t.Errorf("Hidden = %v, want the supersede at line %d", got.Hidden, tc.wantHiddenLine)
			}
		})
	}
}

// cmpEmpty treats nil and empty slices alike.
var cmpEmpty = cmp.FilterValues(func(a, b []netip.Addr) bool { return len(a) == 0 && len(b) == 0 }, cmp.Ignore())

func TestOfferedSearchRealDhclient(t *testing.T) {
	conf, err := ParseDhclientConf(readKubespray(t, "dhclient.conf"), "/etc/dhcp/dhclient.conf")
	if err != nil {
		t.Fatal(err)
	}
	ls, err := ParseDhclient(readKubespray(t, "after-renew.leases"), "/var/lib/dhcp/dhclient.enp1s0.leases")
	if err != nil {
		t.Fatal(err)
	}
	// The newest block records kubespray's cluster domains ("default.svc.cluster.local.", ...) as its
	// domain-search: they are not DHCP's. The offer, example.org, is in the older block.
	if got := ls[len(ls)-1].SearchDomains; !strings.HasPrefix(strings.Join(got, " "), "default.svc.cluster.local.") {
		t.Fatalf("newest block's domain-search = %q, want kubespray's superseded list", got)
	}
	got := OfferedSearch(ls, conf, "enp1s0")
	if !got.Known || got.Current || got.Lease.Line != 1 || got.Hidden == nil || got.Hidden.Line != 4 {
		t.Fatalf("OfferedSearch = %+v, want known from the block at line 1, hidden by line 4", got)
	}
	if diff := cmp.Diff([]string{"example.org"}, got.Domains); diff != "" {
		t.Errorf("Domains (-want +got):\n%s", diff)
	}
}

func TestOfferedRules(t *testing.T) {
	lease := func(iface string, dns ...string) Lease { return Lease{Interface: iface, DNS: addrs(dns...), Line: 1} }
	tests := []struct {
		name  string
		conf  string
		ls    []Lease
		want  []string
		known bool
	}{
		{"no rules", "", []Lease{lease("eth0", "10.0.0.1")}, []string{"10.0.0.1"}, true},
		{"prepend then append", "prepend domain-name-servers 169.254.25.10;\nappend domain-name-servers 10.9.9.9;\n",
			[]Lease{lease("eth0", "169.254.25.10", "10.0.0.1", "10.9.9.9")}, []string{"10.0.0.1"}, true},
		{"prepend of a server that also came from DHCP", "prepend domain-name-servers 10.0.0.1;\n",
			[]Lease{lease("eth0", "10.0.0.1", "10.0.0.1")}, []string{"10.0.0.1"}, true},
		{"prepend not in force (older dhclient)", "prepend domain-name-servers 169.254.25.10;\n",
			[]Lease{lease("eth0", "10.0.0.1")}, []string{"10.0.0.1"}, true},
		{"default used: nothing offered", "default domain-name-servers 10.0.0.7;\n",
			[]Lease{lease("eth0", "10.0.0.7")}, nil, true},
		{"default not used", "default domain-name-servers 10.0.0.7;\n",
			[]Lease{lease("eth0", "10.0.0.1")}, []string{"10.0.0.1"}, true},
		{"expression hides the offer", "supersede domain-name-servers = option domain-name-servers;\n",
			[]Lease{lease("eth0", "10.0.0.1")}, nil, false},
		{"interface-only supersede on another interface", "interface \"eth1\" { supersede domain-name-servers 169.254.25.10; }\n",
			[]Lease{lease("eth0", "10.0.0.1")}, []string{"10.0.0.1"}, true},
		{"no lease for the interface", "", []Lease{lease("eth1", "10.0.0.1")}, nil, false},
		{"a DHCPv6 block is not a DHCPv4 offer", "", []Lease{{Interface: "eth0", V6: true, DNS: addrs("2001:db8::1")}}, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			conf, err := ParseDhclientConf([]byte(tc.conf), "c")
			if err != nil {
				t.Fatal(err)
			}
			got := OfferedDNS(tc.ls, conf, "eth0")
			if got.Known != tc.known {
				t.Fatalf("Known = %v, want %v", got.Known, tc.known)
			}
			if diff := cmp.Diff(tc.want, addrStrings(got.Servers), cmp.FilterValues(func(a, b []string) bool { return len(a) == 0 && len(b) == 0 }, cmp.Ignore())); diff != "" {
				t.Errorf("Servers (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLoadDhclientConf: dhclient reads the first of its two places that exists, and only that one;
// one it cannot read or parse is a problem naming it, and no rules.
func TestLoadDhclientConf(t *testing.T) {
	const supersede = "supersede domain-name-servers 169.254.25.10;\n"
	tests := []struct {
		name    string
		files   map[string]string
		servers string // the first domain-name-servers rule's values; "" when no rules
		problem string // the path of the one problem
	}{
		{name: "none"},
		{name: "/etc/dhcp first", files: map[string]string{"/etc/dhcp/dhclient.conf": supersede, "/etc/dhclient.conf": "bad {\n"}, servers: "[169.254.25.10]"},
		{name: "the older place", files: map[string]string{"/etc/dhclient.conf": supersede}, servers: "[169.254.25.10]"},
		{name: "unparsable, not the older place instead", files: map[string]string{"/etc/dhcp/dhclient.conf": "bad {\n", "/etc/dhclient.conf": supersede}, problem: "/etc/dhcp/dhclient.conf"},
		{name: "unreadable", files: map[string]string{"/etc/dhcp/dhclient.conf/x": ""}, problem: "/etc/dhcp/dhclient.conf"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for p, data := range tt.files {
				writeFile(t, root, p, []byte(data))
			}
			c, ps := LoadDhclientConf(nodefs.NewReader(root))
			servers := ""
			if c != nil {
				if rs := c.RulesFor(OptDomainNameServers, "eth0"); len(rs) > 0 {
					servers = fmt.Sprint(rs[0].Servers)
				}
			}
			if servers != tt.servers {
				t.Errorf("servers %q, want %q (conf %+v)", servers, tt.servers, c)
			}
			switch {
			case tt.problem == "" && len(ps) > 0:
				t.Errorf("problems: %v", ps)
			case tt.problem != "" && (len(ps) != 1 || ps[0].Path != tt.problem || c != nil):
				t.Errorf("problems %v, conf %+v: want one about %s and no rules", ps, c, tt.problem)
			}
		})
	}
}
