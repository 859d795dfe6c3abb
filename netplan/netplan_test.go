package netplan

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodedns/nodedns/internal/testutil/golden"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/nodedns/nodedns/internal/nodefs"
	"go.yaml.in/yaml/v3"
)

var cmpAddr = cmp.Comparer(func(a, b netip.Addr) bool { return a == b })

// load is what the node's row asks for with no file set apart: every netplan file merged.
func load(r nodefs.Reader) (*Config, error) {
	all, err, _, _ := LoadSplit(r, "")
	return all, err
}

func addrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, a := range s {
		out[i] = netip.MustParseAddr(a)
	}
	return out
}

const (
	cloudInit = "/etc/netplan/50-cloud-init.yaml"
	installer = "/etc/netplan/00-installer-config.yaml"
	netcfg    = "/etc/netplan/01-netcfg.yaml"
)

// fixtures are the node trees under testdata/nodes, modelled on real files,
// with what netplan 0.106 makes of them (checked against `netplan get` by
// TestAgainstNetplanGet where netplan is installed).
var fixtures = []struct {
	name     string
	files    []string
	shadowed []string
	want     []*Interface
	memberOf map[string]string
}{
	{
		name:  "cloud-init", // Ubuntu 22.04 cloud image
		files: []string{cloudInit},
		want: []*Interface{{
			ID: "eth0", Type: "ethernets", Renderer: "networkd", DHCP4: true,
			MatchMAC: "06:5e:2a:4b:c1:0f", SetName: "eth0",
			Files: []string{cloudInit}, Line: 8,
		}},
	},
	{
		name:  "cloud-init-2004", // Ubuntu 20.04 EC2 image
		files: []string{cloudInit},
		want: []*Interface{{
			ID: "ens5", Type: "ethernets", Renderer: "networkd", DHCP4: true,
			MatchMAC: "0a:1b:2c:3d:4e:5f", SetName: "ens5",
			Files: []string{cloudInit}, Line: 8,
		}},
	},
	{
		name:  "cloud-init-2404", // Ubuntu 24.04 EC2 image with IPv6: both families, route metrics
		files: []string{cloudInit},
		want: []*Interface{{
			ID: "ens5", Type: "ethernets", Renderer: "networkd", DHCP4: true, DHCP6: true,
			MatchMAC: "0a:ff:d1:3e:5a:21", SetName: "ens5",
			DHCP4Overrides: map[string]any{"route-metric": 100},
			DHCP6Overrides: map[string]any{"route-metric": 100},
			Files:          []string{cloudInit}, Line: 8,
		}},
	},
	{
		name:  "subiquity", // seed 003: static enp0s3 with search example.com
		files: []string{installer},
		want: []*Interface{{
			ID: "enp0s3", Type: "ethernets", Renderer: "networkd", MatchName: "enp0s3",
			Addresses: []string{"10.0.2.10/24"}, Gateway4: "10.0.2.1",
			Nameservers: addrs("10.0.2.6"), Search: []string{"example.com"},
			Files: []string{installer}, Line: 4,
		}},
	},
	{
		name:  "two-nic",
		files: []string{cloudInit},
		want: []*Interface{{
			ID: "ens3", Type: "ethernets", Renderer: "networkd", DHCP4: true,
			MatchMAC: "fa:16:3e:5d:1a:01", SetName: "ens3", MTU: 9000,
			Files: []string{cloudInit}, Line: 6,
		}, {
			ID: "ens4", Type: "ethernets", Renderer: "networkd", DHCP4: true,
			MatchMAC: "fa:16:3e:5d:1a:02", SetName: "ens4",
			DHCP4Overrides: map[string]any{"use-dns": false, "use-domains": "false", "route-metric": 200},
			Files:          []string{cloudInit}, Line: 13,
		}},
	},
	{
		name:  "bond",
		files: []string{netcfg},
		want: []*Interface{{
			ID: "bond0", Type: "bonds", Renderer: "networkd", DHCP4: true, MTU: 9000,
			Members: []string{"eno1", "eno2"}, Files: []string{netcfg}, Line: 13,
		}, {
			ID: "eno1", Type: "ethernets", Renderer: "networkd", MatchDriver: "ixgbe",
			Files: []string{netcfg}, Line: 6,
		}, {
			ID: "eno2", Type: "ethernets", Renderer: "networkd", MatchName: "eno2",
			Files: []string{netcfg}, Line: 10,
		}},
		memberOf: map[string]string{"eno1": "bond0", "eno2": "bond0", "bond0": ""},
	},
	{
		name:  "vlan",
		files: []string{netcfg},
		want: []*Interface{{
			ID: "enp1s0", Type: "ethernets", Renderer: "networkd", DHCP4: true, MatchName: "enp1s0",
			DHCP4Overrides: map[string]any{"use-domains": "route"},
			Files:          []string{netcfg}, Line: 4,
		}, {
			ID: "vlan100", Type: "vlans", Renderer: "networkd", Link: "enp1s0",
			Addresses: []string{"192.168.100.10/24", "2001:db8:100::10/64"},
			Gateway6:  "2001:db8:100::1",
			// IPv4 first: netplan keeps two lists.
			Nameservers: addrs("192.168.100.53", "2001:db8:100::53"),
			Search:      []string{"storage.example.net"},
			Files:       []string{netcfg}, Line: 9,
		}},
		memberOf: map[string]string{"enp1s0": ""},
	},
	{
		name: "nm-laptop", // Ubuntu desktop: global NM, and an NM-written wifi file
		files: []string{
			"/etc/netplan/01-network-manager-all.yaml",
			"/etc/netplan/90-NM-7c5a4f2e-9c1d-4e0b-8a55-3f1f0c1f6b2d.yaml",
		},
		want: []*Interface{{
			ID: "NM-7c5a4f2e-9c1d-4e0b-8a55-3f1f0c1f6b2d", Type: "wifis", Renderer: "NetworkManager",
			MatchName: "wlp0s20f3", DHCP4: true, DHCP6: true,
			Files: []string{"/etc/netplan/90-NM-7c5a4f2e-9c1d-4e0b-8a55-3f1f0c1f6b2d.yaml"}, Line: 4,
		}},
	},
	{
		name: "shadow", // /run shadows /etc shadows /lib; other names still read
		files: []string{
			"/lib/netplan/00-base.yaml",
			"/run/netplan/50-cloud-init.yaml",
			"/etc/netplan/60-mtu.yaml",
		},
		shadowed: []string{"/lib/netplan/50-cloud-init.yaml", "/etc/netplan/50-cloud-init.yaml"},
		want: []*Interface{{
			ID: "eth0", Type: "ethernets", Renderer: "networkd", DHCP6: true,
			// 00-base had no match:, so netplan already matched by name.
			MatchName: "eth0", MatchMAC: "52:54:00:6b:3c:58", SetName: "eth0", MTU: 1450,
			Addresses: []string{"192.0.2.15/24"}, Nameservers: addrs("192.0.2.53"),
			Files: []string{"/lib/netplan/00-base.yaml", "/run/netplan/50-cloud-init.yaml", "/etc/netplan/60-mtu.yaml"},
			Line:  4,
		}},
	},
	{
		name:  "search-append",
		files: []string{installer, "/etc/netplan/90-corp.yaml"},
		want: []*Interface{{
			ID: "enp0s3", Type: "ethernets", Renderer: "networkd", MatchName: "enp0s3",
			// Addresses are deduplicated; nameservers and search are not.
			Addresses: []string{"10.0.2.10/24", "10.0.2.11/24"}, Gateway4: "10.0.2.1",
			Nameservers: addrs("10.0.2.6", "10.0.2.7", "10.0.2.6"),
			Search:      []string{"example.com", "corp.example.com", "example.com"},
			Files:       []string{installer, "/etc/netplan/90-corp.yaml"}, Line: 4,
		}},
	},
	{
		name:  "forward-ref", // bond before its ports: the file is applied twice
		files: []string{"/etc/netplan/10-bond.yaml"},
		want: []*Interface{{
			ID: "bond0", Type: "bonds", Renderer: "networkd", DHCP4: true,
			Members: []string{"enp3s0f1", "enp3s0f0"}, Addresses: []string{"10.10.0.5/24"},
			Search: []string{"lab.example", "lab.example"},
			Files:  []string{"/etc/netplan/10-bond.yaml"}, Line: 6,
		}, {
			ID: "enp3s0f0", Type: "ethernets", Renderer: "networkd", MatchName: "enp3s0f0",
			Files: []string{"/etc/netplan/10-bond.yaml"}, Line: 13,
		}, {
			ID: "enp3s0f1", Type: "ethernets", Renderer: "networkd", MatchName: "enp3s0f1",
			Files: []string{"/etc/netplan/10-bond.yaml"}, Line: 14,
		}},
		memberOf: map[string]string{"enp3s0f0": "bond0", "enp3s0f1": "bond0"},
	},
	{
		name:  "renderers",
		files: []string{"/etc/netplan/10-a.yaml", "/etc/netplan/20-b.yaml"},
		want: []*Interface{{
			// Created before the type-level renderer; the global one of the
			// last file applies.
			ID: "eth0", Type: "ethernets", Renderer: "networkd", DHCP4: true, DHCP6: true, MatchName: "eth0",
			Files: []string{"/etc/netplan/10-a.yaml", "/etc/netplan/20-b.yaml"}, Line: 4,
		}, {
			ID: "eth1", Type: "ethernets", Renderer: "NetworkManager", DHCP4: true, MatchName: "eth1",
			Files: []string{"/etc/netplan/10-a.yaml", "/etc/netplan/20-b.yaml"}, Line: 6,
		}, {
			// Created after the type-level renderer of its block.
			ID: "eth2", Type: "ethernets", Renderer: "NetworkManager", DHCP6: true, MatchName: "eth2",
			Files: []string{"/etc/netplan/20-b.yaml"}, Line: 6,
		}},
	},
}

