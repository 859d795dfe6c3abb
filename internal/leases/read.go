package leases

import (
	"bytes"
	"errors"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/nodedns/nodedns/internal/ascii"
	"github.com/nodedns/nodedns/internal/nodefs"
)

// MaxFileSize is the largest lease file Load accepts. Real lease files are a
// few KiB (dhclient trims its file on restart); anything larger is not a
// lease file, and reading it whole would let a stray file cost memory.
const MaxFileSize = 1 << 20

// Where the DHCP clients keep their leases (node paths).
const (
	// NetworkdLeaseDir holds one file per interface index while networkd
	// holds a lease (systemd 252 networkd-link.c link_save_dhcp4 /
	// dhcp_lease_save).
	NetworkdLeaseDir = "/run/systemd/netif/leases"
	// NetworkManagerLeaseDir holds NetworkManager's
	// internal-UUID-IFACE.lease and dhclient-UUID-IFACE.lease files.
	NetworkManagerLeaseDir = "/var/lib/NetworkManager"
)

// dhclientLeaseDirs are where ISC dhclient keeps *.leases files: Debian and
// Ubuntu use /var/lib/dhcp, Red Hat and SUSE /var/lib/dhclient.
var dhclientLeaseDirs = []string{"/var/lib/dhcp", "/var/lib/dhclient"}

// Watches declares what Load and LoadDhclientConf read, for the daemon to re-read leases when a client renews. A lease
// is complete once it parses: dhclient appends a lease block by block.
func Watches() []nodefs.Watch {
	ws := []nodefs.Watch{{Dir: NetworkdLeaseDir, Match: nodefs.Numeric, Complete: func(b []byte) error {
		_, err := ParseNetworkd(b, "lease")
		return err
	}}}
	for _, d := range dhclientLeaseDirs {
		ws = append(ws, nodefs.Watch{Dir: d, Match: nodefs.Suffix(".leases"), Complete: func(b []byte) error {
			_, err := ParseDhclient(b, "lease")
			return err
		}})
	}
	ws = append(ws, nodefs.Watch{Dir: NetworkManagerLeaseDir, Match: nodefs.Suffix(".lease")})
	for _, p := range DhclientConfPaths {
		ws = append(ws, nodefs.Watch{Dir: path.Dir(p), Match: nodefs.Names(path.Base(p))})
	}
	return ws
}

// Load finds and parses every lease file of the node r reads and never writes anything:
//
//   - networkd leases, /run/systemd/netif/leases/IFINDEX; the interface name comes from
//     /sys/class/net/NAME/ifindex (an index no NAME claims leaves Interface empty, and the lease
//     still counts);
//   - dhclient lease files, /var/lib/dhcp/*.leases and /var/lib/dhclient/*.leases; dhclient appends
//     every lease it gets, so for each interface (and family) only the LAST lease in a file counts;
//   - NetworkManager lease files, /var/lib/NetworkManager/*.lease, parsed as dhclient syntax or as
//     KEY=VALUE by their content.
//
// A file with any error is skipped whole and reported as a problem (its message names the node path
// and line), as is a file over MaxFileSize or a non-regular file. A missing directory is not a
// problem. Leases are sorted by Path then Line, problems by Path.
func Load(fsys nodefs.Reader) ([]Lease, []nodefs.Problem) {
	r := &reader{fs: fsys}
	names := r.interfaceNames()

	for _, e := range r.list(NetworkdLeaseDir, func(n string) bool {
		i, err := strconv.Atoi(n)
		return err == nil && i > 0 && strconv.Itoa(i) == n
	}) {
		data, ok := r.read(e)
		if !ok {
			continue
		}
		l, err := ParseNetworkd(data, e)
		if err != nil {
			r.problem(e, err)
			continue
		}
		l.Interface = names[l.IfIndex]
		r.leases = append(r.leases, l)
	}

	r.dhclientFiles(func(p string, ls []Lease, err error) {
		if err != nil {
			r.problem(p, err)
			return
		}
		r.leases = append(r.leases, lastPerInterface(ls)...)
	})

	for _, e := range r.list(NetworkManagerLeaseDir, func(n string) bool { return strings.HasSuffix(n, ".lease") }) {
		data, ok := r.read(e)
		if !ok {
			continue
		}
		ls, err := parseNetworkManager(data, e)
		if err != nil {
			r.problem(e, err)
			continue
		}
		r.leases = append(r.leases, ls...)
	}

	sort.SliceStable(r.leases, func(i, j int) bool {
		a, b := r.leases[i], r.leases[j]
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		return a.Line < b.Line
	})
	sort.SliceStable(r.problems, func(i, j int) bool { return r.problems[i].Path < r.problems[j].Path })
	return r.leases, r.problems
}

