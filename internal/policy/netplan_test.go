package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/edges/netplancmd"
	"github.com/nodedns/nodedns/internal/leases"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/internal/store"
	"github.com/nodedns/nodedns/netplan"
)

// lease is a networkd lease file the test puts on a fixture node (/run/systemd/netif/leases/IDX
// and /sys/class/net/NAME/ifindex, as networkd 252 and the kernel leave them).
type lease struct {
	ifname  string
	ifindex int
	addr    string // "10.0.0.5/24"
	router  string
	dns     string
	domain  string
}

func (l lease) write(t *testing.T, root string) {
	t.Helper()
	p := netip.MustParsePrefix(l.addr)
	m := ^uint32(0) << (32 - p.Bits())
	netmask := fmt.Sprintf("%d.%d.%d.%d", byte(m>>24), byte(m>>16), byte(m>>8), byte(m))
	var b strings.Builder
	fmt.Fprintf(&b, "# This is private data. Do not parse.\nADDRESS=%s\nNETMASK=%s\n", p.Addr(), netmask)
	if l.router != "" {
		fmt.Fprintf(&b, "ROUTER=%s\n", l.router)
	}
	fmt.Fprintf(&b, "LIFETIME=3600\nDNS=%s\n", l.dns)
	if l.domain != "" {
		fmt.Fprintf(&b, "DOMAINNAME=%s\nDOMAIN_SEARCH_LIST=%s\n", l.domain, l.domain)
	}
	writeFile(t, root, fmt.Sprintf("/run/systemd/netif/leases/%d", l.ifindex), b.String(), 0o644)
	writeFile(t, root, "/sys/class/net/"+l.ifname+"/ifindex", fmt.Sprintf("%d\n", l.ifindex), 0o644)
}

func writeFile(t *testing.T, root, node, data string, mode fs.FileMode) {
	t.Helper()
	full := filepath.Join(root, node)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
}

