package systemd

import (
	"testing"

	"github.com/google/go-cmp/cmp"
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
