package systemd

import (
	"encoding/json"
	"net/netip"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/nodedns/nodedns/internal/testutil/golden"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/nodedns/nodedns/internal/nodefs"
)

// Files as systemd-networkd 252 and systemd-resolved 252 wrote them in a
// namespace on Debian 12 (networkd with a static .network on a bridge;
// resolved after SetLinkDNSEx/SetLinkDomains/SetLinkDefaultRoute over D-Bus),
// plus a DHCP link shaped like seed 001's enp1s0.
const (
	networkdUnmanaged = `# This is private data. Do not parse.
ADMIN_STATE=unmanaged
OPER_STATE=carrier
CARRIER_STATE=carrier
ADDRESS_STATE=off
IPV4_ADDRESS_STATE=off
IPV6_ADDRESS_STATE=off
`
	networkdStatic = `# This is private data. Do not parse.
ADMIN_STATE=configured
OPER_STATE=routable
CARRIER_STATE=carrier
ADDRESS_STATE=routable
IPV4_ADDRESS_STATE=routable
IPV6_ADDRESS_STATE=degraded
ONLINE_STATE=online
REQUIRED_FOR_ONLINE=yes
REQUIRED_OPER_STATE_FOR_ONLINE=degraded
REQUIRED_FAMILY_FOR_ONLINE=any
ACTIVATION_POLICY=up
NETWORK_FILE=/run/systemd/network/br0.network
DNS=169.254.25.10 [2001:db8::53]:5353 192.168.1.1#dns.example
NTP=
SIP=
DOMAINS=example.org
ROUTE_DOMAINS=cluster.local
LLMNR=yes
MDNS=no
DHCP6_CLIENT_DUID=DUID-EN/Vendor:0000ab110033bdebf95e192c
`
	networkdDHCP = `# This is private data. Do not parse.
ADMIN_STATE=configured
OPER_STATE=routable
CARRIER_STATE=carrier
ADDRESS_STATE=routable
IPV4_ADDRESS_STATE=routable
IPV6_ADDRESS_STATE=degraded
ONLINE_STATE=online
REQUIRED_FOR_ONLINE=yes
REQUIRED_OPER_STATE_FOR_ONLINE=degraded
REQUIRED_FAMILY_FOR_ONLINE=any
ACTIVATION_POLICY=up
NETWORK_FILE=/run/systemd/network/10-netplan-enp1s0.network
NETWORK_FILE_DROPINS=""
DNS=192.168.1.1
NTP=
SIP=
DOMAINS=example.org
ROUTE_DOMAINS=
LLMNR=yes
MDNS=no
DHCP4_ADDRESS=192.168.1.26
DHCP_LEASE=/run/systemd/netif/leases/2
`
	resolvedUser = `# This is private data. Do not parse.
LLMNR=no
MDNS=no
DEFAULT_ROUTE=no
SERVERS=169.254.25.10 fe80::1%5 192.168.1.1:5353#dns.example
DOMAINS=example.org ~cluster.local ~.
`
)

