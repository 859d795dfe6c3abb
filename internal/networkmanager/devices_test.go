package networkmanager

import (
	"net/netip"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParseDeviceState reads the file NM 1.42.4 wrote in the sandbox (testdata/device-state-1.42.4,
// copied from /run/NetworkManager/devices/18 with dnsmasq offering 10.66.0.53 and example.org).
func TestParseDeviceState(t *testing.T) {
	data, err := os.ReadFile("testdata/device-state-1.42.4")
	if err != nil {
		t.Fatal(err)
	}
	d, err := ParseDeviceState(DevicesDir+"/18", 18, data)
	if err != nil {
		t.Fatal(err)
	}
	if d.Managed != "true" || d.ConnectionUUID != "5b4c9a46-6b8e-4f0c-9a55-1a2b3c4d5e6f" || d.DHCP6 != nil || len(d.DHCP4) != 13 {
		t.Errorf("state = %+v", d)
	}
	want := DHCPDNS{Servers: []netip.Addr{netip.MustParseAddr("10.66.0.53")}, Search: []string{"example.org"}, DomainName: []string{"example.org"}}
	got := DHCP4DNS(d.DHCP4)
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("DHCP4DNS (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"example.org"}, got.Domains()); diff != "" {
		t.Errorf("Domains (-want +got):\n%s", diff)
	}
}

func TestDHCPDNS(t *testing.T) {
	got := DHCP4DNS(map[string]string{"domain_name_servers": "10.0.0.1 bogus 10.0.0.2", "domain_search": "a.example. b.example", "domain_name": "a.example"})
	if len(got.Servers) != 2 || !cmp.Equal(got.Invalid, []string{"bogus"}) || !cmp.Equal(got.Domains(), []string{"a.example", "b.example"}) {
		t.Errorf("DHCP4DNS = %+v, domains %v", got, got.Domains())
	}
	got = DHCP6DNS(map[string]string{"dhcp6_name_servers": "2001:db8::53", "dhcp6_domain_search": "v6.example"})
	if len(got.Servers) != 1 || !cmp.Equal(got.Domains(), []string{"v6.example"}) {
		t.Errorf("DHCP6DNS = %+v", got)
	}
}

func TestLoadDeviceStates(t *testing.T) {
	data, _ := os.ReadFile("testdata/device-state-1.42.4")
	node := MapFS{
		DevicesDir + "/18": string(data),
		DevicesDir + "/2":  "[device]\nmanaged=false\n",
		DevicesDir + "/x":  "ignored",
		DevicesDir + "/3":  "bad line\n",
	}
	states, errs := LoadDeviceStates(node)
	if len(states) != 2 || states[0].IfIndex != 2 || states[1].IfIndex != 18 || len(errs) != 1 {
		t.Errorf("states %+v, errors %v", states, errs)
	}
}

func FuzzParseDeviceState(f *testing.F) {
	data, _ := os.ReadFile("testdata/device-state-1.42.4")
	f.Add(data)
	f.Add([]byte("[dhcp6]\ndhcp6.dhcp6_name_servers=::1 x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := ParseDeviceState("f", 1, data)
		if err != nil {
			return
		}
		for _, a := range append(DHCP4DNS(d.DHCP4).Servers, DHCP6DNS(d.DHCP6).Servers...) {
			if !a.IsValid() {
				t.Fatalf("invalid server from %q", data)
			}
		}
		for _, dom := range DHCP4DNS(d.DHCP4).Domains() {
			if dom == "" {
				t.Fatal("empty domain")
			}
		}
	})
}
