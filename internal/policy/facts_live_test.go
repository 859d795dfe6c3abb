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

// TestResolvedServers: the configuration's global servers, then every link's, then (when asked)
// resolved's resolv.conf, repeats kept; a configuration that could not be read adds none.
func TestResolvedServers(t *testing.T) {
	a := netip.MustParseAddr
	s := &node.Snapshot{Now: now,
		ResolvedResolv: resolvFile(t, node.ResolvedResolvConf, "nameserver 10.0.0.3\nnameserver 10.0.0.1\n"),
		Links: []systemd.LinkState{{IfIndex: 2, IfName: "eth0", DNS: []netip.Addr{a("10.0.0.2")}},
			{IfIndex: 3, IfName: "eth1", DNS: []netip.Addr{a("10.0.0.3")}}},
	}
	conf := &systemd.ResolvedConfig{DNS: []systemd.Server{{Addr: a("10.0.0.1")}}}
	eq := cmp.Comparer(func(x, y netip.Addr) bool { return x == y })
	for _, tc := range []struct {
		name     string
		conf     *systemd.ResolvedConfig
		withFile bool
		want     []netip.Addr
	}{
		{"all", conf, true, []netip.Addr{a("10.0.0.1"), a("10.0.0.2"), a("10.0.0.3"), a("10.0.0.3"), a("10.0.0.1")}},
		{"without the file", conf, false, []netip.Addr{a("10.0.0.1"), a("10.0.0.2"), a("10.0.0.3")}},
		{"no configuration", nil, true, []netip.Addr{a("10.0.0.2"), a("10.0.0.3"), a("10.0.0.3"), a("10.0.0.1")}},
	} {
		if diff := cmp.Diff(tc.want, ResolvedServers(s, tc.conf, tc.withFile), eq); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}
