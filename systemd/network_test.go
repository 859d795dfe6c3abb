package systemd

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodedns/nodedns/internal/nodefs"
)

func TestParseNetworkFile(t *testing.T) {
	tests := []struct {
		name, data string
		want       Network
	}{
		{"dhcp yes", "[Match]\nName=en* eth0\n\n[Network]\nDHCP=yes\n", Network{MatchNames: []string{"en*", "eth0"}, DHCP4: true, DHCP6: true}},
		{"ipv4, later wins", "[Network]\nDHCP=ipv6\nDHCP=ipv4\n", Network{DHCP4: true}},
		{"comments and other sections", "# DHCP=yes\n[DHCPv4]\nDHCP=yes\n;x\n[Network]\nAddress=10.0.0.1/24\n", Network{}},
		{"empty Name= resets, continuation", "[Match]\nName=a\nName=\nName=b \\\n c\n[Network]\nDHCP=true\n", Network{MatchNames: []string{"b", "c"}, DHCP4: true, DHCP6: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.want.Path = "/etc/systemd/network/x.network"
			if diff := cmp.Diff(tt.want, ParseNetworkFile(tt.want.Path, []byte(tt.data))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzParseNetworkFile: any bytes parse without panicking, and DHCP is only ever read from [Network].
func FuzzParseNetworkFile(f *testing.F) {
	f.Add([]byte("[Match]\nName=en*\n[Network]\nDHCP=yes\n"))
	f.Add([]byte("[Network]\nDHCP=ipv6\\\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		n := ParseNetworkFile("/etc/systemd/network/f.network", data)
		for _, m := range n.MatchNames {
			if m == "" {
				t.Fatalf("empty match name from %q", data)
			}
		}
	})
}

// TestLoadNetworks: which .network files count (DHCP on; /etc and /run always, a vendor file only
// when a link uses it, never netplan's own rendering), in networkd's order with its shadowing, and
// a file that cannot be read is a warning naming it.
func TestLoadNetworks(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"etc/systemd/network/50-eth0.network":              "[Match]\nName=eth0\n[Network]\nDHCP=yes\n",
		"etc/systemd/network/60-static.network":            "[Match]\nName=eth1\n[Network]\nAddress=10.0.0.1/24\n",
		"run/systemd/network/10-netplan-eth2.network":      "[Match]\nName=eth2\n[Network]\nDHCP=ipv4\n",
		"run/systemd/network/40-run.network":               "[Match]\nName=eth3\n[Network]\nDHCP=ipv6\n",
		"lib/systemd/network/80-container-host0.network":   "[Match]\nName=host0\n[Network]\nDHCP=yes\n",
		"lib/systemd/network/99-default.network":           "[Match]\nName=*\n[Network]\nDHCP=yes\n",
		"lib/systemd/network/50-eth0.network":              "[Match]\nName=shadowed\n[Network]\nDHCP=yes\n",
		"etc/systemd/network/70-dir.network":               "dir",
		"etc/systemd/network/50-eth0.network.d/extra.conf": "[Network]\nDHCP=no\n",
	})
	links := []LinkState{{IfIndex: 2, NetworkFile: "/lib/systemd/network/80-container-host0.network"}}
	got, warns := LoadNetworks(nodefs.NewReader(root), links)
	want := []Network{
		{Path: "/run/systemd/network/40-run.network", MatchNames: []string{"eth3"}, DHCP6: true},
		{Path: "/etc/systemd/network/50-eth0.network", MatchNames: []string{"eth0"}, DHCP4: true, DHCP6: true},
		{Path: "/lib/systemd/network/80-container-host0.network", MatchNames: []string{"host0"}, DHCP4: true, DHCP6: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("networks (-want +got):\n%s", diff)
	}
	if len(warns) != 1 || warns[0].Path != "/etc/systemd/network/70-dir.network" {
		t.Errorf("warnings %v, want one naming the directory in place of a .network file", warns)
	}
	if got, _ := LoadNetworks(nodefs.NewReader(t.TempDir()), nil); got != nil {
		t.Errorf("no network directories: %v", got)
	}
}
