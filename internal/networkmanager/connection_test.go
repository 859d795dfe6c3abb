package networkmanager

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseConnection(t *testing.T) {
	in := `[connection]
id=eth0
uuid=5b4c9a46-6b8e-4f0c-9a55-1a2b3c4d5e6f
type=ethernet
interface-name=eth0

[ipv4]
method=auto
dns=10.0.0.1;bogus;10.0.0.2#dns.example;::1;
dns-search=corp.example;;
ignore-auto-dns=true

[ipv6]
method=ignore
dns=2001:db8::53;
ignore-auto-dns=maybe
`
	c, err := ParseConnection(EtcConnectionsDir+"/eth0.nmconnection", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	p := EtcConnectionsDir + "/eth0.nmconnection"
	want := &Connection{Path: p, ID: "eth0", UUID: "5b4c9a46-6b8e-4f0c-9a55-1a2b3c4d5e6f", Type: "ethernet", InterfaceName: "eth0",
		IPv4: IPSettings{Method: "auto", DNS: []string{"10.0.0.1", "10.0.0.2#dns.example"}, DNSSearch: []string{"corp.example"}, IgnoreAutoDNS: true,
			MethodFrom: Source{p, 8}, DNSFrom: Source{p, 9}, DNSSearchFrom: Source{p, 10}, IgnoreAutoDNSFrom: Source{p, 11}},
		IPv6: IPSettings{Method: "ignore", DNS: []string{"2001:db8::53"}, MethodFrom: Source{p, 14}, DNSFrom: Source{p, 15}},
		Warnings: []Warning{
			{Source{p, 9}, "ignoring invalid DNS server IPv4 address 'bogus'"},
			{Source{p, 9}, "ignoring invalid DNS server IPv4 address '::1'"},
			{Source{p, 16}, "[ipv6] ignore-auto-dns=maybe is not a boolean: ignored"},
		}}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestLoadConnections(t *testing.T) {
	k := func(uuid, iface string) string {
		return "[connection]\nid=" + iface + "\nuuid=" + uuid + "\ninterface-name=" + iface + "\n[ipv4]\nmethod=auto\n"
	}
	node := MapFS{
		LibConnectionsDir + "/a.nmconnection":   k("11111111-1111-1111-1111-111111111111", "lib-a"),
		LibConnectionsDir + "/noext":            k("22222222-2222-2222-2222-222222222222", "lib-noext"),
		EtcConnectionsDir + "/a":                k("11111111-1111-1111-1111-111111111111", "etc-a"),
		EtcConnectionsDir + "/b.nmconnection":   k("33333333-3333-3333-3333-333333333333", "etc-b"),
		EtcConnectionsDir + "/b.nmconnection~":  k("44444444-4444-4444-4444-444444444444", "backup"),
		EtcConnectionsDir + "/.hidden":          k("55555555-5555-5555-5555-555555555555", "hidden"),
		EtcConnectionsDir + "/c.AbC123":         k("66666666-6666-6666-6666-666666666666", "tmp"),
		EtcConnectionsDir + "/bad.nmconnection": "oops\n",
		RunConnectionsDir + "/b.nmconnection":   k("33333333-3333-3333-3333-333333333333", "run-b"),
		RunConnectionsDir + "/plain":            k("77777777-7777-7777-7777-777777777777", "run-plain"),
	}
	cs, err := LoadConnections(node)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cs.Profiles {
		got = append(got, c.InterfaceName+"@"+string(c.Storage))
	}
	if diff := cmp.Diff([]string{"etc-a@etc", "run-b@run"}, got); diff != "" {
		t.Errorf("profiles (-want +got):\n%s", diff)
	}
	if len(cs.Shadowed) != 2 || len(cs.Errors) != 1 {
		t.Errorf("shadowed %d, errors %v", len(cs.Shadowed), cs.Errors)
	}
	if c, ok := cs.ByUUID("33333333-3333-3333-3333-333333333333"); !ok || c.Storage != StorageRun {
		t.Errorf("ByUUID = %+v", c)
	}
	if len(cs.ByInterface("etc-a")) != 1 {
		t.Error("ByInterface")
	}
}

func FuzzParseConnection(f *testing.F) {
	f.Add([]byte("[connection]\nid=x\n[ipv4]\ndns=1.2.3.4;\ndns-search=a;b\nignore-auto-dns=yes\n"))
	f.Add([]byte("[ipv6]\ndns=::1#x;fe80::1%eth0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConnection("f", data)
		if err != nil {
			return
		}
		for _, s := range append(append([]string(nil), c.IPv4.DNS...), c.IPv6.DNS...) {
			if s == "" {
				t.Fatal("empty server kept")
			}
		}
		for _, s := range c.IPv4.DNSSearch {
			if s == "" {
				t.Fatal("empty search domain kept")
			}
		}
	})
}

// TestParseConnectionBadLists: a dns or dns-search list that does not split (GKeyFile refuses an
// escape character at the end of a value) is a warning naming the group and the key, and no entry.
func TestParseConnectionBadLists(t *testing.T) {
	in := "[connection]\nid=eth0\n[ipv4]\ndns=10.0.0.1;\\\ndns-search=corp.example;\\\n"
	p := EtcConnectionsDir + "/eth0.nmconnection"
	c, err := ParseConnection(p, []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := IPSettings{DNSFrom: Source{p, 4}, DNSSearchFrom: Source{p, 5}}
	if diff := cmp.Diff(want, c.IPv4); diff != "" {
		t.Errorf("IPv4 (-want +got):\n%s", diff)
	}
	wantWarn := []Warning{
		{Source{p, 4}, "[ipv4] dns ignored: Key file contains escape character at end of line"},
		{Source{p, 5}, "[ipv4] dns-search ignored: Key file contains escape character at end of line"},
	}
	if diff := cmp.Diff(wantWarn, c.Warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}