type reader struct {
	fs       nodefs.Reader
	leases   []Lease
	problems []nodefs.Problem
}

// leaseKind bounds a lease file.
var leaseKind = nodefs.Kind{Name: "lease file", Max: MaxFileSize}

func (r *reader) problem(p string, err error) {
	r.problems = append(r.problems, nodefs.Problem{Path: p, Msg: err.Error()})
}

// list returns the node paths of the entries of dir whose names match keep,
// in name order. Hidden files are skipped: networkd writes a lease through
// a ".#IFINDEXxxxxxx" temporary file (fopen_temporary), and editors leave
// dot-files behind. Directories are skipped too.
func (r *reader) list(dir string, keep func(string) bool) []string {
	entries, err := r.fs.ReadDir(dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			r.problem(dir, err)
		}
		return nil
	}
	var out []string
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, ".") || e.IsDir() || !keep(n) {
			continue
		}
		out = append(out, path.Join(dir, n))
	}
	return out
}

// read returns a lease file's bytes, or records a problem and returns false. A file that vanished
// between listing and reading is no problem: networkd removes a lease file when it drops the lease.
func (r *reader) read(nodePath string) ([]byte, bool) {
	data, err := r.fs.ReadFile(nodePath, leaseKind)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false
	}
	if err != nil {
		r.problem(nodePath, err)
		return nil, false
	}
	return data, true
}

// interfaceNames maps interface indexes to names from /sys/class/net/NAME/ifindex.
// Problems with them are the link-state reader's to report (systemd.LoadLinkStates).
func (r *reader) interfaceNames() map[int]string {
	names, _ := nodefs.IfNames(r.fs)
	return names
}

// lastPerInterface keeps, for each interface and address family, the last
// lease of a dhclient file: dhclient appends each new lease to the file, and
// ISC dhclient 4.4 clparse.c parse_client_lease_statement says "the last
// lease in the lease file on a particular interface is the active lease for
// that interface".
func lastPerInterface(ls []Lease) []Lease {
	type key struct {
		iface string
		v6    bool
	}
	last := map[key]int{}
	for i, l := range ls {
		last[key{l.Interface, l.V6}] = i
	}
	var out []Lease
	for i, l := range ls {
		if last[key{l.Interface, l.V6}] == i {
			out = append(out, l)
		}
	}
	return out
}

// parseNetworkManager parses a NetworkManager lease file. NetworkManager
// names them PLUGIN-CONNECTION_UUID-IFACE.lease (nm-dhcp-utils.c
// nm_dhcp_utils_get_leasefile_path: "internal-", "dhclient-", "dhclient6-");
// the content decides the syntax, since both plugins use the same directory.
func parseNetworkManager(data []byte, nodePath string) ([]Lease, error) {
	iface := nmInterface(path.Base(nodePath))
	if looksDhclient(data) {
		ls, err := ParseDhclient(data, nodePath)
		if err != nil {
			return nil, err
		}
		for i := range ls {
			ls[i].Client = NetworkManager
			if ls[i].Interface == "" {
				ls[i].Interface = iface
			}
		}
		return lastPerInterface(ls), nil
	}
	l, err := ParseNetworkd(data, nodePath)
	if err != nil {
		return nil, err
	}
	l.Client, l.IfIndex, l.Interface = NetworkManager, 0, iface
	return []Lease{l}, nil
}

// nmInterface returns IFACE from PLUGIN-UUID-IFACE.lease, or "" when the name
// does not have that shape. The UUID has a fixed length, so an interface name
// with dashes in it (br-lan) comes out whole.
func nmInterface(name string) string {
	name = strings.TrimSuffix(name, ".lease")
	i := strings.IndexByte(name, '-')
	if i < 0 {
		return ""
	}
	rest := name[i+1:]
	if len(rest) <= ascii.UUIDLen+1 || rest[ascii.UUIDLen] != '-' || !ascii.IsUUID(rest[:ascii.UUIDLen]) {
		return ""
	}
	return rest[ascii.UUIDLen+1:]
}

// looksDhclient reports whether a file's first statement is one that only
// dhclient syntax has (lease, lease6, default-duid); everything else is read
// as KEY=VALUE.
func looksDhclient(data []byte) bool {
	for _, line := range bytes.Split(data, []byte("\n")) {
		s := strings.TrimSpace(string(line))
		if s == "" || s[0] == '#' {
			continue
		}
		w := s
		if i := strings.IndexAny(s, " \t{=;\""); i >= 0 {
			w = s[:i]
		}
		return w == "lease" || w == "lease6" || w == "default-duid"
	}
	return false
}
