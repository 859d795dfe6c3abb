package leases

import (
	"strings"

	"github.com/nodedns/nodedns/internal/nodefs"
)

// LeaseFile is one dhclient lease file with every block it holds, in file order.
type LeaseFile struct {
	// Path is the node path of the file.
	Path string
	// Leases are all its lease and lease6 blocks, older ones included: dhclient appends a block per
	// lease and trims the file only when it starts (ParseDhclient).
	Leases []Lease
}

// ReadDhclientHistory reads the same dhclient lease files as Load, keeping every block instead of
// the last one per interface: the history OfferedDNS and OfferedSearch need to find what a DHCP
// server offered behind a dhclient.conf supersede (older blocks written before the rule was in
// force). Files Load would skip (unreadable, malformed) are skipped here too; Load reports them.
func ReadDhclientHistory(fsys nodefs.Reader) []LeaseFile {
	var out []LeaseFile
	(&reader{fs: fsys}).dhclientFiles(func(p string, ls []Lease, err error) {
		if err == nil {
			out = append(out, LeaseFile{Path: p, Leases: ls})
		}
	})
	return out
}

// dhclientFiles parses every dhclient lease file (*.leases in /var/lib/dhcp and /var/lib/dhclient,
// in name order) and hands each to f with all its blocks, or with the reason it does not parse. A
// file that cannot be read is recorded as the reader's problem and not handed on.
func (r *reader) dhclientFiles(f func(path string, ls []Lease, err error)) {
	for _, dir := range dhclientLeaseDirs {
		for _, e := range r.list(dir, func(n string) bool { return strings.HasSuffix(n, ".leases") }) {
			data, ok := r.read(e)
			if !ok {
				continue
			}
			ls, err := ParseDhclient(data, e)
			f(e, ls, err)
		}
	}
}
