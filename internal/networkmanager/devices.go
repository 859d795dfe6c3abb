package networkmanager

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// DevicesDir holds NetworkManager's per-device run state, one file per ifindex.
const DevicesDir = "/run/NetworkManager/devices"

// DeviceState is /run/NetworkManager/devices/IFINDEX as NetworkManager 1.42 writes it
// (nm_config_device_state_write): a key file with [device] and, while DHCP holds a lease,
// [dhcp4] and [dhcp6] groups whose keys are the DHCP options prefixed "dhcp4." or "dhcp6." with
// the names and values DHCP4Config.Options shows over D-Bus. Measured on 1.42.4 with dnsmasq:
//
//	[device]
//	managed=true
//	connection-uuid=5b4c9a46-...
//	[dhcp4]
//	dhcp4.domain_name=example.org
//	dhcp4.domain_name_servers=10.66.0.53
//	dhcp4.domain_search=example.org
//	dhcp4.ip_address=10.66.0.81
//	...
//
// NM rewrites it on each lease (a renewal with new options shows within the renewal).
type DeviceState struct {
	Path    string
	IfIndex int
	// Managed is [device] managed ("" when unset: NM did not decide).
	Managed        string
	ConnectionUUID string
	// DHCP4 and DHCP6 are the options by name without the prefix, nil without a lease.
	DHCP4, DHCP6 map[string]string
}

// ParseDeviceState parses one device state file.
func ParseDeviceState(p string, ifindex int, data []byte) (*DeviceState, error) {
	kf, err := ParseKeyFile(p, data)
	if err != nil {
		return nil, err
	}
	d := &DeviceState{Path: p, IfIndex: ifindex}
	get := func(group, key string) string {
		e, ok := kf.Get(group, key)
		if !ok {
			return ""
		}
		v, err := UnescapeValue(e.Value)
		if err != nil {
			return ""
		}
		return v
	}
	if v, ok := ParseBool(get("device", "managed")); ok {
		d.Managed = strconv.FormatBool(v)
	}
	d.ConnectionUUID = get("device", "connection-uuid")
	for _, fam := range []struct {
		name string
		m    *map[string]string
	}{{"dhcp4", &d.DHCP4}, {"dhcp6", &d.DHCP6}} {
		g := kf.Group(fam.name)
		if g == nil {
			continue
		}
		*fam.m = map[string]string{}
		for _, e := range g.Entries {
			name, ok := strings.CutPrefix(e.Key, fam.name+".")
			if !ok {
				continue
			}
			if v, err := UnescapeValue(e.Value); err == nil {
				(*fam.m)[name] = v
			}
		}
	}
	return d, nil
}

// LoadDeviceStates reads every /run/NetworkManager/devices/IFINDEX, by ifindex. A file that does
// not parse is skipped and reported.
func LoadDeviceStates(fsys NodeFS) ([]*DeviceState, []error) {
	names, err := fsys.ReadDir(DevicesDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, []error{fmt.Errorf("list %s: %w", DevicesDir, err)}
	}
	var out []*DeviceState
	var errs []error
	for _, n := range names {
		i, err := strconv.Atoi(n)
		if err != nil || i <= 0 || strconv.Itoa(i) != n {
			continue
		}
		p := path.Join(DevicesDir, n)
		data, err := fsys.ReadFile(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("read %s: %w", p, err))
			continue
		}
		d, err := ParseDeviceState(p, i, data)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, d)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].IfIndex < out[b].IfIndex })
	return out, errs
}

// DHCPDNS is what a DHCP lease says about DNS, from NM's option names (the same over D-Bus and in
// the device state file).
type DHCPDNS struct {
	// Servers: DHCPv4 option 6 (domain_name_servers) or DHCPv6 option 23 (dhcp6_name_servers).
	Servers []netip.Addr
	// Search: DHCPv4 option 119 (domain_search) or DHCPv6 option 24 (dhcp6_domain_search).
	Search []string
	// DomainName: DHCPv4 option 15 (domain_name); NM 1.42 searches it when option 119 is absent.
	DomainName []string
	// Invalid are option words that are not addresses.
	Invalid []string
}

// Domains are the DHCP search domains of the lease (docs/contract.md): Search then DomainName,
// trailing dots dropped, repeated ones once.
func (d DHCPDNS) Domains() []string {
	var out []string
	for _, s := range append(append([]string(nil), d.Search...), d.DomainName...) {
		s = strings.TrimSuffix(s, ".")
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// DHCP4DNS reads DNS from DHCPv4 options as NM names them: space-separated lists.
func DHCP4DNS(opts map[string]string) DHCPDNS {
	return dhcpDNS(opts, "domain_name_servers", "domain_search", "domain_name")
}

// DHCP6DNS reads DNS from DHCPv6 options as NM names them.
func DHCP6DNS(opts map[string]string) DHCPDNS {
	return dhcpDNS(opts, "dhcp6_name_servers", "dhcp6_domain_search", "")
}

func dhcpDNS(opts map[string]string, servers, search, name string) DHCPDNS {
	var d DHCPDNS
	for _, w := range strings.Fields(opts[servers]) {
		if a, err := netip.ParseAddr(w); err == nil {
			d.Servers = append(d.Servers, a)
		} else {
			d.Invalid = append(d.Invalid, w)
		}
	}
	d.Search = strings.Fields(opts[search])
	if name != "" {
		d.DomainName = strings.Fields(opts[name])
	}
	return d
}
