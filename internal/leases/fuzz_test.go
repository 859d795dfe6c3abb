package leases

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// addSeeds adds every file of the testdata root whose node path matches keep.
func addSeeds(f *testing.F, keep func(string) bool) {
	f.Helper()
	err := filepath.WalkDir("testdata/root", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !keep(p) {
			return err
		}
		data, err := os.ReadFile(p)
		if err == nil {
			f.Add(data)
		}
		return err
	})
	if err != nil {
		f.Fatal(err)
	}
}

// checkLease is the invariant both fuzz targets share: whatever the input, a
// returned lease has only valid addresses of the right family and sane
// numbers, so nothing downstream can write a broken nameserver or route.
func checkLease(t *testing.T, l Lease, path string) {
	t.Helper()
	if l.Path != path {
		t.Errorf("Path = %q, want %q", l.Path, path)
	}
	if l.Address != (Lease{}).Address {
		if !l.Address.IsValid() || !l.Address.Addr().IsValid() || l.Address.Addr().Zone() != "" {
			t.Errorf("invalid Address %v", l.Address)
		}
		if l.V6 != l.Address.Addr().Is6() {
			t.Errorf("Address %v in a lease with V6=%v", l.Address, l.V6)
		}
	}
	for _, as := range [][]netip.Addr{l.Routers, l.DNS} {
		for _, a := range as {
			if !a.IsValid() || a.Zone() != "" || a.Is6() != l.V6 {
				t.Errorf("invalid address %v (V6=%v)", a, l.V6)
			}
		}
	}
	if l.MTU != 0 && (l.MTU < 68 || l.MTU > 65535) {
		t.Errorf("MTU %d out of range", l.MTU)
	}
	_ = l.Domains()
	_ = l.Current(now)
}

func FuzzParseDhclient(f *testing.F) {
	addSeeds(f, func(p string) bool { return strings.HasSuffix(p, ".leases") || strings.Contains(p, "dhclient-") })
	f.Add([]byte(`lease { option domain-search "a.", "b."; expire never; }`))
	f.Add([]byte("lease6 { ia-na 1 { iaaddr 2001:db8::1 { starts 1; max-life 4294967295; } } }"))
	f.Add([]byte(`lease { option domain-name "\x41\101\"\\"; expire epoch 1; }`))
	const path = "/var/lib/dhcp/dhclient.leases"
	f.Fuzz(func(t *testing.T, data []byte) {
		ls, err := ParseDhclient(data, path)
		if err != nil {
			if ls != nil {
				t.Errorf("leases returned with error %v", err)
			}
			if !strings.HasPrefix(err.Error(), path+":") {
				t.Errorf("error %q does not start with %s:LINE", err, path)
			}
			return
		}
		for _, l := range ls {
			if l.Client != Dhclient || l.Line < 1 {
				t.Errorf("lease with Client %q Line %d", l.Client, l.Line)
			}
			checkLease(t, l, path)
		}
	})
}

func FuzzParseNetworkd(f *testing.F) {
	addSeeds(f, func(p string) bool { return strings.Contains(p, "netif/leases/") || strings.Contains(p, "internal-") })
	f.Add([]byte("ADDRESS=10.0.0.1\nNETMASK=255.255.255.0\nDNS=\"10.0.0.2 10.0.0.3\"\nMTU=1500\n"))
	f.Add([]byte("DOMAINNAME='a b'\nDOMAIN_SEARCH_LIST=a\\ b c\n"))
	const path = "/run/systemd/netif/leases/2"
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := ParseNetworkd(data, path)
		if err != nil {
			if !strings.HasPrefix(err.Error(), path+":") {
				t.Errorf("error %q does not start with %s:LINE", err, path)
			}
			return
		}
		if l.Client != Networkd || l.IfIndex != 2 || l.Line != 0 || l.V6 {
			t.Errorf("lease with Client %q IfIndex %d Line %d V6 %v", l.Client, l.IfIndex, l.Line, l.V6)
		}
		checkLease(t, l, path)
	})
}
