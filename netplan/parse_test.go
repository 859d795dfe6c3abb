package netplan

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

func parseIfaces(t *testing.T, docs ...string) *Config {
	t.Helper()
	var ds []Doc
	for i, d := range docs {
		ds = append(ds, Doc{Path: "/etc/netplan/" + string(rune('a'+i)) + ".yaml", Data: []byte(d)})
	}
	cfg, err := Parse(ds)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return cfg
}

// TestParseSemantics pins netplan 0.106 behaviours one at a time; each was
// checked with `netplan get` / `netplan generate` 0.106.
type semanticCase struct {
	name    string
	docs    []string
	want    []*Interface
	netplan bool // netplan 0.106 accepts the files: compare with `netplan get`
}

var semanticCases = []semanticCase{
	{
		name:    "boolean words",
		netplan: true,
		docs:    []string{"network:\n  ethernets:\n    a: {dhcp4: YES, dhcp6: y}\n    b: {dhcp4: \"On\", dhcp6: TRUE}\n    c: {dhcp4: n, dhcp6: Off}\n"},
		want: []*Interface{
			{ID: "a", Renderer: "networkd", DHCP4: true, DHCP6: true},
			{ID: "b", Renderer: "networkd", DHCP4: true, DHCP6: true},
			{ID: "c", Renderer: "networkd"},
		},
	},
	{
		name:    "later file overrides scalars",
		netplan: true,
		docs: []string{
			"network: {ethernets: {eth0: {dhcp4: true, mtu: 1500, set-name: a, match: {name: a}}}}\n",
			"network: {ethernets: {eth0: {dhcp4: false, mtu: 9000}}}\n",
		},
		want: []*Interface{{ID: "eth0", Renderer: "networkd", SetName: "a", MTU: 9000}},
	},
	{
		// g_ascii_strtoull accepts "" as 0. (`netplan get` then prints
		// `mtu: null`, which netplan itself rejects.)
		name: "empty mtu is 0",
		docs: []string{"network: {ethernets: {eth0: {mtu: 1500}}}\n", "network: {ethernets: {eth0: {mtu: \"\"}}}\n"},
		want: []*Interface{{ID: "eth0", Renderer: "networkd"}},
	},
	{
		name:    "duplicate keys in one file apply in order",
		netplan: true,
		docs:    []string{"network:\n  ethernets:\n    eth0: {dhcp4: true, nameservers: {search: [a]}}\n  ethernets:\n    eth0: {dhcp4: false, nameservers: {search: [b]}}\n"},
		want:    []*Interface{{ID: "eth0", Renderer: "networkd", Search: []string{"a", "b"}}},
	},
	{
		name:    "match merges key by key",
		netplan: true,
		docs: []string{
			"network: {ethernets: {eth0: {match: {name: en*}}}}\n",
			"network: {ethernets: {eth0: {match: {macaddress: \"AA:bb:cc:dd:ee:ff\", driver: [e1000, igb]}}}}\n",
		},
		want: []*Interface{{ID: "eth0", Renderer: "networkd", MatchMAC: "AA:bb:cc:dd:ee:ff", MatchDriver: "e1000 igb"}},
	},
	{
		name:    "addresses with options, dedup and early end",
		netplan: true,
		docs: []string{
			"network: {ethernets: {eth0: {addresses: [\"fe80::1/64\", {\"10.0.0.1/8\": {label: x}}, \"10.0.0.2/8\", {\"fe80::2/64\": {}}], nameservers: {addresses: [\"fe80::53\", 1.1.1.1]}}}}\n",
			// 10.0.0.9/8 follows a known options address: netplan 0.106
			// stops reading this list there.
			"network: {ethernets: {eth0: {addresses: [\"10.0.0.3/8\", {\"10.0.0.1/8\": {}}, \"10.0.0.9/8\", \"10.0.0.2/8\"], nameservers: {addresses: [\"fe80::54\", 1.1.1.2]}}}}\n",
		},
		want: []*Interface{{
			ID: "eth0", Renderer: "networkd",
			Addresses:   []string{"10.0.0.2/8", "10.0.0.3/8", "fe80::1/64", "10.0.0.1/8", "fe80::2/64"},
			Nameservers: addrs("1.1.1.1", "1.1.1.2", "fe80::53", "fe80::54"),
		}},
	},
	{
		name:    "lenient prefix and options prefix unchecked",
		netplan: true,
		docs:    []string{"network: {ethernets: {eth0: {addresses: [\"10.0.0.1/08\", \"10.0.0.2/8x\", {\"10.0.0.3/99\": {}}]}}}\n"},
		want:    []*Interface{{ID: "eth0", Renderer: "networkd", Addresses: []string{"10.0.0.1/08", "10.0.0.2/8x", "10.0.0.3/99"}}},
	},
	{
		// netplan 0.106 reads past an empty mapping here (`netplan get`
		// crashes on it); we take nothing from it.
		name: "empty options mapping",
		docs: []string{"network: {ethernets: {eth0: {addresses: [{}, 10.0.0.1/8]}}}\n"},
		want: []*Interface{{ID: "eth0", Renderer: "networkd", Addresses: []string{"10.0.0.1/8"}}},
	},
	{
		name:    "mapped IPv4 nameserver is IPv6",
		netplan: true,
		docs:    []string{"network: {ethernets: {eth0: {nameservers: {addresses: [\"::ffff:10.0.0.53\", 10.0.0.54]}}}}\n"},
		want:    []*Interface{{ID: "eth0", Renderer: "networkd", Nameservers: addrs("10.0.0.54", "::ffff:10.0.0.53")}},
	},
	{
		name: "overrides merge across files",
		docs: []string{
			"network: {ethernets: {eth0: {dhcp4: true, dhcp4-overrides: {use-dns: no, route-metric: 50}, dhcp6-overrides: {use-domains: route}}}}\n",
			"network: {ethernets: {eth0: {dhcp4-overrides: {use-domains: \"false\", route-metric: 60, x-future: [1, two]}}}}\n",
		},
		want: []*Interface{{
			ID: "eth0", Renderer: "networkd", DHCP4: true,
			DHCP4Overrides: map[string]any{"use-dns": false, "use-domains": "false", "route-metric": 60, "x-future": []any{1, "two"}},
			DHCP6Overrides: map[string]any{"use-domains": "route"},
		}},
	},
	{
		name:    "type renderer applies to its block only",
		netplan: true,
		docs:    []string{"network:\n  ethernets:\n    renderer: NetworkManager\n    eth0: {}\n  bonds:\n    bond0: {interfaces: [eth0]}\n  vlans:\n    v1: {id: 1, link: eth0, renderer: NetworkManager}\n"},
		want: []*Interface{
			{ID: "bond0", Renderer: "networkd", Members: []string{"eth0"}},
			{ID: "eth0", Renderer: "NetworkManager"},
			{ID: "v1", Renderer: "NetworkManager", Link: "eth0"},
		},
	},
	{
		name:    "vrf membership is separate",
		netplan: true,
		docs:    []string{"network:\n  ethernets: {eth0: {}, eth1: {}}\n  bonds:\n    bond0: {interfaces: [eth0, eth1, eth0]}\n  vrfs:\n    vrf0: {table: 10, interfaces: [bond0, eth0]}\n"},
		want: []*Interface{
			{ID: "bond0", Renderer: "networkd", Members: []string{"eth0", "eth1"}},
			{ID: "eth0", Renderer: "networkd"},
			{ID: "eth1", Renderer: "networkd"},
			{ID: "vrf0", Renderer: "networkd", Members: []string{"bond0", "eth0"}},
		},
	},
	{
		name: "newer and passthrough types",
		docs: []string{"network:\n  renderer: networkd\n  nm-devices:\n    NM-1: {}\n  dummy-devices:\n    dm0: {addresses: [10.9.9.9/32]}\n"},
		want: []*Interface{
			{ID: "dm0", Renderer: "networkd", Addresses: []string{"10.9.9.9/32"}},
			{ID: "NM-1", Renderer: "NetworkManager"},
		},
	},
	{
		name: "aliases expand",
		docs: []string{"x-common: &c {dhcp4: true, nameservers: {search: [a.example]}}\nnetwork:\n  ethernets:\n    eth0: *c\n    eth1: *c\n"},
		want: []*Interface{
			{ID: "eth0", Renderer: "networkd", DHCP4: true, Search: []string{"a.example"}},
			{ID: "eth1", Renderer: "networkd", DHCP4: true, Search: []string{"a.example"}},
		},
	},
	{
		name:    "empty and comment-only files",
		netplan: true,
		docs:    []string{"", "# nothing\n", "network: {ethernets: {eth0: {}}}\n"},
		want:    []*Interface{{ID: "eth0", Renderer: "networkd"}},
	},
	{
		name:    "only the first document counts",
		netplan: true,
		docs:    []string{"network: {ethernets: {eth0: {}}}\n---\nnetwork: {ethernets: {eth1: {dhcp4: maybe}}}\n"},
		want:    []*Interface{{ID: "eth0", Renderer: "networkd"}},
	},
	{
		name: "unknown keys are no error",
		docs: []string{"foo: 1\nnetwork:\n  openvswitch: {}\n  tokens: [a]\n  ethernets:\n    eth0: {wakeonlan: true, future-key: {x: 1}, interfaces: [bogus]}\n"},
		want: []*Interface{{ID: "eth0", Renderer: "networkd"}},
	},
}

