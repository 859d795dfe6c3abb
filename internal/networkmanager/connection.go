package networkmanager

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"path"
	"sort"
	"strings"
)

// Keyfile connection directories of NetworkManager 1.42's keyfile plugin, lowest priority first: a
// profile in /run shadows the one with the same UUID in /etc, which shadows /usr/lib's
// (nms-keyfile-plugin.c).
const (
	LibConnectionsDir = "/usr/lib/NetworkManager/system-connections"
	EtcConnectionsDir = "/etc/NetworkManager/system-connections"
	RunConnectionsDir = "/run/NetworkManager/system-connections"
)

// Storage says which directory a connection profile lives in.
type Storage string

// Storages, lowest priority first.
const (
	StorageLib Storage = "lib"
	StorageEtc Storage = "etc"
	StorageRun Storage = "run"
)

// Connection is what nodedns reads of one keyfile connection profile.
type Connection struct {
	// Path is the node path of the keyfile; Storage its directory.
	Path    string
	Storage Storage
	ID      string
	// UUID is "" when the file has none (NM then derives one from the path; nodedns does not).
	UUID          string
	Type          string
	InterfaceName string
	IPv4, IPv6    IPSettings
	// Warnings are values NM 1.42 ignores (an invalid DNS server, a bad boolean).
	Warnings []Warning
}

// IPSettings are a profile's [ipv4] or [ipv6] DNS settings.
type IPSettings struct {
	// Method is "auto", "manual", "disabled", "link-local", "shared" (ipv4), "ignore", "dhcp"
	// (ipv6); "" when unset (NM's default: "auto").
	Method string
	// DNS are the static servers as written, each ADDR or ADDR#SERVERNAME (invalid ones dropped,
	// as NM does with a warning).
	DNS []string
	// DNSSearch are the static search domains.
	DNSSearch []string
	// IgnoreAutoDNS drops what DHCP, RA or PPP give: servers AND search domains together (NM
	// 1.42 has no setting that drops only the domains; over systemd-resolved 1.58 has none either).
	IgnoreAutoDNS bool
	// Where each setting was read (zero when unset).
	MethodFrom, DNSFrom, DNSSearchFrom, IgnoreAutoDNSFrom Source
}

// ParseConnection parses one keyfile connection (GKeyFile with ';' lists, as NM's keyfile plugin
// writes them: "dns=10.0.0.1;10.0.0.2;").
func ParseConnection(p string, data []byte) (*Connection, error) {
	kf, err := ParseKeyFile(p, data)
	if err != nil {
		return nil, err
	}
	c := &Connection{Path: p}
	str := func(group, key string) (string, Source) {
		e, ok := kf.Get(group, key)
		if !ok {
			return "", Source{}
		}
		src := Source{Path: p, Line: e.Line}
		v, err := UnescapeValue(e.Value)
		if err != nil {
			c.Warnings = append(c.Warnings, Warning{src, fmt.Sprintf("[%s] %s ignored: %v", group, key, err)})
			return "", Source{}
		}
		return v, src
	}
	c.ID, _ = str("connection", "id")
	c.UUID, _ = str("connection", "uuid")
	c.Type, _ = str("connection", "type")
	c.InterfaceName, _ = str("connection", "interface-name")
	for _, fam := range []struct {
		group string
		s     *IPSettings
		v6    bool
	}{{"ipv4", &c.IPv4, false}, {"ipv6", &c.IPv6, true}} {
		s := fam.s
		s.Method, s.MethodFrom = str(fam.group, "method")
		// list reads a ;-separated list key of the group: what SplitList gives and where the key
		// is, with a warning when the list does not split.
		list := func(key string) ([]string, Source, bool) {
			e, ok := kf.Get(fam.group, key)
			if !ok {
				return nil, Source{}, false
			}
			src := Source{Path: p, Line: e.Line}
			items, err := SplitList(e.Value, ';')
			if err != nil {
				c.Warnings = append(c.Warnings, Warning{src, fmt.Sprintf("[%s] %s ignored: %v", fam.group, key, err)})
			}
			return items, src, true
		}
		if items, src, ok := list("dns"); ok {
			for _, it := range items {
				if validDNSName(it, fam.v6) {
					s.DNS = append(s.DNS, it)
				} else {
					c.Warnings = append(c.Warnings, Warning{src, fmt.Sprintf("ignoring invalid DNS server IPv%c address '%s'", map[bool]byte{false: '4', true: '6'}[fam.v6], it)})
				}
			}
			s.DNSFrom = src
		}
		if items, src, ok := list("dns-search"); ok {
			for _, it := range items {
				if it = strings.Trim(it, asciiSpace); it != "" {
					s.DNSSearch = append(s.DNSSearch, it)
				}
			}
			s.DNSSearchFrom = src
		}
		if e, ok := kf.Get(fam.group, "ignore-auto-dns"); ok {
			src := Source{Path: p, Line: e.Line}
			if v, ok := ParseBool(e.Value); ok {
				s.IgnoreAutoDNS, s.IgnoreAutoDNSFrom = v, src
			} else {
				c.Warnings = append(c.Warnings, Warning{src, fmt.Sprintf("[%s] ignore-auto-dns=%s is not a boolean: ignored", fam.group, e.Value)})
			}
		}
	}
	return c, nil
}