// sysNet lays out root/sys/class/net like sysfs: NAME is a relative symlink
// into /sys/devices with an ifindex file.
func sysNet(names map[string]int) map[string]string {
	files := map[string]string{}
	for name, idx := range names {
		files["/sys/devices/virtual/net/"+name+"/ifindex"] = strconv.Itoa(idx) + "\n"
		files["/sys/class/net/"+name] = "->../../devices/virtual/net/" + name
	}
	return files
}

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func TestLoadLinkStates(t *testing.T) {
	const (
		nd = "/run/systemd/netif/links/"
		rs = "/run/systemd/resolve/netif/"
	)
	tests := []struct {
		name      string
		files     map[string]string
		want      []LinkState
		wantWarns []Warning
	}{
		{
			name: "nothing there",
		},
		{
			name: "seed 001: DHCP link managed by networkd, domain from the lease",
			files: merge(sysNet(map[string]int{"lo": 1, "enp1s0": 2}), map[string]string{
				nd + "1": networkdUnmanaged,
				nd + "2": networkdDHCP,
			}),
			want: []LinkState{
				{IfIndex: 1, IfName: "lo", AdminState: "unmanaged", OperState: "carrier", Source: nd + "1", Files: []string{nd + "1"}},
				{
					IfIndex: 2, IfName: "enp1s0",
					DNS:             addrs("192.168.1.1"),
					Domains:         []Domain{{Name: "example.org"}},
					NetworkdManaged: true,
					NetworkFile:     "/run/systemd/network/10-netplan-enp1s0.network",
					AdminState:      "configured", OperState: "routable",
					DHCPLease: "/run/systemd/netif/leases/2",
					Source:    nd + "2", Files: []string{nd + "2"},
				},
			},
		},
		{
			name: "static networkd link: search then route domains, ports and names dropped from DNS",
			files: map[string]string{
				nd + "4": networkdStatic,
			},
			want: []LinkState{{
				IfIndex:         4,
				DNS:             addrs("169.254.25.10", "2001:db8::53", "192.168.1.1"),
				Domains:         []Domain{{Name: "example.org"}, {Name: "cluster.local", RoutingOnly: true}},
				NetworkdManaged: true,
				NetworkFile:     "/run/systemd/network/br0.network",
				AdminState:      "configured", OperState: "routable",
				Source: nd + "4", Files: []string{nd + "4"},
			}},
		},
		{
			name: "resolved user settings on a link networkd does not manage",
			files: merge(sysNet(map[string]int{"nodelocaldns": 5}), map[string]string{
				nd + "5": networkdUnmanaged,
				rs + "5": resolvedUser,
			}),
			want: []LinkState{{
				IfIndex: 5, IfName: "nodelocaldns",
				DNS:        addrs("169.254.25.10", "fe80::1", "192.168.1.1"),
				Domains:    []Domain{{Name: "example.org"}, {Name: "cluster.local", RoutingOnly: true}, {Name: ".", RoutingOnly: true}},
				AdminState: "unmanaged", OperState: "carrier",
				Source: rs + "5", Files: []string{nd + "5", rs + "5"},
			}},
		},
		{
			name: "resolved user settings without networkd; servers bound to other links are skipped",
			files: map[string]string{
				rs + "7": "SERVERS=10.0.0.1 fe80::2%9 fe80::3%7 10.0.0.1:53 bogus\nDOMAINS=a.example ~a.example b..c\n",
			},
			want: []LinkState{{
				IfIndex: 7,
				DNS:     addrs("10.0.0.1", "fe80::3"),
				Domains: []Domain{{Name: "a.example", RoutingOnly: true}},
				Source:  rs + "7", Files: []string{rs + "7"},
			}},
			wantWarns: []Warning{
				{rs + "7", 1, `failed to load DNS server "fe80::2%9", ignoring: interface 9 is not this link`},
				{rs + "7", 1, `failed to load DNS server "bogus", ignoring: invalid address "bogus"`},
				{rs + "7", 2, `failed to load search domain "b..c", ignoring: empty label`},
			},
		},
		{
			name: "a managed link ignores resolved's stale user file",
			files: map[string]string{
				nd + "2": networkdDHCP,
				rs + "2": resolvedUser,
			},
			want: []LinkState{{
				IfIndex:         2,
				DNS:             addrs("192.168.1.1"),
				Domains:         []Domain{{Name: "example.org"}},
				NetworkdManaged: true,
				NetworkFile:     "/run/systemd/network/10-netplan-enp1s0.network",
				AdminState:      "configured", OperState: "routable",
				DHCPLease: "/run/systemd/netif/leases/2",
				Source:    nd + "2", Files: []string{nd + "2", rs + "2"},
			}},
			wantWarns: []Warning{{rs + "2", 0, "ignored: systemd-networkd manages this link (ADMIN_STATE=configured), so systemd-resolved takes its DNS settings from " + nd + "2"}},
		},
		{
			name: "every admin state but pending, initialized and unmanaged is managed",
			files: map[string]string{
				nd + "1": "ADMIN_STATE=pending\n",
				nd + "2": "ADMIN_STATE=initialized\n",
				nd + "3": "ADMIN_STATE=configuring\nDNS=10.0.0.3\n",
				nd + "4": "ADMIN_STATE=failed\n",
				nd + "5": "ADMIN_STATE=linger\n",
				nd + "6": "OPER_STATE=off\n",
			},
			want: []LinkState{
				{IfIndex: 1, AdminState: "pending", Source: nd + "1", Files: []string{nd + "1"}},
				{IfIndex: 2, AdminState: "initialized", Source: nd + "2", Files: []string{nd + "2"}},
				{IfIndex: 3, AdminState: "configuring", NetworkdManaged: true, DNS: addrs("10.0.0.3"), Source: nd + "3", Files: []string{nd + "3"}},
				{IfIndex: 4, AdminState: "failed", NetworkdManaged: true, Source: nd + "4", Files: []string{nd + "4"}},
				{IfIndex: 5, AdminState: "linger", NetworkdManaged: true, Source: nd + "5", Files: []string{nd + "5"}},
				{IfIndex: 6, OperState: "off", Source: nd + "6", Files: []string{nd + "6"}},
			},
		},
		{
			name: "one bad networkd entry drops the whole list, as resolved does",
			files: map[string]string{
				nd + "3": "ADMIN_STATE=configured\nDNS=10.0.0.1 nonsense\nDOMAINS=ok.example\nROUTE_DOMAINS=bad..example\n",
			},
			want: []LinkState{{IfIndex: 3, AdminState: "configured", NetworkdManaged: true, Source: nd + "3", Files: []string{nd + "3"}}},
			wantWarns: []Warning{
				{nd + "3", 2, `bad DNS entry "nonsense" (invalid address "nonsense"): systemd-resolved drops all DNS servers of this link`},
				{nd + "3", 4, `bad domain "bad..example" (empty label): systemd-resolved drops all domains of this link`},
			},
		},
		{
			// parse_env_file (env-file.c 252) is how both daemons read these files back.
			name: "the env-file grammar: a CR ends a line, a backslash continues one, quoted parts join; a file not UTF-8 clean is refused whole",
			files: merge(sysNet(map[string]int{"eth4": 4, "eth5": 5}), map[string]string{
				nd + "4": "ADMIN_STATE=configured\rDNS=10.0.0.4 \\\n10.0.0.44\nDOMAINS=\"a.example\"' b.example'\n",
				rs + "5": "SERVERS=10.0.0.5\nDOMAINS=caf\xe9.example\n",
			}),
			want: []LinkState{{IfIndex: 4, IfName: "eth4", AdminState: "configured", NetworkdManaged: true, DNS: addrs("10.0.0.4", "10.0.0.44"),
				Domains: []Domain{{Name: "a.example"}, {Name: "b.example"}}, Source: nd + "4", Files: []string{nd + "4"}}},
			wantWarns: []Warning{{rs + "5", 2, "skipped: not UTF-8 clean, so systemd's parse_env_file refuses the whole file"}},
		},
		{
			// sd-network splits at WHITESPACE (space, tab, CR, LF) only: a no-break space or a form
			// feed is part of the word, which resolved then refuses with the whole list.
			name: "networkd's lists split at blanks only",
			files: map[string]string{
				nd + "6": "ADMIN_STATE=configured\nDNS=10.0.0.6\u00a010.0.0.66\nDOMAINS=a.example\fb.example\nROUTE_DOMAINS=r.example\tq.example\n",
			},
			want: []LinkState{{IfIndex: 6, AdminState: "configured", NetworkdManaged: true, Source: nd + "6", Files: []string{nd + "6"}}},
			wantWarns: []Warning{
				{nd + "6", 2, `bad DNS entry "10.0.0.6\u00a010.0.0.66" (invalid address "10.0.0.6\u00a010.0.0.66"): systemd-resolved drops all DNS servers of this link`},
				{nd + "6", 3, "bad domain \"a.example\\fb.example\" (control character in domain name): systemd-resolved drops all domains of this link"},
			},
		},
		{
			name: "bad files are reported, odd names ignored",
			files: map[string]string{
				nd + "8":      "dir",
				nd + ".tmp12": "ADMIN_STATE=configured\n",
				nd + "eth0":   "ADMIN_STATE=configured\n",
				nd + "09":     "ADMIN_STATE=configured\n",
				rs + "9":      "SERVERS=\"10.0.0.9\"\nDOMAINS='x.example'\n  # comment\nnot a pair\n",
			},
			want: []LinkState{{IfIndex: 9, DNS: addrs("10.0.0.9"), Domains: []Domain{{Name: "x.example"}}, Source: rs + "9", Files: []string{rs + "9"}}},
			wantWarns: []Warning{
				{nd + "8", 0, "skipped: not a regular file but a directory"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			writeTree(t, root, tt.files)
			got, warns := LoadLinkStates(nodefs.NewReader(root))
			if diff := cmp.Diff(tt.want, got, cmpAddr, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("LoadLinkStates states mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantWarns, warns, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("LoadLinkStates warnings mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseEnvFile(t *testing.T) {
	vars, lines, bad := ParseStateFile([]byte("# c\n; c\n A = 1 \nB=\"x \\\" y\"\nC='a\\b'\nD=a\\ b\nE=\nnokey\n=v\nA=2\r\n"))
	if bad != 0 {
		t.Errorf("ParseStateFile: bad line %d", bad)
	}
	wantVars := map[string]string{"A": "2", "B": `x " y`, "C": `a\b`, "D": "a b", "E": ""}
	wantLines := map[string]int{"A": 10, "B": 4, "C": 5, "D": 6, "E": 7}
	if diff := cmp.Diff(wantVars, vars); diff != "" {
		t.Errorf("ParseStateFile vars mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantLines, lines); diff != "" {
		t.Errorf("ParseStateFile lines mismatch (-want +got):\n%s", diff)
	}
}

// TestSeed001NodeGolden reads a whole node shaped like seed 001 (kubespray's
// resolved drop-in, a DHCP link with example.org, node-local-dns's
// interface) and compares everything read with a golden file.
func TestSeed001NodeGolden(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, merge(sysNet(map[string]int{"lo": 1, "enp1s0": 2, "nodelocaldns": 3}), map[string]string{
		"/etc/systemd/resolved.conf":                  "#  This file is part of systemd.\n[Resolve]\n#DNS=\n#FallbackDNS=\n#Domains=\n#DNSStubListener=yes\n",
		"/etc/systemd/resolved.conf.d/kubespray.conf": "[Resolve]\nDNS=169.254.25.10\n",
		"/run/systemd/netif/links/1":                  networkdUnmanaged,
		"/run/systemd/netif/links/2":                  networkdDHCP,
		"/run/systemd/netif/links/3":                  networkdUnmanaged,
	}))
	cfg := LoadResolvedConfig(nodefs.NewReader(root))
	links, warns := LoadLinkStates(nodefs.NewReader(root))
	got, err := json.MarshalIndent(struct {
		Resolved     *ResolvedConfig
		Links        []LinkState
		LinkWarnings []Warning
	}{cfg, links, warns}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	golden.Check(t, filepath.Join("testdata", "seed001-node.golden.json"), got)
}

// FuzzLinkState feeds arbitrary bytes to the per-link state reader (the KEY=VALUE files networkd and
// resolved write under /run): it must never panic, and every server and domain it keeps must be
// valid (a parsed address, a non-empty domain).
func FuzzLinkState(f *testing.F) {
	f.Add([]byte(networkdDHCP))
	f.Add([]byte("DNS=169.254.25.10 10.0.0.2%eth0#dns.example\nDOMAINS=~corp example.org\nDEFAULT_ROUTE=yes\n"))
	f.Add([]byte("A=\"x \\\" y\nB='a\\b'\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		root := t.TempDir()
		writeTree(t, root, map[string]string{
			"/run/systemd/netif/links/2":   string(data),
			"/run/systemd/resolve/netif/3": string(data),
		})
		links, _ := LoadLinkStates(nodefs.NewReader(root))
		for _, l := range links {
			for _, a := range l.DNS {
				if !a.IsValid() {
					t.Fatalf("invalid server kept from %q", data)
				}
			}
			for _, d := range l.Domains {
				if d.Name == "" {
					t.Fatalf("empty domain kept from %q", data)
				}
			}
		}
	})
}

// FuzzParseEnvFile feeds arbitrary bytes to the systemd environment-file reader (kubelet.env,
// kubeadm-flags.env): it must never panic, and every variable it returns has a name.
func FuzzParseEnvFile(f *testing.F) {
	f.Add([]byte("KUBELET_ARGS=\"--config=/etc/kubernetes/kubelet-config.yaml --v=2\"\n"))
	f.Add([]byte("export A='x'\\\n y\n# c\n; c\nB=\"a\\\"b\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		vars, _, err := ParseEnvFile("/etc/kubernetes/kubelet.env", data)
		if err != nil {
			return
		}
		for _, v := range vars {
			if v.Name == "" {
				t.Fatalf("a variable without a name from %q", data)
			}
		}
	})
}
