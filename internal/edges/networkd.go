package edges

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nodedns/nodedns/internal/leases"
	"github.com/nodedns/nodedns/internal/node"
)

// networkdLeases adds the DHCPv4 leases systemd-networkd holds to the snapshot, asked over its
// varlink interface (io.systemd.Network.Describe on /run/systemd/netif/io.systemd.Network), for the
// links that have no lease file: networkd 262 writes none (docs/contract.md "Upstreams"). A lease
// file, where networkd still writes one (257 and older), stays the source for its link. Live node
// only: under --root lease files are the only source (node.Snapshot.LiveLeases says which).
type networkdLeases struct {
	root string // "/" on the live node
}

func (networkdLeases) Name() string {
	return "systemd-networkd varlink " + leases.NetworkdVarlinkSocket
}

func (n networkdLeases) Observe(ctx context.Context, s *node.Snapshot) error {
	s.LiveLeases = true
	sock := filepath.Join(n.root, leases.NetworkdVarlinkSocket)
	if fi, err := os.Stat(sock); errors.Is(err, fs.ErrNotExist) || (err == nil && fi.Mode()&fs.ModeSocket == 0) {
		return nil // no networkd here, or one older than its varlink interface
	}
	params, err := varlinkCall(ctx, sock, leases.NetworkdDescribeMethod, nil)
	if err != nil {
		return err
	}
	ls, perr := leases.ParseNetworkdDescribe(params)
	withFile := map[int]bool{}
	for _, l := range s.Leases {
		if l.Client == leases.Networkd && l.Path != leases.NetworkdVarlinkSocket {
			withFile[l.IfIndex] = true
		}
	}
	for _, l := range ls {
		if !withFile[l.IfIndex] {
			s.Leases = append(s.Leases, l)
		}
	}
	if perr != nil {
		s.Problems = append(s.Problems, node.Problem{Path: leases.NetworkdVarlinkSocket, Source: node.SourceLease, Msg: perr.Error()})
	}
	return nil
}