// copyFixture copies netplan/testdata/nodes/NAME into a temporary root, netplan files 0600.
func copyFixture(t *testing.T, name string) string {
	t.Helper()
	src := filepath.Join("..", "..", "netplan", "testdata", "nodes", name)
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		writeFile(t, dst, "/"+rel, string(data), 0o600)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// tree hashes every file under root but nodedns's state directory.
func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			if rel == "var/lib/nodedns" {
				return filepath.SkipDir
			}
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, _ := d.Info()
		sum := sha256.Sum256(data)
		m[rel] = hex.EncodeToString(sum[:]) + " " + info.Mode().Perm().String()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// entries turns generated files into "file [Section] line" entries, so that a change can be
// checked line by line: what was added, what was removed, and that nothing else moved.
func entries(gen map[string][]byte) []string {
	var out []string
	for path, data := range gen {
		section := ""
		for _, l := range strings.Split(string(data), "\n") {
			l = strings.TrimSpace(l)
			switch {
			case l == "" || strings.HasPrefix(l, "#"):
				continue
			case strings.HasPrefix(l, "["):
				section = l
				continue
			}
			out = append(out, path+" "+section+" "+l)
		}
	}
	slices.Sort(out)
	return out
}

// multisetDiff returns what b has more than a, and what a has more than b.
func multisetDiff(a, b []string) (added, removed []string) {
	count := map[string]int{}
	for _, x := range a {
		count[x]++
	}
	for _, x := range b {
		count[x]--
	}
	for x, n := range count {
		for ; n < 0; n++ {
			added = append(added, x)
		}
		for ; n > 0; n-- {
			removed = append(removed, x)
		}
	}
	slices.Sort(added)
	slices.Sort(removed)
	return added, removed
}

func netplanOrSkip(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("netplan"); err != nil {
		t.Skip("netplan is not installed (apt-get install --no-install-recommends netplan.io)")
	}
}

const (
	nwEth0  = "/run/systemd/network/10-netplan-eth0.network"
	nwEns3  = "/run/systemd/network/10-netplan-ens3.network"
	nwEns5  = "/run/systemd/network/10-netplan-ens5.network"
	nwBond0 = "/run/systemd/network/10-netplan-bond0.network"
	nwEnp1  = "/run/systemd/network/10-netplan-enp1s0.network"
)

// TestNetplanFixtures runs the netplan part of the plan over fixtures from real images and judges
// each result with the real `netplan generate --root-dir`: the networkd files it renders gain
// exactly UseDomains=false (override) or the static Address/Gateway/DNS (pin) and lose only the
// DHCPv4 settings a pin replaces; everything else in them is unchanged. A second plan changes
// nothing, and restore gives back the original tree.
func TestNetplanFixtures(t *testing.T) {
	netplanOrSkip(t)
	tests := []struct {
		name, fixture, mode string
		leases              []lease
		added, removed      []string
		noFile              bool     // no netplan change at all
		blocked             string   // a substring of the netplan Blocked reason
		notes               []string // substrings of Notes
	}{
		{
			name: "ubuntu 22.04 cloud-init, override", fixture: "cloud-init", mode: config.NetplanOverride,
			added: []string{nwEth0 + " [DHCP] UseDomains=false"},
		},
		{
			name: "ubuntu 20.04 cloud-init, default mode is override", fixture: "cloud-init-2004",
			added: []string{"/run/systemd/network/10-netplan-ens5.network [DHCP] UseDomains=false"},
		},
		{
			name: "ubuntu 24.04 cloud-init, both families", fixture: "cloud-init-2404",
			added: []string{nwEns5 + " [DHCP] UseDomains=false"},
		},
		{
			name: "subiquity static: nothing to override", fixture: "subiquity", mode: config.NetplanOverride,
			noFile: true,
		},
		{
			name: "subiquity static: nothing to pin", fixture: "subiquity", mode: config.NetplanPin,
			noFile: true,
		},
		{
			name: "two NICs: the one without use-domains: false", fixture: "two-nic",
			added: []string{nwEns3 + " [DHCP] UseDomains=false"},
		},
		{
			name: "bond", fixture: "bond",
			added: []string{nwBond0 + " [DHCP] UseDomains=false"},
			notes: []string{"does not touch (they pass through as they are): bonds bond0"},
		},
		{
			name: "vlan: use-domains route is already search-free", fixture: "vlan",
			noFile: true,
		},
		{
			name: "NetworkManager laptop: nmcli, not netplan", fixture: "nm-laptop",
			noFile: true, notes: []string{"NetworkManager renders netplan interface NM-7c5a4f2e", "nmcli connection modify"},
		},
		{
			name: "DHCP hands out the cache: use-dns off, upstreams static", fixture: "cloud-init", mode: config.NetplanOverride,
			leases: []lease{{ifname: "eth0", ifindex: 2, addr: "10.0.0.5/24", router: "10.0.0.1", dns: "169.254.25.10 10.0.0.2", domain: "example.org"}},
			added:  []string{nwEth0 + " [DHCP] UseDNS=false", nwEth0 + " [DHCP] UseDomains=false", nwEth0 + " [Network] DNS=10.0.0.2"},
		},
		{
			name: "pin cloud-init 22.04", fixture: "cloud-init", mode: config.NetplanPin,
			leases: []lease{{ifname: "eth0", ifindex: 2, addr: "10.0.0.5/24", router: "10.0.0.1", dns: "169.254.25.10 10.0.0.2", domain: "example.org"}},
			added: []string{
				nwEth0 + " [Network] Address=10.0.0.5/24", nwEth0 + " [Network] DNS=10.0.0.2",
				nwEth0 + " [Route] Destination=0.0.0.0/0", nwEth0 + " [Route] Gateway=10.0.0.1",
			},
			removed: []string{nwEth0 + " [DHCP] RouteMetric=100", nwEth0 + " [DHCP] UseMTU=true", nwEth0 + " [Network] DHCP=ipv4"},
		},
		{
			name: "pin ubuntu 24.04: DHCPv6 stays, without domains", fixture: "cloud-init-2404", mode: config.NetplanPin,
			leases: []lease{{ifname: "ens5", ifindex: 2, addr: "172.31.5.9/20", router: "172.31.0.1", dns: "172.31.0.2"}},
			added: []string{
				nwEns5 + " [DHCP] UseDomains=false", nwEns5 + " [Network] Address=172.31.5.9/20", nwEns5 + " [Network] DHCP=ipv6",
				nwEns5 + " [Network] DNS=172.31.0.2", nwEns5 + " [Route] Destination=0.0.0.0/0", nwEns5 + " [Route] Gateway=172.31.0.1",
			},
			removed: []string{nwEns5 + " [Network] DHCP=yes"},
		},
		{
			name: "pin two NICs: the lower route metric is the default route", fixture: "two-nic", mode: config.NetplanPin,
			leases: []lease{
				{ifname: "ens3", ifindex: 2, addr: "10.1.0.7/24", router: "10.1.0.1", dns: "10.1.0.2"},
				{ifname: "ens4", ifindex: 3, addr: "10.2.0.7/24", router: "10.2.0.1", dns: "10.2.0.2"},
			},
			added: []string{
				nwEns3 + " [Network] Address=10.1.0.7/24", nwEns3 + " [Network] DNS=10.1.0.2",
				nwEns3 + " [Route] Destination=0.0.0.0/0", nwEns3 + " [Route] Gateway=10.1.0.1",
			},
			removed: []string{nwEns3 + " [DHCP] RouteMetric=100", nwEns3 + " [DHCP] UseMTU=true", nwEns3 + " [Network] DHCP=ipv4"},
		},
		{
			name: "pin the bond itself", fixture: "bond", mode: config.NetplanPin,
			leases: []lease{{ifname: "bond0", ifindex: 4, addr: "10.9.0.20/24", router: "10.9.0.1", dns: "10.9.0.2"}},
			added: []string{
				nwBond0 + " [Network] Address=10.9.0.20/24", nwBond0 + " [Network] DNS=10.9.0.2",
				nwBond0 + " [Route] Destination=0.0.0.0/0", nwBond0 + " [Route] Gateway=10.9.0.1",
			},
			removed: []string{nwBond0 + " [DHCP] RouteMetric=100", nwBond0 + " [DHCP] UseMTU=true", nwBond0 + " [Network] DHCP=ipv4"},
		},
		{
			name: "pin the VLAN's parent: the VLAN is unchanged", fixture: "vlan", mode: config.NetplanPin,
			leases: []lease{{ifname: "enp1s0", ifindex: 2, addr: "192.168.7.30/24", router: "192.168.7.1", dns: "192.168.7.1"}},
			added: []string{
				nwEnp1 + " [Network] Address=192.168.7.30/24", nwEnp1 + " [Network] DNS=192.168.7.1",
				nwEnp1 + " [Route] Destination=0.0.0.0/0", nwEnp1 + " [Route] Gateway=192.168.7.1",
			},
			removed: []string{nwEnp1 + " [DHCP] RouteMetric=100", nwEnp1 + " [DHCP] UseDomains=route", nwEnp1 + " [DHCP] UseMTU=true", nwEnp1 + " [Network] DHCP=ipv4"},
		},
		{
			name: "pin refuses a bond member", fixture: "bond", mode: config.NetplanPin,
			leases:  []lease{{ifname: "eno2", ifindex: 3, addr: "10.9.0.20/24", router: "10.9.0.1", dns: "10.9.0.2"}},
			blocked: "the default-route interface eno2 is part of bond0: refusing to pin a member",
		},
		{
			name: "pin refuses a lease without router", fixture: "cloud-init", mode: config.NetplanPin,
			leases:  []lease{{ifname: "eth0", ifindex: 2, addr: "10.0.0.5/24", dns: "10.0.0.2"}},
			blocked: "no interface has a current DHCP lease with a router",
		},
		{
			name: "pin refuses without a lease", fixture: "cloud-init", mode: config.NetplanPin,
			blocked: "no interface has a current DHCP lease with a router",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			root := copyFixture(t, tt.fixture)
			for _, l := range tt.leases {
				l.write(t, root)
			}
			orig := tree(t, root)
			var r netplancmd.Runner
			gen0, err := r.Generate(ctx, root, nil)
			if err != nil {
				t.Fatalf("netplan generate on the fixture: %v", err)
			}
			cfg := config.Default()
			cfg.Netplan.Mode = tt.mode
			s := node.Observe(nodefs.NewReader(root), cfg, now)
			p := Compute(s, cfg)
			for _, n := range tt.notes {
				if !slices.ContainsFunc(p.Notes, func(x string) bool { return strings.Contains(x, n) }) {
					t.Errorf("no note containing %q in %q", n, p.Notes)
				}
			}
			var c *Change
			for i := range p.Changes {
				if p.Changes[i].Path == netplan.NodednsFile {
					c = &p.Changes[i]
				}
			}
			var blocked []string
			for _, b := range p.Blocked {
				if strings.HasPrefix(b.Target, netplan.NodednsFile) {
					blocked = append(blocked, b.Reason)
				}
			}
			if tt.blocked != "" {
				if !slices.ContainsFunc(blocked, func(x string) bool { return strings.Contains(x, tt.blocked) }) {
					t.Errorf("blocked = %q, want one containing %q", blocked, tt.blocked)
				}
				return
			}
			if len(blocked) > 0 {
				t.Fatalf("netplan change blocked: %q", blocked)
			}
			if tt.noFile {
				if c != nil {
					t.Fatalf("unexpected netplan change:\n%s", c.After)
				}
				return
			}
			if c == nil {
				t.Fatalf("no netplan change; plan: %+v", p)
			}
			if c.Mode != 0o600 {
				t.Errorf("mode %v, want 0600", c.Mode)
			}
			st := &store.Store{Root: root, StateDir: config.StateDir, Targets: store.DefaultTargets(config.StateDir).Add(node.Writes()...).AddLinked(node.LinkedWrites()...)}
			if _, err := st.Write(c.Path, c.After, c.Mode); err != nil {
				t.Fatal(err)
			}
			gen1, err := r.Generate(ctx, root, nil)
			if err != nil {
				t.Fatalf("netplan generate with nodedns's file: %v\n%s", err, c.After)
			}
			added, removed := multisetDiff(entries(gen0), entries(gen1))
			if diff := cmp.Diff(tt.added, added, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("lines netplan generate added (-want +got):\n%s\nfile:\n%s", diff, c.After)
			}
			if diff := cmp.Diff(tt.removed, removed, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("lines netplan generate removed (-want +got):\n%s\nfile:\n%s", diff, c.After)
			}

			// Apply twice changes nothing, also once the lease is gone (networkd deletes it when
			// DHCP is switched off): the pin is kept as written.
			again := Compute(node.Observe(nodefs.NewReader(root), cfg, now), cfg)
			for _, c2 := range again.Changes {
				if strings.HasPrefix(c2.Path, "/etc/netplan/") {
					t.Errorf("second plan changes %s again:\n%s", c2.Path, c2.After)
				}
			}
			if err := os.RemoveAll(filepath.Join(root, "run/systemd/netif")); err != nil {
				t.Fatal(err)
			}
			leaseless := node.Observe(nodefs.NewReader(root), cfg, now)
			for _, c2 := range Compute(leaseless, config.Default()).Changes { // default mode too
				if strings.HasPrefix(c2.Path, "/etc/netplan/") && len(tt.leases) > 0 && tt.mode == config.NetplanPin {
					t.Errorf("plan without the lease changes %s:\n%s", c2.Path, c2.After)
				}
			}
			for _, l := range tt.leases {
				l.write(t, root)
			}

			if _, err := st.Restore(nil); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(orig, tree(t, root)); diff != "" {
				t.Errorf("restore did not give back the original tree (-orig +now):\n%s", diff)
			}
		})
	}
}

