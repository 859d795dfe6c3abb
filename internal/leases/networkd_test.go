package leases

import (
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParseNetworkdFile parses a lease as systemd-networkd 252 wrote it for a
// dnsmasq server handing out domain-name and domain-search example.org.
func TestParseNetworkdFile(t *testing.T) {
	data, err := os.ReadFile("testdata/root/run/systemd/netif/leases/2")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseNetworkd(data, "/run/systemd/netif/leases/2")
	if err != nil {
		t.Fatalf("ParseNetworkd: %v", err)
	}
	want := Lease{
		Path:          "/run/systemd/netif/leases/2",
		Client:        Networkd,
		IfIndex:       2,
		Address:       netip.MustParsePrefix("192.168.50.123/24"),
		Routers:       addrs("192.168.50.1"),
		DNS:           addrs("192.168.50.1"),
		DomainName:    "example.org",
		SearchDomains: []string{"example.org"},
	}
	if diff := cmp.Diff(want, got, cmpOpts); diff != "" {
		t.Errorf("ParseNetworkd mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"example.org"}, got.Domains()); diff != "" {
		t.Errorf("Domains mismatch (-want +got):\n%s", diff)
	}
	if !got.Current(now) {
		t.Error("a networkd lease (no expiry) is not current")
	}
}

func TestParseNetworkdFields(t *testing.T) {
	tests := []struct {
		name string
		path string
		in   string
		want Lease
	}{
		{
			name: "empty file",
			path: "/run/systemd/netif/leases/3",
			in:   "",
			want: Lease{IfIndex: 3},
		},
		{
			name: "address without netmask is a host prefix",
			path: "/run/systemd/netif/leases/3",
			in:   "ADDRESS=10.0.0.5\n",
			want: Lease{IfIndex: 3, Address: netip.MustParsePrefix("10.0.0.5/32")},
		},
		{
			name: "netmask before address, host bits kept",
			path: "/run/systemd/netif/leases/3",
			in:   "NETMASK=255.255.0.0\nADDRESS=10.20.0.5\n",
			want: Lease{IfIndex: 3, Address: netip.MustParsePrefix("10.20.0.5/16")},
		},
		{
			name: "netmask alone gives no address",
			path: "/run/systemd/netif/leases/3",
			in:   "NETMASK=255.255.0.0\n",
			want: Lease{IfIndex: 3},
		},
		{
			name: "several routers and servers, space separated",
			path: "/run/systemd/netif/leases/3",
			in:   "ROUTER=10.0.0.1 10.0.0.2\nDNS=10.0.0.53  10.0.0.54\n",
			want: Lease{IfIndex: 3, Routers: addrs("10.0.0.1", "10.0.0.2"), DNS: addrs("10.0.0.53", "10.0.0.54")},
		},
		{
			name: "search list split on spaces",
			path: "/run/systemd/netif/leases/3",
			in:   "DOMAIN_SEARCH_LIST=a.example b.example\n",
			want: Lease{IfIndex: 3, SearchDomains: []string{"a.example", "b.example"}},
		},
		{
			name: "MTU",
			path: "/run/systemd/netif/leases/3",
			in:   "MTU=9000\n",
			want: Lease{IfIndex: 3, MTU: 9000},
		},
		{
			name: "quoted values, spaces around =, comments with # and ;",
			path: "/run/systemd/netif/leases/3",
			in:   "# c\n; c\n  DOMAINNAME = \"corp.example\"  \nDNS='10.0.0.53'\n",
			want: Lease{IfIndex: 3, DomainName: "corp.example", DNS: addrs("10.0.0.53")},
		},
		{
			name: "backslash escape in an unquoted value",
			path: "/run/systemd/netif/leases/3",
			in:   `DOMAINNAME=a\.b` + "\n",
			want: Lease{IfIndex: 3, DomainName: "a.b"},
		},
		{
			name: "later key wins",
			path: "/run/systemd/netif/leases/3",
			in:   "DNS=10.0.0.1\nDNS=10.0.0.2\n",
			want: Lease{IfIndex: 3, DNS: addrs("10.0.0.2")},
		},
		{
			name: "unknown and ignored keys, CRLF, no final newline",
			path: "/run/systemd/netif/leases/3",
			in:   "SERVER_ADDRESS=10.0.0.1\r\nNTP=10.0.0.9\r\nSTATIC_ROUTES=10.1.0.0/16,10.0.0.1\r\nOPTION_224=0011\r\nT1=30min\r\nDOMAINNAME=crlf.example",
			want: Lease{IfIndex: 3, DomainName: "crlf.example"},
		},
		// Read as dhcp_lease_load reads the file (parse_env_file): what it ignores is ignored.
		{
			name: "a line without '=' is ignored",
			path: "/run/systemd/netif/leases/3",
			in:   "# ok\nADDRESS=10.0.0.1\nthis is not a lease\n",
			want: Lease{IfIndex: 3, Address: netip.MustParsePrefix("10.0.0.1/32")},
		},
		{
			name: "a long line without '=' is ignored",
			path: "/run/systemd/netif/leases/3",
			in:   strings.Repeat("x", 200),
			want: Lease{IfIndex: 3},
		},
		{
			name: "a key networkd does not ask for is ignored",
			path: "/run/systemd/netif/leases/3",
			in:   "1KEY=x\n",
			want: Lease{IfIndex: 3},
		},
		{
			name: "a line starting with '=' is a key without '=', ignored",
			path: "/run/systemd/netif/leases/3",
			in:   "=x\n",
			want: Lease{IfIndex: 3},
		},
		{
			name: "a line that is not UTF-8 and has no '=' is ignored",
			path: "/run/systemd/netif/leases/3",
			in:   "\xff\xfe\nDNS=10.0.0.53\n",
			want: Lease{IfIndex: 3, DNS: addrs("10.0.0.53")},
		},
		{
			name: "an unterminated quote runs to the end of the file",
			path: "/run/systemd/netif/leases/3",
			in:   "DOMAINNAME=\"a\n",
			want: Lease{IfIndex: 3, DomainName: "a\n"},
		},
		{
			name: "a trailing backslash escapes the newline",
			path: "/run/systemd/netif/leases/3",
			in:   "DOMAINNAME=a\\\n",
			want: Lease{IfIndex: 3, DomainName: "a"},
		},
		{
			name: "an escaped newline continues the value",
			path: "/run/systemd/netif/leases/3",
			in:   "DNS=10.0.0.53 \\\n10.0.0.54\nMTU=1500\n",
			want: Lease{IfIndex: 3, DNS: addrs("10.0.0.53", "10.0.0.54"), MTU: 1500},
		},
		{
			name: "reading stops at a NUL",
			path: "/run/systemd/netif/leases/3",
			in:   "ADDRESS=10.0.0.1\nDNS=\x00\x01\nMTU=x\n",
			want: Lease{IfIndex: 3, Address: netip.MustParsePrefix("10.0.0.1/32")},
		},
		{
			name: "a bad value replaced by a later assignment is never read",
			path: "/run/systemd/netif/leases/3",
			in:   "ADDRESS=nope\nADDRESS=10.0.0.1\n",
			want: Lease{IfIndex: 3, Address: netip.MustParsePrefix("10.0.0.1/32")},
		},
		{
			name: "non-numeric file name has no IfIndex",
			path: "/var/lib/NetworkManager/internal-x-eth0.lease",
			in:   "ADDRESS=10.0.0.42\n",
			want: Lease{Address: netip.MustParsePrefix("10.0.0.42/32")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseNetworkd([]byte(tt.in), tt.path)
			if err != nil {
				t.Fatalf("ParseNetworkd: %v", err)
			}
			tt.want.Path, tt.want.Client = tt.path, Networkd
			if diff := cmp.Diff(tt.want, got, cmpOpts); diff != "" {
				t.Errorf("ParseNetworkd mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseNetworkdErrors(t *testing.T) {
	const path = "/run/systemd/netif/leases/2"
	tests := []struct {
		name string
		in   string
		want string // the exact error
	}{
		{"bad address", "ADDRESS=10.0.0.256\n", path + `:1: ADDRESS: invalid IPv4 address "10.0.0.256"`},
		{"IPv6 address", "ADDRESS=2001:db8::1\n", path + `:1: ADDRESS: invalid IPv4 address "2001:db8::1"`},
		{"non-contiguous netmask", "NETMASK=255.0.255.0\n", path + `:1: NETMASK: non-contiguous netmask 255.0.255.0`},
		{"bad netmask", "NETMASK=24\n", path + `:1: NETMASK: invalid IPv4 netmask "24"`},
		{"bad router", "ROUTER=10.0.0.1 gw\n", path + `:1: ROUTER: invalid address "gw"`},
		{"bad DNS", "\n\nDNS=10.0.0.1,10.0.0.2\n", path + `:3: DNS: invalid address "10.0.0.1,10.0.0.2"`},
		{"bad MTU", "MTU=jumbo\n", path + `:1: MTU: invalid MTU "jumbo" (want 68 to 65535)`},
		{"MTU too small", "MTU=10\n", path + `:1: MTU: invalid MTU "10" (want 68 to 65535)`},
		{"invalid UTF-8 value", "DOMAINNAME=\xff\n", path + `:1: binary data (not UTF-8)`},
		{"invalid UTF-8 in a key networkd does not ask for", "# x\nADDRESS=10.0.0.1\nHOSTNAME=\xc3\n", path + `:3: binary data (not UTF-8)`},
		{"long bad value clipped", "ADDRESS=" + strings.Repeat("x", 200), path + `:1: ADDRESS: invalid IPv4 address "` + strings.Repeat("x", 64) + `..."`},
		{"the first bad line is named", "MTU=1\nADDRESS=x\n", path + `:1: MTU: invalid MTU "1" (want 68 to 65535)`},
		{"the last assignment counts", "ADDRESS=10.0.0.1\nADDRESS=nope\n", path + `:2: ADDRESS: invalid IPv4 address "nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := ParseNetworkd([]byte(tt.in), path)
			if err == nil {
				t.Fatalf("ParseNetworkd = %+v, want error %q", l, tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("error = %q, want %q", err, tt.want)
			}
		})
	}
}
