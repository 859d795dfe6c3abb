package hostnet_test

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netns"

	"github.com/nodedns/nodedns/internal/hostnet"
	"github.com/nodedns/nodedns/internal/hostnet/netstate"
	"github.com/nodedns/nodedns/internal/testutil/nstest"
)

// TestReaderLive reads a sandbox node's kernel state: the nodelocaldns bridge with its /32 and /128
// (and the kernel's own fe80:: once it is up), the local-table routes of both, an ip rule ahead of
// the local table, and the default-route uplink with its gateway and addresses.
func TestReaderLive(t *testing.T) {
	sb := nstest.New(t)
	peer := nstest.New(t)
	up, _ := nstest.Veth(t, sb, peer, "10.77.0.5/24", "10.77.0.1/24")
	sb.Run(t, "ip route add default via 10.77.0.1 dev "+up+
		" && ip link add nodelocaldns type bridge && ip addr add 169.254.25.10/32 dev nodelocaldns"+
		" && ip addr add fd00:25::10/128 dev nodelocaldns nodad && ip link set nodelocaldns up"+
		" && ip rule add iif vlan.eth.2 lookup 102 priority 10")
	// The kernel installs the IPv6 address's local route asynchronously after `ip link set up` (seen
	// missing in about one run in thirty on a loaded machine): wait for the kernel, then read it.
	nstest.WaitFor(t, 10*time.Second, "the local route of fd00:25::10", func() bool {
		out, err := sb.Try("ip -6 route show table local fd00:25::10/128")
		return err == nil && strings.Contains(out, "fd00:25::10")
	})
	ns, err := netns.GetFromPath(fmt.Sprintf("/proc/%d/ns/net", sb.PID))
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	r, closeR, err := hostnet.NewAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer closeR()

	l, err := r.Link("nodelocaldns")
	if err != nil || l == nil {
		t.Fatalf("Link(nodelocaldns) = %v, %v", l, err)
	}
	if l.Type != "bridge" || !l.AdminUp {
		t.Errorf("link %+v: want an up bridge", l)
	}
	want := map[netip.Prefix]bool{netip.MustParsePrefix("169.254.25.10/32"): false, netip.MustParsePrefix("fd00:25::10/128"): false}
	for _, p := range l.Addrs {
		if _, ok := want[p]; ok {
			want[p] = true
		}
	}
	for p, seen := range want {
		if !seen {
			t.Errorf("address %s missing from %v", p, l.Addrs)
		}
	}
	if none, err := r.Link("nope0"); none != nil || err != nil {
		t.Errorf("Link(nope0) = %v, %v; want nil, nil", none, err)
	}

	for fam, dst := range map[int]string{4: "169.254.25.10/32", 6: "fd00:25::10/128"} {
		routes, err := r.LocalRoutes(fam)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, rt := range routes {
			found = found || (rt.Dst == netip.MustParsePrefix(dst) && rt.LinkIndex == l.Index)
		}
		if !found {
			t.Errorf("IPv%d local routes %v lack %s on nodelocaldns", fam, routes, dst)
		}
	}

	rules, err := r.Rules(4)
	if err != nil {
		t.Fatal(err)
	}
	var got []netstate.Rule
	for _, ru := range rules {
		if ru.Priority == 10 {
			got = append(got, ru)
		}
	}
	if diff := cmp.Diff([]netstate.Rule{{Family: 4, Priority: 10, Table: 102, IIF: "vlan.eth.2"}}, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("rule (-want +got):\n%s", diff)
	}

	u, err := r.Uplink()
	if err != nil || u == nil {
		t.Fatalf("Uplink() = %v, %v", u, err)
	}
	if u.IfName != up || u.Gateway != netip.MustParseAddr("10.77.0.1") || len(u.Addrs) != 1 || u.Addrs[0] != netip.MustParsePrefix("10.77.0.5/24") {
		t.Errorf("uplink %+v, want %s via 10.77.0.1 with 10.77.0.5/24", u, up)
	}
}