func TestLoadFixtures(t *testing.T) {
	for _, f := range fixtures {
		t.Run(f.name, func(t *testing.T) {
			root := filepath.Join("testdata", "nodes", f.name)
			cfg, err := load(nodefs.NewReader(root))
			if err != nil {
				t.Fatalf("load(nodefs.NewReader(%s)): %v", root, err)
			}
			if diff := cmp.Diff(f.files, cfg.Files); diff != "" {
				t.Errorf("Files (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(f.shadowed, cfg.Shadowed, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Shadowed (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(f.want, cfg.Interfaces, cmpAddr); diff != "" {
				t.Errorf("Interfaces (-want +got):\n%s", diff)
			}
			for id, want := range f.memberOf {
				if got := cfg.MemberOf(id); got != want {
					t.Errorf("MemberOf(%q) = %q, want %q", id, got, want)
				}
			}
			got, err := yaml.Marshal(cfg.Root)
			if err != nil {
				t.Fatalf("marshal Root: %v", err)
			}
			golden.Check(t, filepath.Join("testdata", "nodes", f.name+".golden.yaml"), got)
		})
	}
}

func TestLoadNoNetplan(t *testing.T) {
	cfg, err := load(nodefs.NewReader(t.TempDir()))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if len(cfg.Files) != 0 || len(cfg.Shadowed) != 0 || len(cfg.Interfaces) != 0 {
		t.Errorf("got %+v, want an empty config", cfg)
	}
	out, err := yaml.Marshal(cfg.Root)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != "{}\n" {
		t.Errorf("Root = %q, want an empty mapping", out)
	}
	if got := cfg.DHCPInterfaces(); len(got) != 0 {
		t.Errorf("DHCPInterfaces = %v, want none", got)
	}
}

func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestLoadSelectsFiles(t *testing.T) {
	root := writeTree(t, map[string]string{
		"etc/netplan/.hidden.yaml":       "network: {ethernets: {hidden0: {}}}\n",
		"etc/netplan/README":             "not yaml: [\n",
		"etc/netplan/50-a.yml":           "network: {ethernets: {yml0: {}}}\n",
		"etc/netplan/50-a.yaml.dpkg-old": "network: {ethernets: {old0: {}}}\n",
		"etc/netplan/B.yaml":             "network: {ethernets: {b0: {}}}\n",
		"run/netplan/a.yaml":             "network: {ethernets: {a0: {}}}\n",
		"lib/netplan/10.yaml":            "network: {ethernets: {x0: {}}}\n",
		"etc/netplan/empty.yaml":         "",
		"etc/netplan/comments.yaml":      "# nothing here\n",
	})
	cfg, err := load(nodefs.NewReader(root))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	// strcmp order by file name, whatever the directory.
	want := []string{"/lib/netplan/10.yaml", "/etc/netplan/B.yaml", "/run/netplan/a.yaml", "/etc/netplan/comments.yaml", "/etc/netplan/empty.yaml"}
	if diff := cmp.Diff(want, cfg.Files); diff != "" {
		t.Errorf("Files (-want +got):\n%s", diff)
	}
	var ids []string
	for _, i := range cfg.Interfaces {
		ids = append(ids, i.ID)
	}
	if diff := cmp.Diff([]string{"a0", "b0", "x0"}, ids); diff != "" {
		t.Errorf("IDs (-want +got):\n%s", diff)
	}
}

func TestLoadErrors(t *testing.T) {
	big := "network: {}\n#" + strings.Repeat("x", MaxFileSize) + "\n"
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{
			name:  "too large",
			files: map[string]string{"etc/netplan/a.yaml": big},
			want:  "/etc/netplan/a.yaml: file is larger than 1048576 bytes",
		},
		{
			name: "bad file after good one",
			files: map[string]string{
				"etc/netplan/01-good.yaml": "network: {ethernets: {eth0: {dhcp4: true}}}\n",
				"run/netplan/02-bad.yaml":  "network:\n  ethernets:\n    eth0:\n      dhcp4: maybe\n",
			},
			want: "/run/netplan/02-bad.yaml:4:14: invalid boolean value 'maybe'",
		},
		{
			name:  "syntax",
			files: map[string]string{"etc/netplan/a.yaml": "network:\n\tethernets: {}\n"},
			want:  "/etc/netplan/a.yaml:2: invalid yaml: found character that cannot start any token",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := load(nodefs.NewReader(writeTree(t, tt.files)))
			if err == nil {
				t.Fatalf("Load = %+v, want error %q", cfg, tt.want)
			}
			if cfg != nil {
				t.Errorf("Load returned a partial config with the error")
			}
			if err.Error() != tt.want {
				t.Errorf("error = %q, want %q", err, tt.want)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Errorf("error %T is not an *Error", err)
			}
		})
	}
}

