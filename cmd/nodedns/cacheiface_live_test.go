package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodedns/nodedns/internal/testutil/nstest"
)

// TestCacheInterfaceAddressIsALoopAddress: a cache listening on an address only its interface names
// (169.254.30.10, in no config and not kubelet's) is still kept out of the node's resolvers. The real
// binary runs in a sandbox with a real `nodelocaldns` bridge; without the netlink source this
// address would be taken for a real upstream.
func TestCacheInterfaceAddressIsALoopAddress(t *testing.T) {
	sb := nstest.New(t)
	bin := nstest.Build(t)
	sb.Run(t, "ip link add nodelocaldns type bridge && ip addr add 169.254.30.10/32 dev nodelocaldns && ip link set nodelocaldns up")
	root := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "etc/resolv.conf"), []byte("nameserver 169.254.30.10\nnameserver 10.0.0.2\n"), 0o644))

	// Under --root no live source runs: 169.254.30.10 is not known to be the cache.
	out, err := sb.Cmd(context.Background(), bin, "--root", root, "plan").CombinedOutput()
	if err != nil || strings.Contains(string(out), "-nameserver 169.254.30.10") {
		t.Fatalf("plan under --root: %v\n%s", err, out)
	}
	// Live, the source reads the interface; the file check (resolvconf.loop) must name the address.
	// Isolate puts overlays over /etc and /var/lib so the live run writes nothing on the host.
	sb.Isolate(t)
	sb.Run(t, "printf 'nameserver 169.254.30.10\\nnameserver 10.0.0.2\\n' > /etc/resolv.conf")
	out, _ = sb.Cmd(context.Background(), bin, "check", "-o", "json").CombinedOutput()
	if !strings.Contains(string(out), `169.254.30.10 (the node-local cache)`) {
		t.Errorf("live check does not treat the interface's address as the cache:\n%s", out)
	}
}
