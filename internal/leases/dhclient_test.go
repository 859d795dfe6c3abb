package leases

import (
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestParseDhclientFile parses a dhclient.leases as ISC dhclient 4.4 leaves
// it: a default-duid, an old lease for eth0, an expired lease for eth1 and
// the current lease for eth0, in file order.
func TestParseDhclientFile(t *testing.T) {
	const path = "/var/lib/dhcp/dhclient.leases"
	data, err := os.ReadFile("testdata/root" + path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseDhclient(data, path)
	if err != nil {
		t.Fatalf("ParseDhclient: %v", err)
	}
	want := []Lease{
		{
			Path: path, Line: 2, Client: Dhclient, Interface: "eth0",
			Address:       netip.MustParsePrefix("192.168.50.100/24"),
			Routers:       addrs("192.168.50.1"),
			DNS:           addrs("192.168.50.1"),
			DomainName:    "example.org",
			SearchDomains: []string{"old.example."},
			Expire:        time.Date(2025, 11, 21, 10, 0, 0, 0, time.UTC),
		},
		{
			Path: path, Line: 17, Client: Dhclient, Interface: "eth1",
			Address:    netip.MustParsePrefix("172.16.5.20/20"),
			Routers:    addrs("172.16.0.1"),
			DNS:        addrs("172.16.0.2"),
			DomainName: "lab.example",
			Expire:     time.Date(2024, 3, 2, 4, 0, 0, 0, time.UTC),
		},
		{
			Path: path, Line: 29, Client: Dhclient, Interface: "eth0",
			Address:       netip.MustParsePrefix("192.168.50.123/24"),
			Routers:       addrs("192.168.50.1"),
			DNS:           addrs("192.168.50.1", "192.168.50.2"),
			DomainName:    "example.org",
			SearchDomains: []string{"example.org.", "corp.example."},
			MTU:           1450,
			Expire:        time.Date(2026, 1, 16, 7, 59, 0, 0, time.UTC),
		},
	}
	if diff := cmp.Diff(want, got, cmpOpts); diff != "" {
		t.Errorf("ParseDhclient mismatch (-want +got):\n%s", diff)
	}
	var current []bool
	for _, l := range got {
		current = append(current, l.Current(now))
	}
	if diff := cmp.Diff([]bool{false, false, true}, current); diff != "" {
		t.Errorf("Current(now) mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"example.org", "corp.example"}, got[2].Domains()); diff != "" {
		t.Errorf("Domains of the current eth0 lease (-want +got):\n%s", diff)
	}
}

func TestParseDhclient6File(t *testing.T) {
	const path = "/var/lib/dhcp/dhclient6.eth0.leases"
	data, err := os.ReadFile("testdata/root" + path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseDhclient(data, path)
	if err != nil {
		t.Fatalf("ParseDhclient: %v", err)
	}
	want := []Lease{{
		Path: path, Line: 2, Client: Dhclient, Interface: "eth0", V6: true,
		Address:       netip.MustParsePrefix("2001:db8:50::123/128"),
		DNS:           addrs("2001:db8:50::53"),
		SearchDomains: []string{"v6.example.org."},
		Expire:        time.Date(2026, 1, 15, 9, 0, 0, 0, time.UTC), // starts + max-life 7200
	}}
	if diff := cmp.Diff(want, got, cmpOpts); diff != "" {
		t.Errorf("ParseDhclient mismatch (-want +got):\n%s", diff)
	}
}

// lease4 wraps declarations in a lease block starting on line 1.
func lease4(decls ...string) string {
	return "lease {\n  " + strings.Join(decls, "\n  ") + "\n}\n"
}

func TestParseDhclientDeclarations(t *testing.T) {
	const path = "/var/lib/dhcp/dhclient.eth0.leases"
	tests := []struct {
		name string
		in   string
		want []Lease // Path and Client are filled in
	}{
		{"empty file", "", nil},
		{"only comments and a duid", "# dhclient\n\ndefault-duid \"\\000\\001\";\n", nil},
		{"empty lease", "lease {}", []Lease{{Line: 1}}},
		{
			name: "the brief's date: weekday not checked against the date",
			in:   lease4(`expire 4 2026/11/21 10:00:00;`),
			want: []Lease{{Line: 1, Expire: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)}},
		},
		{
			name: "expire never",
			in:   lease4(`renew never;`, `rebind never;`, `expire never;`),
			want: []Lease{{Line: 1}},
		},
		{
			name: "db-time-format local: epoch and a comment",
			in:   lease4(`expire epoch 1768464000; # Thu Jan 15 09:00:00 2026`),
			want: []Lease{{Line: 1, Expire: now}},
		},
		{
			name: "fixed-address without subnet-mask is a host prefix",
			in:   lease4(`fixed-address 10.0.0.9;`),
			want: []Lease{{Line: 1, Address: netip.MustParsePrefix("10.0.0.9/32")}},
		},
		{
			name: "subnet-mask before fixed-address",
			in:   lease4(`option subnet-mask 255.255.254.0;`, `fixed-address 10.0.1.9;`),
			want: []Lease{{Line: 1, Address: netip.MustParsePrefix("10.0.1.9/23")}},
		},
		{
			name: "lists with and without spaces",
			in:   lease4(`option routers 10.0.0.1,10.0.0.2;`, `option domain-name-servers 10.0.0.53 , 10.0.0.54;`),
			want: []Lease{{Line: 1, Routers: addrs("10.0.0.1", "10.0.0.2"), DNS: addrs("10.0.0.53", "10.0.0.54")}},
		},
		{
			name: "domain-search without spaces, one entry, unquoted name",
			in:   lease4(`option domain-search "a.example.","b.example.";`, `option domain-name c.example;`),
			want: []Lease{{Line: 1, SearchDomains: []string{"a.example.", "b.example."}, DomainName: "c.example"}},
		},
		{
			name: "string escapes as conflex.c reads them",
			in:   lease4(`option domain-name "a\"b\\c\tx\101\x42\q";`),
			want: []Lease{{Line: 1, DomainName: "a\"b\\c\txAB" + "q"}},
		},
		{
			name: "comment characters inside a string are text",
			in:   lease4(`option domain-name "x#y;z{}";  # a comment`),
			want: []Lease{{Line: 1, DomainName: "x#y;z{}"}},
		},
		{
			name: "ignored declarations",
			in: lease4(`bootp;`, `medium "link0 link1";`, `filename "pxelinux.0";`, `server-name "boot";`,
				`option dhcp-client-identifier 1:52:54:0:12:34:56;`, `option vendor-encapsulated-options 1:4:c0:a8:1:1;`,
				`option ntp-servers 10.0.0.9;`, `vendor-option-space "x";`),
			want: []Lease{{Line: 1}},
		},
		{
			name: "interface-mtu",
			in:   lease4(`option interface-mtu 9001;`),
			want: []Lease{{Line: 1, MTU: 9001}},
		},
		{
			name: "two leases on one line, semicolons stray",
			in:   `lease { interface "a"; } ; lease { interface "b"; ; }`,
			want: []Lease{{Line: 1, Interface: "a"}, {Line: 1, Interface: "b"}},
		},
		{
			name: "lease6 with infinite max-life and an ia-pd",
			in: "lease6 {\n interface \"eth0\";\n ia-pd 1:2:3:4 { iaprefix 2001:db8:1::/56 { starts 1; max-life 7200; } }\n" +
				" ia-na 1:2:3:4 { iaaddr 2001:db8::5 { starts 1768464000; max-life 4294967295; } iaaddr 2001:db8::6 { } }\n" +
				" option dhcp6.name-servers 2001:db8::53, 2001:db8::54;\n}\n",
			want: []Lease{{Line: 1, Interface: "eth0", V6: true, Address: netip.MustParsePrefix("2001:db8::5/128"),
				DNS: addrs("2001:db8::53", "2001:db8::54")}},
		},
		{
			name: "lease6 without addresses (information-only)",
			in:   "lease6 { interface \"eth0\"; option dhcp6.domain-search \"x.example.\"; }",
			want: []Lease{{Line: 1, Interface: "eth0", V6: true, SearchDomains: []string{"x.example."}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseDhclient([]byte(tt.in), path)
			if err != nil {
				t.Fatalf("ParseDhclient: %v", err)
			}
			for i := range tt.want {
				tt.want[i].Path, tt.want[i].Client = path, Dhclient
			}
			if diff := cmp.Diff(tt.want, got, cmpOpts); diff != "" {
				t.Errorf("ParseDhclient mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseDhclientErrors(t *testing.T) {
	const path = "/var/lib/dhcp/dhclient.leases"
	good := lease4(`interface "eth0";`, `fixed-address 10.0.0.5;`) // lines 1-4
	tests := []struct {
		name string
		in   string
		want string // the exact error
	}{
		{
			name: "lease cut off mid-block names the lease line",
			in:   good + "lease {\n  interface \"eth0\";\n  fixed-address 10.0.0.6;\n  renew 4 2026/01/15 1",
			want: path + ":5: unexpected end of file: lease block not closed",
		},
		{
			name: "lease cut off after the brace",
			in:   good + "lease {",
			want: path + ":5: unexpected end of file: lease block not closed",
		},
		{
			name: "lease6 cut off inside ia-na names the ia-na line",
			in:   "lease6 {\n  ia-na 1:2:3:4 {\n    iaaddr 2001:db8::1 {\n",
			want: path + ":3: unexpected end of file: iaaddr block not closed",
		},
		{
			name: "cut off in a string",
			in:   "lease {\n  option domain-name \"exam",
			want: path + `:2: unterminated quoted string`,
		},
		{
			name: "statement at top level without semicolon",
			in:   good + "default-duid \"x\"",
			want: path + ":5: unexpected end of file: statement not ended by ;",
		},
		{
			name: "garbage",
			in:   "hello world;\n",
			want: path + `:1: unexpected "hello" at top level (want lease, lease6 or default-duid)`,
		},
		{
			name: "garbage text without punctuation",
			in:   "this is not a lease file",
			want: path + ":1: unexpected end of file: statement not ended by ;",
		},
		{
			name: "binary data",
			in:   "\x7fELF\x02\x01\x01\x00\x00",
			want: path + ":1: binary data (byte 0x7f)",
		},
		{
			name: "NUL inside a lease",
			in:   "lease {\n\x00\n}",
			want: path + ":2: binary data (byte 0x00)",
		},
		{
			name: "missing semicolon before }",
			in:   "lease {\n  interface \"eth0\"\n}\n",
			want: path + ":3: missing ; before }",
		},
		{
			name: "stray close brace",
			in:   good + "}\n",
			want: path + ":5: unexpected }",
		},
		{
			name: "lease without brace",
			in:   "lease;\n",
			want: path + ":1: lease: want lease { ... }",
		},
		{
			name: "bad fixed-address",
			in:   lease4(`fixed-address 10.0.0.500;`),
			want: path + `:2: fixed-address: invalid address "10.0.0.500"`,
		},
		{
			name: "fixed-address with two values",
			in:   lease4(`fixed-address 10.0.0.5 10.0.0.6;`),
			want: path + `:2: fixed-address: want one address`,
		},
		{
			name: "bad router in list",
			in:   lease4(`option routers 10.0.0.1, gw;`),
			want: path + `:2: option routers: invalid address "gw"`,
		},
		{
			name: "IPv6 DNS in a DHCPv4 lease",
			in:   lease4(`option domain-name-servers 2001:db8::1;`),
			want: path + `:2: option domain-name-servers: invalid address "2001:db8::1"`,
		},
		{
			name: "list with a trailing comma",
			in:   lease4(`option domain-search "a.",;`),
			want: path + `:2: option domain-search: malformed list (trailing comma)`,
		},
		{
			name: "list without commas",
			in:   lease4(`option domain-name-servers 10.0.0.1 10.0.0.2;`),
			want: path + `:2: option domain-name-servers: malformed list (want values separated by commas)`,
		},
		{
			name: "empty list",
			in:   lease4(`option routers;`),
			want: path + `:2: option routers: missing value`,
		},
		{
			name: "non-contiguous subnet-mask",
			in:   lease4(`option subnet-mask 255.255.0.255;`),
			want: path + `:2: option subnet-mask: non-contiguous netmask 255.255.0.255`,
		},
		{
			name: "bad MTU",
			in:   lease4(`option interface-mtu 1e3;`),
			want: path + `:2: option interface-mtu: invalid MTU "1e3" (want 68 to 65535)`,
		},
		{
			name: "interface not a string",
			in:   lease4(`interface;`),
			want: path + `:2: interface: want one quoted string`,
		},
		{
			name: "option without a name",
			in:   lease4(`option;`),
			want: path + `:2: option: missing option name`,
		},
		{
			name: "nested block in a DHCPv4 lease",
			in:   lease4(`foo { }`),
			want: path + `:2: foo: unexpected block in lease`,
		},
		{
			name: "statement starting with a string",
			in:   lease4(`"eth0";`),
			want: path + `:2: expected a keyword, found "eth0"`,
		},
		{
			name: "bad date",
			in:   lease4(`expire 4 2026/13/01 10:00:00;`),
			want: path + `:2: expire: invalid date 2026/13/01 10:00:00`,
		},
		{
			name: "February 30",
			in:   lease4(`renew 4 2026/02/30 10:00:00;`),
			want: path + `:2: renew: invalid date 2026/02/30 10:00:00`,
		},
		{
			name: "bad hour",
			in:   lease4(`rebind 4 2026/02/03 24:00:00;`),
			want: path + `:2: rebind: invalid date 2026/02/03 24:00:00`,
		},
		{
			name: "bad weekday",
			in:   lease4(`expire 7 2026/02/03 10:00:00;`),
			want: path + `:2: expire: invalid weekday "7" (want 0 to 6)`,
		},
		{
			name: "date with signs",
			in:   lease4(`expire 4 +2026/02/03 10:00:00;`),
			want: path + `:2: expire: malformed date "+2026/02/03" "10:00:00" (want YYYY/MM/DD HH:MM:SS)`,
		},
		{
			name: "bad epoch",
			in:   lease4(`expire epoch -5;`),
			want: path + `:2: expire: invalid epoch "-5"`,
		},
		{
			name: "date cut short",
			in:   lease4(`expire 4 2026/02/03;`),
			want: path + `:2: expire: malformed date (want W YYYY/MM/DD HH:MM:SS, epoch N or never)`,
		},
		{
			name: "bad lease6 max-life",
			in:   "lease6 {\n ia-na 1 {\n  iaaddr 2001:db8::1 {\n   max-life forever;\n  }\n }\n}\n",
			want: path + `:4: max-life: invalid number "forever"`,
		},
		{
			name: "IPv4 iaaddr",
			in:   "lease6 {\n ia-na 1 {\n  iaaddr 10.0.0.1 { }\n }\n}\n",
			want: path + `:3: iaaddr: invalid address "10.0.0.1"`,
		},
		{
			name: "deep nesting",
			in:   strings.Repeat("a {\n", 20),
			want: path + `:9: blocks nested too deeply`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ls, err := ParseDhclient([]byte(tt.in), path)
			if err == nil {
				t.Fatalf("ParseDhclient = %+v, want error %q", ls, tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("error = %q\nwant    %q", err, tt.want)
			}
			if ls != nil {
				t.Errorf("leases returned with an error: %+v", ls)
			}
		})
	}
}