// validDNSName is nm_utils_dnsname_parse of NM 1.42: an address of the family, optionally
// "#SERVERNAME" (non-empty).
func validDNSName(s string, v6 bool) bool {
	addr, sni, hasSNI := strings.Cut(s, "#")
	if hasSNI && sni == "" {
		return false
	}
	a, err := netip.ParseAddr(addr)
	if err != nil || a.Zone() != "" {
		return false
	}
	if v6 {
		return a.Is6()
	}
	return a.Is4()
}

// Connections are the keyfile profiles NM 1.42 loads, and what it skips.
type Connections struct {
	// Profiles are the effective ones, by path.
	Profiles []*Connection
	// Shadowed are profiles hidden by one with the same UUID in a higher-priority directory.
	Shadowed []*Connection
	// Errors are files NM would not load (parse errors); Warnings are files skipped by name.
	Errors   []error
	Warnings []Warning
}

// ByInterface returns the effective profiles bound to an interface name.
func (cs *Connections) ByInterface(iface string) []*Connection {
	var out []*Connection
	for _, c := range cs.Profiles {
		if c.InterfaceName == iface {
			out = append(out, c)
		}
	}
	return out
}

// ByUUID returns the effective profile with uuid.
func (cs *Connections) ByUUID(uuid string) (*Connection, bool) {
	for _, c := range cs.Profiles {
		if c.UUID == uuid {
			return c, true
		}
	}
	return nil, false
}

// LoadConnections reads the keyfile profiles of the three directories. It does not check file
// modes: NM 1.42 skips a keyfile that is not owned by root or is group- or world-accessible
// ("File permissions (644) are insecure"), which a NodeFS cannot see.
func LoadConnections(fsys NodeFS) (*Connections, error) {
	cs := &Connections{}
	byUUID := map[string]*Connection{}
	for _, d := range []struct {
		dir string
		st  Storage
	}{{LibConnectionsDir, StorageLib}, {EtcConnectionsDir, StorageEtc}, {RunConnectionsDir, StorageRun}} {
		names, err := fsys.ReadDir(d.dir)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrNotRegular) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", d.dir, err)
		}
		for _, n := range names {
			p := path.Join(d.dir, n)
			if ignoreKeyfileName(n, d.st != StorageEtc) {
				continue
			}
			data, err := fsys.ReadFile(p)
			if errors.Is(err, ErrNotRegular) {
				continue // a directory: NM lists files only
			}
			if err != nil {
				cs.Errors = append(cs.Errors, fmt.Errorf("read %s: %w", p, err))
				continue
			}
			c, err := ParseConnection(p, data)
			if err != nil {
				cs.Errors = append(cs.Errors, err)
				continue
			}
			c.Storage = d.st
			if c.UUID != "" {
				if old, ok := byUUID[c.UUID]; ok {
					cs.Shadowed = append(cs.Shadowed, old)
					cs.Profiles = removeConn(cs.Profiles, old)
				}
				byUUID[c.UUID] = c
			}
			cs.Profiles = append(cs.Profiles, c)
		}
	}
	sort.SliceStable(cs.Profiles, func(i, j int) bool { return cs.Profiles[i].Path < cs.Profiles[j].Path })
	return cs, nil
}

func removeConn(list []*Connection, c *Connection) []*Connection {
	out := list[:0]
	for _, x := range list {
		if x != c {
			out = append(out, x)
		}
	}
	return out
}

// ignoreKeyfileName is nm_keyfile_utils_ignore_filename (1.42): hidden files always; outside /etc
// anything but NAME.nmconnection; in /etc backups ("~"), mkstemp temporaries (".XXXXXX") and
// certificates (".pem", ".der").
func ignoreKeyfileName(name string, requireExtension bool) bool {
	if name == "" || name[0] == '.' {
		return true
	}
	if requireExtension {
		return !(strings.HasSuffix(name, ".nmconnection") && len(name) > len(".nmconnection"))
	}
	if strings.HasSuffix(name, "~") {
		return true
	}
	if i := strings.LastIndexByte(name, '.'); i >= 0 && len(name)-i-1 == 6 && strings.Trim(name[i+1:], "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") == "" {
		return true
	}
	lower := strings.ToLower(name)
	return (strings.HasSuffix(lower, ".pem") && len(name) > 4) || (strings.HasSuffix(lower, ".der") && len(name) > 4)
}
