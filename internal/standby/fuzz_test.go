package standby_test

import (
	"net/netip"
	"testing"

	"github.com/nodedns/nodedns/internal/testutil/fixture"

	"github.com/nodedns/nodedns/internal/standby"
	"github.com/nodedns/nodedns/probes"
)

// FuzzClusterDNSFromCorefile: whatever a Corefile says, the cluster DNS read from it never panics,
// and Choose never hands the forwarder a loop address from it.
func FuzzClusterDNSFromCorefile(f *testing.F) {
	f.Add([]byte(fixture.KubesprayCorefile), "cluster.local")
	f.Add([]byte("cluster.local:53 {\n forward . 169.254.25.10 dns://[fd00::1]:53 127.0.0.53 tls://10.0.0.1\n}\n"), "cluster.local.")
	f.Add([]byte(".:53 {\n forward cluster.local 10.96.0.10:5353\n}\n"), "CLUSTER.LOCAL")
	f.Fuzz(func(t *testing.T, corefile []byte, domain string) {
		blocks, _ := probes.ParseServerBlocks(corefile)
		var fw []standby.Forward
		for _, x := range probes.AllForwards(blocks) {
			fw = append(fw, standby.Forward{Zones: x.Zones, From: x.From, To: x.To})
		}
		dns := standby.ClusterDNSFromCorefile(fw, domain)
		cache := []netip.Addr{netip.MustParseAddr("169.254.25.10")}
		tg := standby.Choose(standby.Inputs{CacheAddrs: cache, CorefileClusterDNS: dns, ClusterDomain: domain})
		for _, a := range tg.Cluster {
			if why := standby.LoopReason(a, cache); why != "" {
				t.Fatalf("loop address %s (%s) chosen from %q", a, why, corefile)
			}
		}
	})
}

// FuzzParseStatus: the state file, which anyone with root could plant, parses or fails without
// panicking, and what parses has a known state.
func FuzzParseStatus(f *testing.F) {
	f.Add([]byte(`{"pid":12,"state":"active","since":"2026-01-02T03:04:05Z","queries":3,"covering":["169.254.25.10"]}`))
	f.Add([]byte(`{"state":"ready","corefileClusterDNS":["10.233.0.3"]}`))
	f.Add([]byte(`{"state":"unknown","uid":0,"cacheUID":65534}`))
	f.Add([]byte(`{"state":"bogus"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := standby.ParseStatus("standby.json", data)
		if err == nil && st.State != standby.Ready && st.State != standby.Active && st.State != standby.Unknown {
			t.Fatalf("state %q accepted", st.State)
		}
	})
}