func parsedNetplan(t *testing.T, data string) *netplan.Config {
	t.Helper()
	c, err := netplan.Parse([]netplan.Doc{{Path: "/etc/netplan/50-cloud-init.yaml", Data: []byte(data)}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestPinRefuses covers the refusals that need a clock or the live link.
func TestPinRefuses(t *testing.T) {
	np := parsedNetplan(t, "network:\n  ethernets:\n    eth0: {dhcp4: true}\n")
	base := func() leases.Lease {
		return leases.Lease{Path: "/var/lib/dhcp/dhclient.eth0.leases", Client: leases.Dhclient, Interface: "eth0",
			Address: netip.MustParsePrefix("10.0.0.5/24"), Routers: addrs("10.0.0.1"), DNS: addrs("10.0.0.2"), Expire: now.Add(time.Hour)}
	}
	tests := []struct {
		name   string
		lease  func(*leases.Lease)
		uplink *node.Uplink
		cfg    func(*config.Config)
		want   string
	}{
		{name: "expired", lease: func(l *leases.Lease) { l.Expire = now.Add(-time.Hour) }, want: "expired at 2026-11-21 11:00:00 UTC"},
		{name: "live gateway differs", uplink: &node.Uplink{IfName: "eth0", Gateway: netip.MustParseAddr("10.0.0.254")}, want: "goes via 10.0.0.254 but its lease"},
		{name: "live address differs", uplink: &node.Uplink{IfName: "eth0", Addrs: []netip.Prefix{netip.MustParsePrefix("10.0.0.9/24")}}, want: "does not carry the leased address 10.0.0.5/24"},
		{name: "only loop servers and no upstream", lease: func(l *leases.Lease) { l.DNS = addrs("169.254.25.10", "127.0.0.53") }, want: "no usable DNS server"},
		{name: "uplink not in netplan", uplink: &node.Uplink{IfName: "wlan0"}, want: "no netplan definition configures the default-route interface wlan0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := base()
			if tt.lease != nil {
				tt.lease(&l)
			}
			s := &node.Snapshot{Now: now, Leases: []leases.Lease{l}, Netplan: np, NetplanOthers: np, Uplink: tt.uplink}
			cfg := config.Default()
			cfg.Netplan.Mode = config.NetplanPin
			p := Compute(s, cfg)
			var got []string
			for _, b := range p.Blocked {
				got = append(got, b.Reason)
			}
			if !slices.ContainsFunc(got, func(x string) bool { return strings.Contains(x, tt.want) }) {
				t.Errorf("blocked = %q, want one containing %q", got, tt.want)
			}
			for _, c := range p.Changes {
				if c.Path == netplan.NodednsFile && strings.Contains(string(c.After), "dhcp4: false") {
					t.Errorf("a refused pin was still planned:\n%s", c.After)
				}
			}
		})
	}
	t.Run("live link agrees", func(t *testing.T) {
		s := &node.Snapshot{Now: now, Leases: []leases.Lease{base()}, Netplan: np, NetplanOthers: np,
			Uplink: &node.Uplink{IfName: "eth0", Gateway: netip.MustParseAddr("10.0.0.1"), Addrs: []netip.Prefix{netip.MustParsePrefix("10.0.0.5/24")}}}
		cfg := config.Default()
		cfg.Netplan.Mode = config.NetplanPin
		p := Compute(s, cfg)
		if len(p.Blocked) > 0 || len(p.Changes) == 0 {
			t.Fatalf("plan: %+v", p)
		}
		if !strings.Contains(string(p.Changes[len(p.Changes)-1].After), "addresses: [10.0.0.5/24]") {
			t.Errorf("pin:\n%s", p.Changes[len(p.Changes)-1].After)
		}
	})
}

// TestNetworkdDropIn: a node with networkd but no netplan gets UseDomains=no drop-ins, and the
// reload runs only when netplan.apply says so.
func TestNetworkdDropIn(t *testing.T) {
	root := t.TempDir()
	writeFile(t, root, "/etc/systemd/network/20-wired.network", "[Match]\nName=en*\n\n[Network]\nDHCP=yes\n", 0o644)
	writeFile(t, root, "/etc/systemd/network/30-static.network", "[Match]\nName=eth9\n\n[Network]\nAddress=10.0.0.1/24\n", 0o644)
	// A vendor file no link uses is left alone.
	writeFile(t, root, "/lib/systemd/network/80-container-host0.network", "[Match]\nVirtualization=container\nName=host0\n\n[Network]\nDHCP=yes\n", 0o644)
	for _, apply := range []bool{false, true} {
		cfg := config.Default()
		cfg.Netplan.Apply = apply
		s := node.Observe(nodefs.NewReader(root), cfg, now)
		p := Compute(s, cfg)
		var paths []string
		for _, c := range p.Changes {
			if strings.HasPrefix(c.Path, "/etc/systemd/network/") {
				paths = append(paths, c.Path)
				if want := "[DHCPv4]\nUseDomains=no\n\n[DHCPv6]\nUseDomains=no\n"; !strings.HasSuffix(string(c.After), want) {
					t.Errorf("%s:\n%s", c.Path, c.After)
				}
			}
		}
		if diff := cmp.Diff([]string{"/etc/systemd/network/20-wired.network.d/nodedns.conf"}, paths); diff != "" {
			t.Errorf("drop-ins (-want +got):\n%s", diff)
		}
		reload := slices.ContainsFunc(p.Actions, func(a Action) bool { return a.Kind() == NetworkctlReload{}.Kind() })
		if reload != apply {
			t.Errorf("netplan.apply=%v: networkctl reload planned = %v", apply, reload)
		}
		if !apply && !slices.ContainsFunc(p.Notes, func(n string) bool { return strings.Contains(n, "`networkctl reload` is not run") }) {
			t.Errorf("notes %q do not say the reload is not run", p.Notes)
		}
		if slices.ContainsFunc(p.Changes, func(c Change) bool { return c.Path == netplan.NodednsFile }) {
			t.Errorf("a netplan file was planned on a node without netplan")
		}
	}
	cfg := config.Default()
	cfg.Netplan.Mode = config.NetplanOff
	if p := Compute(node.Observe(nodefs.NewReader(root), cfg, now), cfg); slices.ContainsFunc(p.Changes, func(c Change) bool { return strings.HasPrefix(c.Path, "/etc/systemd/network/") }) {
		t.Errorf("netplan.mode off still writes networkd drop-ins")
	}
}

func addrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, a := range s {
		out[i] = netip.MustParseAddr(a)
	}
	return out
}
