package policy

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/systemd"
)

// TestResolvedUpstreamsAfterARenewal: right after a DHCP renewal with a new server, resolved's live
// per-link view has the new server while its resolv.conf (rewritten a few ms later) still has the
// old one. With the live view the old server must not come back (seen live with networkd and
// resolved 252: the kubelet file listed both for one pass); without one (--root) the file is all
// there is and still counts.
func TestResolvedUpstreamsAfterARenewal(t *testing.T) {
	a := netip.MustParseAddr
	tests := []struct {
		name string
		live bool
		want []netip.Addr
	}{
		{"live view", true, []netip.Addr{a("10.77.0.55")}},
		{"files only", false, []netip.Addr{a("10.77.0.55"), a("10.77.0.54")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &node.Snapshot{Now: now,
				ResolvedResolv: resolvFile(t, node.ResolvedResolvConf, "nameserver 10.77.0.54\n"),
				Links:          []systemd.LinkState{{IfIndex: 2, IfName: "eth0", DNS: []netip.Addr{a("10.77.0.55")}}},
			}
			if tc.live {
				s.ResolvedLive = &systemd.ResolvedState{Links: []systemd.LinkInfo{{IfIndex: 2, DNS: []systemd.DNSServer{{IfIndex: 2, Addr: a("10.77.0.55")}}}}}
			}
			f := Derive(s, config.Default())
			if diff := cmp.Diff(tc.want, f.Upstreams, cmp.Comparer(func(x, y netip.Addr) bool { return x == y })); diff != "" || f.UpstreamSource != "systemd-resolved" {
				t.Errorf("upstreams (-want +got):\n%s source %q", diff, f.UpstreamSource)
			}
		})
	}
}
