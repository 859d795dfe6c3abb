package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nodedns/nodedns/probes"
)

// TestNetplanStaticLoopNameserver: a static netplan nameserver that is a loop address, in any
// spelling, is a problem check names with its file and interface; a real resolver there is not.
func TestNetplanStaticLoopNameserver(t *testing.T) {
	for _, tt := range []struct{ addr, want string }{
		{"169.254.25.10", "netplan sets nameserver 169.254.25.10 (the node-local cache) on enp2s0 in /etc/netplan/60-static.yaml"},
		{"\"::ffff:169.254.25.10\"", "netplan sets nameserver ::ffff:169.254.25.10 (the node-local cache) on enp2s0"},
		{"\"::ffff:a9fe:190a\"", "netplan sets nameserver ::ffff:169.254.25.10 (the node-local cache) on enp2s0"},
		{"10.66.0.53", ""},
	} {
		t.Run(tt.addr, func(t *testing.T) {
			root := copyTree(t, "testdata/kubespray/resolved")
			must(t, os.WriteFile(filepath.Join(root, "etc/netplan/60-static.yaml"), []byte(
				"network:\n  version: 2\n  ethernets:\n    enp2s0:\n      addresses: [10.0.0.5/24]\n      nameservers:\n        addresses: ["+tt.addr+"]\n"), 0o600))
			rep, r := checkReport(t, root)
			ns := byID(rep, "resolvconf.nameservers")
			if tt.want == "" {
				notContains(t, "resolvconf.nameservers", ns.Message, "netplan sets nameserver")
				return
			}
			if ns.Status != probes.Problem {
				t.Fatalf("resolvconf.nameservers = %s: %s\n%s", ns.Status, ns.Message, r.stdout)
			}
			contains(t, "resolvconf.nameservers", ns.Message, tt.want)
			contains(t, "resolvconf.nameservers hint", ns.Hint, "remove it from nameservers.addresses")
		})
	}
}
