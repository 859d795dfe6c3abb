package standby_test

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/nodedns/nodedns/internal/testutil/fixture"

	"github.com/nodedns/nodedns/internal/standby"
	"github.com/nodedns/nodedns/probes"
	"github.com/nodedns/nodedns/resolvconf"
)

var cache = netip.MustParseAddr("169.254.25.10")

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

func forwards(t *testing.T, corefile string) []standby.Forward {
	t.Helper()
	blocks, err := probes.ParseServerBlocks([]byte(corefile))
	if err != nil {
		t.Fatal(err)
	}
	var out []standby.Forward
	for _, f := range probes.AllForwards(blocks) {
		out = append(out, standby.Forward{Zones: f.Zones, From: f.From, To: f.To})
	}
	return out
}

func TestClusterDNSFromKubesprayCorefile(t *testing.T) {
	got := standby.ClusterDNSFromCorefile(forwards(t, fixture.KubesprayCorefile), "cluster.local.")
	if want := addrs("10.233.0.3"); !slices.Equal(got, want) {
		t.Fatalf("cluster DNS from the Corefile = %v, want %v", got, want)
	}
	if got := standby.ClusterDNSFromCorefile(forwards(t, fixture.KubesprayCorefile), "other.domain"); len(got) != 0 {
		t.Fatalf("a Corefile without the cluster domain gave %v", got)
	}
}

func TestChooseFollowsTheCorefile(t *testing.T) {
	tg := standby.Choose(standby.Inputs{
		CacheAddrs:         addrs("169.254.25.10"),
		CorefileClusterDNS: addrs("10.233.0.3"),
		Upstreams:          addrs("10.0.0.2", "10.0.0.3"),
	})
	if !slices.Equal(tg.Cluster, addrs("10.233.0.3")) || tg.ClusterFrom != "the cache's Corefile" {
		t.Errorf("cluster = %v from %q", tg.Cluster, tg.ClusterFrom)
	}
	if !slices.Equal(tg.Upstream, addrs("10.0.0.2", "10.0.0.3")) {
		t.Errorf("upstream = %v", tg.Upstream)
	}
	if !slices.Equal(tg.Zones, []string{"cluster.local", "in-addr.arpa", "ip6.arpa"}) {
		t.Errorf("zones = %v", tg.Zones)
	}
	// Config clusterDNS wins over the Corefile.
	tg = standby.Choose(standby.Inputs{CacheAddrs: addrs("169.254.25.10"), ClusterDNS: addrs("10.96.0.10"),
		CorefileClusterDNS: addrs("10.233.0.3"), ClusterDomain: "corp.example"})
	if !slices.Equal(tg.Cluster, addrs("10.96.0.10")) || tg.Zones[0] != "corp.example" {
		t.Errorf("config clusterDNS: cluster = %v, zones %v", tg.Cluster, tg.Zones)
	}
}

// TestChooseRefusesLoops: every address that would bring a query back to the cache address is
// refused, whichever source names it.
func TestChooseRefusesLoops(t *testing.T) {
	tg := standby.Choose(standby.Inputs{
		CacheAddrs:         addrs("169.254.25.10", "fd00:25::10"),
		ClusterDNS:         addrs("169.254.25.10", "fd00:25::10", "169.254.20.10", "127.0.0.53"),
		Upstreams:          addrs("127.0.0.53", "169.254.25.10", "::1", "0.0.0.0", "fe80::1", "169.254.20.10"),
		CorefileClusterDNS: addrs("10.233.0.3"), // config clusterDNS is set: not used
	})
	if tg.Usable() || len(tg.Cluster) != 0 || len(tg.Upstream) != 0 {
		t.Fatalf("loop addresses chosen: %+v", tg)
	}
	if len(tg.Refused) != 10 {
		t.Errorf("refused %d addresses, want 10: %v", len(tg.Refused), tg.Refused)
	}
	// A real upstream beside the loops is kept.
	tg = standby.Choose(standby.Inputs{CacheAddrs: addrs("169.254.25.10"), Upstreams: addrs("127.0.0.53", "169.254.169.253")})
	if !slices.Equal(tg.Upstream, addrs("169.254.169.253")) {
		t.Errorf("upstream = %v, want AWS's link-local resolver kept", tg.Upstream)
	}
}

// TestLoopFromFiles: /etc/resolv.conf and the Corefile both pointing back at the cache address give
// the standby nowhere to forward, read from the files as nodedns reads them.
func TestLoopFromFiles(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(p, []byte("nameserver 169.254.25.10\nnameserver 127.0.0.53\nsearch svc.cluster.local\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(p)
	rf, err := resolvconf.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	loopy := `cluster.local:53 {
    bind 169.254.25.10
    forward . 169.254.25.10
}
.:53 {
    bind 169.254.25.10
    forward . /etc/resolv.conf
}
`
	tg := standby.Choose(standby.Inputs{
		CacheAddrs:         []netip.Addr{cache},
		CorefileClusterDNS: standby.ClusterDNSFromCorefile(forwards(t, loopy), "cluster.local"),
		Upstreams:          rf.Nameservers(),
	})
	if tg.Usable() {
		t.Fatalf("the standby would forward to %+v", tg)
	}
}
