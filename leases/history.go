package leases

import (
	"strings"

	"github.com/nodedns/nodedns/files"
)

// LeaseFile is one dhclient lease file with every block it holds, in file order.
type LeaseFile struct {
	// Path is the node path of the file.
	Path string
	// Leases are all its lease and lease6 blocks, older ones included: dhclient appends a block per
	// lease and trims the file only when it starts (ParseDhclient).
	Leases []Lease
}

// ReadDhclientHistory reads the same dhclient lease files as Read, keeping every block instead of
// the last one per interface: the history OfferedDNS and OfferedSearch need to find what a DHCP
// server offered behind a dhclient.conf supersede (older blocks written before the rule was in
// force). Files Read would skip (unreadable, malformed) are skipped here too; Read reports them.
func ReadDhclientHistory(fsys files.Reader) []LeaseFile {
	r := &reader{fs: fsys}
	var out []LeaseFile
	for _, dir := range dhclientLeaseDirs {
		for _, e := range r.list(dir, func(n string) bool { return strings.HasSuffix(n, ".leases") }) {
			data, ok := r.read(e)
			if !ok {
				continue
			}
			ls, err := ParseDhclient(data, e)
			if err != nil {
				continue
			}
			out = append(out, LeaseFile{Path: e, Leases: ls})
		}
	}
	return out
}
