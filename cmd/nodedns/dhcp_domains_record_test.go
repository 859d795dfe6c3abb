package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// networkdGapNode is a networkd node without netplan in the moment after `networkctl reload`:
// ens3 (ifindex 2) takes a lease with domain example.org through a .network file, resolved still
// searches example.org, and kubelet reads nodedns's file.
func networkdGapNode(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	putFile(t, root, "/etc/systemd/network/50-ens3.network", "[Match]\nName=ens3\n[Network]\nDHCP=ipv4\n[DHCPv4]\nUseDomains=yes\n")
	putFile(t, root, "/sys/class/net/ens3/ifindex", "2\n")
	putFile(t, root, "/run/systemd/netif/leases/2", "ADDRESS=10.77.0.50\nNETMASK=255.255.255.0\nROUTER=10.77.0.1\nDNS=10.77.0.53\nDOMAINNAME=example.org\n")
	putFile(t, root, "/run/systemd/resolve/resolv.conf", "nameserver 10.77.0.53\nsearch example.org\n")
	putFile(t, root, "/run/systemd/resolve/stub-resolv.conf", "nameserver 127.0.0.53\noptions edns0 trust-ad\nsearch example.org\n")
	must(t, os.Symlink("/run/systemd/resolve/stub-resolv.conf", filepath.Join(root, "etc/resolv.conf")))
	putFile(t, root, "/var/lib/kubelet/config.yaml", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nclusterDNS: [169.254.25.10]\nclusterDomain: cluster.local\nresolvConf: /var/lib/nodedns/resolv.conf\n")
	putFile(t, root, "/etc/nodedns/config.yaml", "netplan:\n  mode: \"off\"\n")
	return root
}

// TestDHCPDomainRecordBridgesALeaseGap: networkd's lease file is absent for a moment while networkd
// re-takes its lease (after `networkctl reload`, as nodedns's own drop-in asks for). A pass in that
// moment must still know example.org as a DHCP search domain and keep it out of kubelet's
// resolv.conf: nodedns keeps a record of the DHCP domains it saw (docs/contract.md "DHCP search
// domains"). Passes are runs of the binary on the same --root; the lease file is removed between
// them, no timing involved. The record is forgotten when the link is gone, and by restore.
func TestDHCPDomainRecordBridgesALeaseGap(t *testing.T) {
	const record = "/var/lib/nodedns/dhcp-domains.json"
	const kubelet = "/var/lib/nodedns/resolv.conf"
	root := networkdGapNode(t)
	apply := func(when string) string {
		t.Helper()
		r := runBin(t, 30*time.Second, "--root", root, "apply")
		if r.code != 0 {
			t.Fatalf("apply %s exited %d:\n%s", when, r.code, r.out)
		}
		return r.out
	}

	apply("with the lease")
	k := getFile(root, kubelet)
	contains(t, "kubelet's resolv.conf with the lease", k, "nameserver 10.77.0.53\n")
	notContains(t, "kubelet's resolv.conf with the lease", k, "example.org")
	contains(t, "nodedns's record", getFile(root, record), `"example.org"`)

	must(t, os.Remove(filepath.Join(root, "run/systemd/netif/leases/2")))
	out := apply("while the lease file is gone")
	k = getFile(root, kubelet)
	notContains(t, "kubelet's resolv.conf while the lease file is gone", k, "example.org")
	contains(t, "kubelet's resolv.conf while the lease file is gone", k, "nameserver 10.77.0.53\n")
	contains(t, "nodedns's record while the lease file is gone", getFile(root, record), `"example.org"`)
	notContains(t, "apply while the lease file is gone", out, "wrote "+kubelet)

	// The lease back without the domain (the DHCP server stopped handing it out): forgotten.
	putFile(t, root, "/run/systemd/netif/leases/2", "ADDRESS=10.77.0.50\nNETMASK=255.255.255.0\nROUTER=10.77.0.1\nDNS=10.77.0.53\n")
	apply("with a lease without the domain")
	notContains(t, "nodedns's record after a lease without the domain", getFile(root, record), "example.org")

	// The link gone: its record goes with it.
	putFile(t, root, "/run/systemd/netif/leases/2", "ADDRESS=10.77.0.50\nNETMASK=255.255.255.0\nROUTER=10.77.0.1\nDNS=10.77.0.53\nDOMAINNAME=example.org\n")
	apply("with the lease again")
	contains(t, "nodedns's record with the lease again", getFile(root, record), `"example.org"`)
	must(t, os.Remove(filepath.Join(root, "run/systemd/netif/leases/2")))
	must(t, os.RemoveAll(filepath.Join(root, "sys/class/net/ens3")))
	apply("with the link gone")
	notContains(t, "nodedns's record with the link gone", getFile(root, record), "example.org")

	// restore removes the record.
	putFile(t, root, "/sys/class/net/ens3/ifindex", "2\n")
	putFile(t, root, "/run/systemd/netif/leases/2", "ADDRESS=10.77.0.50\nNETMASK=255.255.255.0\nROUTER=10.77.0.1\nDNS=10.77.0.53\nDOMAINNAME=example.org\n")
	apply("before restore")
	if r := runBin(t, 30*time.Second, "--root", root, "restore"); r.code != 0 {
		t.Fatalf("restore exited %d:\n%s", r.code, r.out)
	}
	if _, err := os.Lstat(filepath.Join(root, record)); !os.IsNotExist(err) {
		t.Errorf("the record is still there after restore (%v)", err)
	}
}
