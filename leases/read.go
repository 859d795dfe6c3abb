package leases

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/nodedns/nodedns/files"
)

// MaxFileSize is the largest lease file Read accepts. Real lease files are a
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
	// SysClassNet maps interface names to indexes (NAME/ifindex).
	SysClassNet = "/sys/class/net"
)

// dhclientLeaseDirs are where ISC dhclient keeps *.leases files: Debian and
// Ubuntu use /var/lib/dhcp, Red Hat and SUSE /var/lib/dhclient.
var dhclientLeaseDirs = []string{"/var/lib/dhcp", "/var/lib/dhclient"}

// Dirs returns the node paths of the directories Read looks in, for a caller
// that watches them (inotify) to re-read leases when a client renews.
func Dirs() []string {
	return append([]string{NetworkdLeaseDir}, append(append([]string(nil), dhclientLeaseDirs...), NetworkManagerLeaseDir)...)
}

// Problem is a lease file (or lease directory) that could not be used; Read
// still returns the leases of every other file.
type Problem struct {
	// Path is the node path of the file or directory.
	Path string
	// Err says what is wrong; its message names the node path (and line).
	Err error
}

// Error returns the problem's message, so a Problem can be logged or
// returned as an error.
func (p Problem) Error() string { return p.Err.Error() }

// Unwrap returns the underlying error, for errors.Is and errors.As.
func (p Problem) Unwrap() error { return p.Err }

// errVanished marks a file that disappeared between listing and opening:
// networkd removes a lease file when it drops the lease. That is not a problem.
var errVanished = errors.New("file vanished")

// Read finds and parses every lease file under root (root "" or "/" is the
// real system) and never writes anything:
//
//   - networkd leases, root/run/systemd/netif/leases/IFINDEX; the interface
//     name comes from root/sys/class/net/NAME/ifindex (an index no NAME
//     claims leaves Interface empty, and the lease still counts);
//   - dhclient lease files, root/var/lib/dhcp/*.leases and
//     root/var/lib/dhclient/*.leases; dhclient appends every lease it gets,
//     so for each interface (and family) only the LAST lease in a file counts;
//   - NetworkManager lease files, root/var/lib/NetworkManager/*.lease, parsed
//     as dhclient syntax or as KEY=VALUE by their content.
//
// A file with any error is skipped whole and reported as a Problem, as is a
// file over MaxFileSize or a non-regular file. A missing directory is not a
// problem. Leases are sorted by Path then Line, problems by Path.
func Read(root string) ([]Lease, []Problem) {
	r := &reader{root: root}
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

	for _, dir := range dhclientLeaseDirs {
		for _, e := range r.list(dir, func(n string) bool { return strings.HasSuffix(n, ".leases") }) {
			data, ok := r.read(e)
			if !ok {
				continue
			}
			ls, err := ParseDhclient(data, e)
			if err != nil {
				r.problem(e, err)
				continue
			}
			r.leases = append(r.leases, lastPerInterface(ls)...)
		}
	}

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
	root     string
	leases   []Lease
	problems []Problem
}

// join puts a node path under the root, as netplan --root-dir does.
func (r *reader) join(nodePath string) string {
	return files.HostPath(r.root, nodePath)
}

func (r *reader) problem(p string, err error) {
	r.problems = append(r.problems, Problem{Path: p, Err: err})
}

// list returns the node paths of the entries of dir whose names match keep,
// in name order. Hidden files are skipped: networkd writes a lease through
// a ".#IFINDEXxxxxxx" temporary file (fopen_temporary), and editors leave
// dot-files behind. Directories are skipped too.
func (r *reader) list(dir string, keep func(string) bool) []string {
	entries, err := os.ReadDir(r.join(dir))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			r.problem(dir, fmt.Errorf("list %s: %w", dir, unwrapPath(err)))
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

// read returns a lease file's bytes, or records a problem and returns false.
func (r *reader) read(nodePath string) ([]byte, bool) {
	data, err := readLimited(r.join(nodePath), nodePath)
	if errors.Is(err, errVanished) {
		return nil, false
	}
	if err != nil {
		r.problem(nodePath, err)
		return nil, false
	}
	return data, true
}

// readLimited reads a regular file of at most MaxFileSize bytes. It opens
// with O_NONBLOCK so that a FIFO planted where a lease file should be cannot
// hang the daemon, then refuses anything but a regular file.
func readLimited(full, nodePath string) ([]byte, error) {
	f, err := os.OpenFile(full, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errVanished
		}
		return nil, fmt.Errorf("read %s: %w", nodePath, unwrapPath(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", nodePath, unwrapPath(err))
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("read %s: not a regular file (%s)", nodePath, st.Mode().Type())
	}
	if st.Size() > MaxFileSize {
		return nil, fmt.Errorf("read %s: %d bytes, over the %d byte limit for a lease file", nodePath, st.Size(), MaxFileSize)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", nodePath, unwrapPath(err))
	}
	if len(data) > MaxFileSize {
		// The file grew after Stat.
		return nil, fmt.Errorf("read %s: over the %d byte limit for a lease file", nodePath, MaxFileSize)
	}
	return data, nil
}

// unwrapPath drops the root-joined path from an *fs.PathError: messages name
// the node path instead, which is what an operator looks for.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// interfaceNames maps interface indexes to names from
// root/sys/class/net/NAME/ifindex. Unreadable entries are skipped: links come
// and go, and a lease whose index has no name still counts.
func (r *reader) interfaceNames() map[int]string {
	names := map[int]string{}
	dir := r.join(SysClassNet)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return names
	}
	for _, e := range entries {
		data, err := readSmall(filepath.Join(dir, e.Name(), "ifindex"))
		if err != nil {
			continue
		}
		i, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || i <= 0 {
			continue
		}
		if _, dup := names[i]; !dup {
			names[i] = e.Name()
		}
	}
	return names
}

// readSmall reads at most 64 bytes: an ifindex file holds one number.
func readSmall(p string) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 64))
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
	const uuidLen = 36
	if len(rest) <= uuidLen+1 || rest[uuidLen] != '-' || !isUUID(rest[:uuidLen]) {
		return ""
	}
	return rest[uuidLen+1:]
}

// isUUID reports whether s is a textual UUID, 8-4-4-4-12 hex digits.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch i {
		case 8, 13, 18, 23:
			if s[i] != '-' {
				return false
			}
		default:
			if !isHex(s[i]) {
				return false
			}
		}
	}
	return true
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
