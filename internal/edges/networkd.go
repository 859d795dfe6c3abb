package edges

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nodedns/nodedns/internal/leases"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/nodefs"
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
	if err := networkdSocket(sock); err != nil {
		s.Problems = append(s.Problems, node.Problem{Path: leases.NetworkdVarlinkSocket, Source: node.SourceLease, Msg: err.Error()})
		return nil
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

// networkdSocket says whether the socket at sock can only be networkd's: whoever can write its
// directory can bind it, and whatever answers there decides the node's DHCP leases for nodedns. So
// its directory (/run/systemd/netif, which systemd makes networkd's user's, 0755) must be writable
// by its owner alone, its parent (/run/systemd) root's and writable by root alone, and the socket
// the directory owner's or root's. nil when it is.
func networkdSocket(sock string) error {
	dir := filepath.Dir(sock)
	refuse := func(p string, why string) error {
		return fmt.Errorf("refusing to ask %s: %s %s, so another user could have bound it", sock, p, why)
	}
	pfi, err := os.Lstat(filepath.Dir(dir))
	if err != nil {
		return fmt.Errorf("refusing to ask %s: %w", sock, err)
	}
	if uid, _ := nodefs.Owner(pfi); !pfi.IsDir() || uid != 0 || pfi.Mode().Perm()&0o022 != 0 {
		return refuse(filepath.Dir(dir), fmt.Sprintf("is not a directory of root's writable by root alone (owner uid %d, mode %s)", uid, nodefs.ModeString(pfi.Mode())))
	}
	dfi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("refusing to ask %s: %w", sock, err)
	}
	owner, _ := nodefs.Owner(dfi)
	if !dfi.IsDir() || dfi.Mode().Perm()&0o022 != 0 {
		return refuse(dir, fmt.Sprintf("is not a directory writable by its owner alone (owner uid %d, mode %s)", owner, nodefs.ModeString(dfi.Mode())))
	}
	sfi, err := os.Lstat(sock)
	if err != nil {
		return fmt.Errorf("refusing to ask %s: %w", sock, err)
	}
	if uid, _ := nodefs.Owner(sfi); uid != 0 && uid != owner {
		return refuse(sock, fmt.Sprintf("is owned by uid %d, neither root nor its directory's owner (uid %d)", uid, owner))
	}
	return nil
}