func TestLoadUnreadable(t *testing.T) {
	root := writeTree(t, map[string]string{})
	// A directory named like a file: netplan's glob returns it and the read
	// fails; so must ours, naming the node path.
	if err := os.MkdirAll(filepath.Join(root, "etc/netplan/dir.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := load(nodefs.NewReader(root))
	var ne *Error
	if !errors.As(err, &ne) || ne.Path != "/etc/netplan/dir.yaml" || !strings.HasPrefix(err.Error(), "/etc/netplan/dir.yaml: cannot read it: ") {
		t.Errorf("Load = %v, want a read error naming /etc/netplan/dir.yaml", err)
	}
}

func TestAccessors(t *testing.T) {
	cfg, err := load(nodefs.NewReader(filepath.Join("testdata", "nodes", "bond")))
	if err != nil {
		t.Fatal(err)
	}
	var dhcp []string
	for _, i := range cfg.DHCPInterfaces() {
		dhcp = append(dhcp, i.ID)
	}
	if diff := cmp.Diff([]string{"bond0"}, dhcp); diff != "" {
		t.Errorf("DHCPInterfaces (-want +got):\n%s", diff)
	}
	if i := cfg.Interface("eno2"); i == nil || i.Type != "ethernets" {
		t.Errorf("Interface(eno2) = %+v", i)
	}
	if i := cfg.Interface("nope"); i != nil {
		t.Errorf("Interface(nope) = %+v, want nil", i)
	}
	if got := cfg.MemberOf("nope"); got != "" {
		t.Errorf("MemberOf(nope) = %q", got)
	}
}