func TestParseSemantics(t *testing.T) {
	ignore := cmp.FilterPath(func(p cmp.Path) bool {
		switch p.Last().String() {
		case ".Files", ".Line", ".Type", ".MatchName":
			return true
		}
		return false
	}, cmp.Ignore())
	for _, tt := range semanticCases {
		t.Run(tt.name, func(t *testing.T) {
			cfg := parseIfaces(t, tt.docs...)
			if diff := cmp.Diff(tt.want, cfg.Interfaces, cmpAddr, ignore); diff != "" {
				t.Errorf("Interfaces (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLinkOnEthernetIsChecked(t *testing.T) {
	// link: on an ethernet is an SR-IOV PF reference, checked like a VLAN's.
	_, err := Parse([]Doc{{Path: pathA, Data: []byte("network: {ethernets: {eth0: {link: eth9}}}\n")}})
	want := pathA + ":1:36: eth0: interface 'eth9' is not defined"
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %s", err, want)
	}
}

func TestMatchNameShortcut(t *testing.T) {
	cfg := parseIfaces(t,
		"network:\n  ethernets:\n    eth0: {}\n    eth1: {match: {macaddress: \"00:11:22:33:44:55\"}}\n  wifis:\n    wl0: {}\n  bonds:\n    bond0: {}\n",
		"network:\n  ethernets:\n    eth0: {match: {driver: virtio_net}}\n    eth1: {dhcp4: true}\n",
	)
	got := map[string]string{}
	for _, i := range cfg.Interfaces {
		got[i.ID] = i.MatchName
	}
	// Physical types first seen without match: are matched by their ID,
	// and keep it; virtual ones are not matched at all.
	want := map[string]string{"eth0": "eth0", "eth1": "", "wl0": "wl0", "bond0": ""}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("MatchName (-want +got):\n%s", diff)
	}
}

func TestRootMerge(t *testing.T) {
	cfg := parseIfaces(t,
		"# head\nnetwork:\n  version: 2\n  ethernets:\n    eth0:\n      dhcp4: true\n      addresses: [10.0.0.1/24]\n      x-vendor: {a: 1, list: [1]}\n",
		"network:\n  ethernets:\n    eth0:\n      dhcp4: false\n      addresses: [10.0.0.1/24, 10.0.0.2/24]\n      x-vendor: {b: 2, list: [2]}\n    eth1: {optional: true}\n  bonds: {}\n",
		"network:\n  ethernets:\n    eth0:\n      x-vendor: replaced\nother: &o [1]\nagain: *o\n",
	)
	got, err := yaml.Marshal(cfg.Root)
	if err != nil {
		t.Fatal(err)
	}
	want := `# head
network:
    version: 2
    ethernets:
        eth0:
            dhcp4: false
            addresses: [10.0.0.1/24, 10.0.0.1/24, 10.0.0.2/24]
            x-vendor: replaced
        eth1: {optional: true}
    bonds: {}
other: [1]
again: [1]
`
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("Root (-want +got):\n%s", diff)
	}
}

func TestRootIsIndependentOfInput(t *testing.T) {
	data := []byte("network: {ethernets: {eth0: {search: [a]}}}\n")
	cfg, err := Parse([]Doc{{Path: pathA, Data: data}, {Path: pathB, Data: data}})
	if err != nil {
		t.Fatal(err)
	}
	// Editing the merged tree (as the writer will) must not reach back.
	cfg.Root.Content[0].Content[0].Value = "changed"
	out, err := yaml.Marshal(cfg.Root)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "search: [a, a]") {
		t.Errorf("Root = %s, want the two search lists appended", out)
	}
}

func TestBool(t *testing.T) {
	for _, tt := range []struct {
		in        string
		value, ok bool
	}{
		{"true", true, true}, {"TRUE", true, true}, {"on", true, true}, {"Yes", true, true}, {"y", true, true},
		{"false", false, true}, {"Off", false, true}, {"NO", false, true}, {"n", false, true},
		{"", false, false}, {"1", false, false}, {"0", false, false}, {"~", false, false}, {"null", false, false}, {"yes ", false, false},
	} {
		v, ok := Bool(tt.in)
		if v != tt.value || ok != tt.ok {
			t.Errorf("Bool(%q) = %v, %v; want %v, %v", tt.in, v, ok, tt.value, tt.ok)
		}
	}
}

func TestStrtoull(t *testing.T) {
	for _, tt := range []struct {
		in  string
		n   uint64
		end int
	}{
		{"", 0, 0}, {"0", 0, 1}, {"1500", 1500, 4}, {" 8", 8, 2}, {"8x", 8, 1}, {"+7", 7, 2},
		{"-0", 0, 2}, {"-1", 1<<64 - 1, 2}, {"x", 0, 0}, {"-", 0, 0},
		{"99999999999999999999", 1<<64 - 1, 20}, {"18446744073709551615", 1<<64 - 1, 20},
	} {
		n, end := strtoull(tt.in)
		if n != tt.n || end != tt.end {
			t.Errorf("strtoull(%q) = %d, %d; want %d, %d", tt.in, n, end, tt.n, tt.end)
		}
	}
}

// largeNetplanFile is close to MaxFileSize, with long lists and many keys: the parts that
// deduplicate or look keys up must not go quadratic.
func largeNetplanFile() (data []byte, nIfaces, nAddrs int) {
	var b strings.Builder
	b.WriteString("network:\n  ethernets:\n")
	for ; b.Len() < MaxFileSize/2; nIfaces++ {
		fmt.Fprintf(&b, "    e%d: {addresses: [10.%d.%d.1/24]}\n", nIfaces, nIfaces/250%250, nIfaces%250)
	}
	b.WriteString("  bonds:\n    bond0:\n      addresses:\n")
	for ; b.Len() < MaxFileSize-100; nAddrs++ {
		fmt.Fprintf(&b, "        - 10.%d.%d.%d/8\n", nAddrs/62500%250, nAddrs/250%250, nAddrs%250)
	}
	return []byte(b.String()), nIfaces, nAddrs
}

// TestLargeFile: two files near the size limit merge correctly (each address once). How long it
// takes is BenchmarkParseLargeFile's figure, not an assertion here: a timed test fails on a loaded
// machine (it took 71 s under -race beside other work) without telling anything about the code.
func TestLargeFile(t *testing.T) {
	data, nIfaces, nAddrs := largeNetplanFile()
	cfg, err := Parse([]Doc{{Path: pathA, Data: data}, {Path: pathB, Data: data}})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(cfg.Interfaces); n != nIfaces+1 {
		t.Errorf("%d interfaces, want %d", n, nIfaces+1)
	}
	if n := len(cfg.Interface("bond0").Addresses); n != nAddrs {
		t.Errorf("bond0 has %d addresses, want %d (each once)", n, nAddrs)
	}
}

// BenchmarkParseLargeFile: the parse of two files near MaxFileSize (make bench prints it); linear
// parsing keeps it well under a second without -race.
func BenchmarkParseLargeFile(b *testing.B) {
	data, _, _ := largeNetplanFile()
	b.SetBytes(int64(2 * len(data)))
	for b.Loop() {
		if _, err := Parse([]Doc{{Path: pathA, Data: data}, {Path: pathB, Data: data}}); err != nil {
			b.Fatal(err)
		}
	}
}
