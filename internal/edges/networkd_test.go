package edges

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/nodedns/nodedns/internal/leases"
	"github.com/nodedns/nodedns/internal/node"
)

// TestNetworkdLeasesMerge: the varlink leases fill in the links without a lease file; a link with
// one keeps its file's lease (networkd 257 and older write both). The socket here replays the
// reply the real networkd 262 gave (internal/leases/testdata); the privileged test in cmd/nodedns
// asks the real one.
func TestNetworkdLeasesMerge(t *testing.T) {
	reply, err := os.ReadFile("../leases/testdata/networkd262-describe.json")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	sock := filepath.Join(root, leases.NetworkdVarlinkSocket)
	if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 4096)
			_, _ = c.Read(buf)
			_, _ = c.Write(append(append([]byte(`{"parameters":`), reply...), '}', 0))
			c.Close()
		}
	}()

	s := &node.Snapshot{}
	if err := (networkdLeases{root: root}).Observe(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if !s.LiveLeases || len(s.Leases) != 1 || s.Leases[0].Interface != "veth0" || s.Leases[0].Path != leases.NetworkdVarlinkSocket {
		t.Fatalf("without a lease file: %+v", s.Leases)
	}

	file := leases.Lease{Path: "/run/systemd/netif/leases/3", Client: leases.Networkd, IfIndex: 3, Interface: "veth0"}
	s = &node.Snapshot{Leases: []leases.Lease{file}}
	if err := (networkdLeases{root: root}).Observe(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if len(s.Leases) != 1 || s.Leases[0].Path != file.Path {
		t.Fatalf("with a lease file the varlink lease was added too: %+v", s.Leases)
	}

	s = &node.Snapshot{}
	if err := (networkdLeases{root: t.TempDir()}).Observe(context.Background(), s); err != nil || len(s.Leases) != 0 || !s.LiveLeases {
		t.Fatalf("no networkd: err %v, leases %+v", err, s.Leases)
	}
}
