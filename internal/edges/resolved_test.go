package edges

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/internal/policy"
	"github.com/nodedns/nodedns/internal/store"
	"github.com/nodedns/nodedns/systemd"
	"github.com/nodedns/nodedns/systemd/bus"
)

var addrCmp = cmp.Comparer(func(a, b netip.Addr) bool { return a == b })

// TestMergeLiveLinks: resolved's live answer replaces the file-read DNS and domains of a link but
// keeps what only the files know (networkd management), adds links only resolved knows when they
// carry settings, and drops stale file-read links resolved no longer has.
func TestMergeLiveLinks(t *testing.T) {
	a := netip.MustParseAddr
	s := &node.Snapshot{Links: []systemd.LinkState{
		{IfIndex: 2, IfName: "eth0", DNS: []netip.Addr{a("10.0.0.1")}, NetworkdManaged: true, Source: "/run/systemd/netif/links/2"},
		{IfIndex: 3, IfName: "eth1", Domains: []systemd.Domain{{Name: "old.example"}}, Source: "/run/systemd/resolve/netif/3"},
		{IfIndex: 9, IfName: "gone", DNS: []netip.Addr{a("10.9.9.9")}},
	}}
	live := systemd.ResolvedState{Links: []systemd.LinkInfo{
		{IfIndex: 1},
		{IfIndex: 2, DNS: []systemd.DNSServer{{IfIndex: 2, Addr: a("10.0.0.2")}}},
		{IfIndex: 3, Domains: []systemd.Domain{{Name: "example.org"}}},
		{IfIndex: 4, DNS: []systemd.DNSServer{{IfIndex: 4, Addr: a("169.254.25.10")}}},
	}}
	MergeLiveLinks(s, live, func(i int) string { return map[int]string{4: "ens4"}[i] })
	want := []systemd.LinkState{
		{IfIndex: 2, IfName: "eth0", DNS: []netip.Addr{a("10.0.0.2")}, NetworkdManaged: true, Source: "/run/systemd/netif/links/2"},
		{IfIndex: 3, IfName: "eth1", Domains: []systemd.Domain{{Name: "example.org"}}, Source: "/run/systemd/resolve/netif/3"},
		{IfIndex: 4, IfName: "ens4", DNS: []netip.Addr{a("169.254.25.10")}, Source: "systemd-resolved link 4 (D-Bus)"},
	}
	if diff := cmp.Diff(want, s.Links, addrCmp); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// fakeBus is systemd-resolved as the integration sees it, in memory: links by ifindex, and every
// set call recorded. busy links answer LinkBusy as resolved 252 does for networkd's links.
type fakeBus struct {
	links map[int]systemd.LinkInfo
	busy  map[int]bool
	calls []string
}

func (f *fakeBus) State(context.Context) (systemd.ResolvedState, error) {
	var st systemd.ResolvedState
	for _, l := range f.links {
		st.Links = append(st.Links, l)
	}
	return st, nil
}

func (f *fakeBus) Link(_ context.Context, i int) (systemd.LinkInfo, error) {
	l, ok := f.links[i]
	if !ok {
		return l, &bus.BusError{Name: bus.ErrNameNoSuchLink}
	}
	return l, nil
}

func (f *fakeBus) SetLinkDNS(_ context.Context, i int, s []systemd.DNSServer) error {
	if f.busy[i] {
		return &bus.BusError{Name: bus.ErrNameLinkBusy}
	}
	var out []string
	for _, x := range s {
		out = append(out, x.String())
	}
	f.calls = append(f.calls, fmt.Sprintf("dns %d %v", i, out))
	l := f.links[i]
	l.DNS = s
	f.links[i] = l
	return nil
}

func (f *fakeBus) SetLinkDomains(_ context.Context, i int, d []systemd.Domain) error {
	if f.busy[i] {
		return &bus.BusError{Name: bus.ErrNameLinkBusy}
	}
	f.calls = append(f.calls, fmt.Sprintf("domains %d %v", i, d))
	l := f.links[i]
	l.Domains = d
	f.links[i] = l
	return nil
}

// TestResolvedActorDecisions drives the resolved actor through the ResolvedBus seam: it drops only
// what the action names (other servers keep their port and name, routing-only domains stay),
// records the original before its first change, does nothing when the setting is already right,
// turns LinkBusy into an error that names netplan, and on restore sets the recorded originals back.
func TestResolvedActorDecisions(t *testing.T) {
	a := netip.MustParseAddr
	fb := &fakeBus{
		links: map[int]systemd.LinkInfo{
			3: {IfIndex: 3,
				DNS:     []systemd.DNSServer{{IfIndex: 3, Addr: a("169.254.25.10")}, {IfIndex: 3, Addr: a("10.0.0.2"), Port: 5353, Name: "dns.example"}},
				Domains: []systemd.Domain{{Name: "example.org"}, {Name: "corp", RoutingOnly: true}}},
			4: {IfIndex: 4, DNS: []systemd.DNSServer{{IfIndex: 4, Addr: a("169.254.25.10")}}},
		},
		busy: map[int]bool{4: true},
	}
	root := t.TempDir()
	r := &Resolved{Store: testStore(root), Bus: fb, IfName: func(i int) string { return map[int]string{3: "eth1", 4: "eth2"}[i] }}
	ctx := context.Background()
	eth1 := policy.Link{Index: 3, Name: "eth1"}
	for _, act := range []policy.Action{
		policy.SetLinkDNS{Link: eth1, Drop: []netip.Addr{a("169.254.25.10")}},
		policy.SetLinkDomains{Link: eth1, Drop: []string{"Example.org."}},
		// The same actions again: the settings are right already, nothing is set.
		policy.SetLinkDNS{Link: eth1, Drop: []netip.Addr{a("169.254.25.10")}},
		policy.SetLinkDomains{Link: eth1, Drop: []string{"example.org"}},
	} {
		if !r.Handles(act) {
			t.Fatalf("Resolved does not handle %s", act.Kind())
		}
		if err := r.Do(ctx, act); err != nil {
			t.Fatalf("%s: %v", act.Kind(), err)
		}
	}
	want := []string{"dns 3 [10.0.0.2:5353#dns.example]", "domains 3 [{corp true}]"}
	if diff := cmp.Diff(want, fb.calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	err := r.Do(ctx, policy.SetLinkDNS{Link: policy.Link{Index: 4, Name: "eth2"}, Drop: []netip.Addr{a("169.254.25.10")}})
	if err == nil || !errors.Is(err, bus.ErrLinkBusy) || !strings.Contains(err.Error(), "netplan") {
		t.Errorf("a networkd link: %v, want LinkBusy naming netplan", err)
	}
	if err := r.Do(ctx, policy.SetLinkDNS{Link: eth1}); err == nil {
		t.Error("an action that drops nothing was accepted")
	}
	if r.Handles(policy.NetplanApply{}) {
		t.Error("Resolved claims netplan apply")
	}

	fb.calls = nil
	res, err := r.BeforeRestore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want = []string{"dns 3 [169.254.25.10 10.0.0.2:5353#dns.example]", "domains 3 [{example.org false} {corp true}]"}
	if diff := cmp.Diff(want, fb.calls); diff != "" {
		t.Errorf("restore calls (-want +got):\n%s", diff)
	}
	if len(res) != 1 || res[0].Action != store.ActionRestored {
		t.Errorf("restore results %+v", res)
	}
}

// TestBusyErrorNamesTheWay: a LinkBusy answer becomes an error that names netplan and networkd.
func TestBusyErrorNamesTheWay(t *testing.T) {
	err := busyError("set domains", "eth0", &bus.BusError{Name: bus.ErrNameLinkBusy, Message: "Link eth0 is managed."})
	for _, want := range []string{"eth0", "systemd-networkd", "netplan", "use-domains: false", "UseDomains=no"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	other := busyError("set domains", "eth0", &bus.BusError{Name: bus.ErrNameNoSuchLink})
	if !errors.Is(other, bus.ErrLinkGone) || strings.Contains(other.Error(), "netplan") {
		t.Errorf("a gone link: %v", other)
	}
}

// TestLinkRecordKeepsFirstOriginal: the record keeps the values before nodedns's FIRST change of
// each setting, is written through store.Store (backed up as created, so restore removes it), is
// private (0600) and reads back.
func TestLinkRecordKeepsFirstOriginal(t *testing.T) {
	root := t.TempDir()
	r := &Resolved{Store: testStore(root)}
	a := netip.MustParseAddr
	orig := []systemd.DNSServer{{Addr: a("169.254.25.10")}, {Addr: a("10.0.0.2"), Port: 5353, Name: "dns.example"}}
	if _, err := r.record(3, "eth1", &orig, nil); err != nil {
		t.Fatal(err)
	}
	later := []systemd.DNSServer{{Addr: a("10.0.0.2")}}
	doms := []systemd.Domain{{Name: "example.org"}, {Name: "corp", RoutingOnly: true}}
	if _, err := r.record(3, "eth1", &later, &doms); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, LinkRecordPath))
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(filepath.Join(root, LinkRecordPath)); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	recs, err := ParseLinkRecords("x", data)
	if err != nil {
		t.Fatal(err)
	}
	want := []LinkRecord{{IfIndex: 3, IfName: "eth1",
		DNS:     &[]RecordedDNS{{Addr: "169.254.25.10"}, {Addr: "10.0.0.2", Port: 5353, Name: "dns.example"}},
		Domains: &[]RecordedDom{{Name: "example.org"}, {Name: "corp", RoutingOnly: true}}}}
	if diff := cmp.Diff(want, recs); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	st := &store.Store{Root: root, FS: nodefs.OS()}
	res, err := st.Restore(nil)
	if err != nil || len(res) != 1 || res[0].Action != store.ActionRemoved {
		t.Errorf("restore of the record: %+v, %v", res, err)
	}
}

func TestParseLinkRecordsRejects(t *testing.T) {
	for _, bad := range []string{`{`, `{"links":[{"ifindex":0}]}`, `{"links":[{"ifindex":2,"dns":[{"addr":"nope"}]}]}`,
		`{"links":[{"ifindex":2,"mtu":1500}]}`, `{"links":[]} {"links":[]}`} {
		if _, err := ParseLinkRecords("/var/lib/nodedns/resolved-links.json", []byte(bad)); err == nil || !strings.Contains(err.Error(), "resolved-links.json") {
			t.Errorf("ParseLinkRecords(%s) = %v", bad, err)
		}
	}
}

func TestIsResolvedConfig(t *testing.T) {
	for p, want := range map[string]bool{
		"/etc/systemd/resolved.conf.d/zz-nodedns.conf": true,
		"/etc/systemd/resolved.conf":                   true,
		"/run/systemd/resolved.conf.d/x.conf":          true,
		"/var/lib/nodedns/resolv.conf":                 false,
		"/etc/systemd/resolved.conf.d/sub/x.conf":      false,
		"/etc/systemd/system/systemd-resolved.service": false,
	} {
		if got := isResolvedConfig(p); got != want {
			t.Errorf("isResolvedConfig(%s) = %v", p, got)
		}
	}
}

func FuzzParseLinkRecords(f *testing.F) {
	f.Add([]byte(`{"comment":"x","links":[{"ifindex":3,"ifname":"eth1","dns":[{"addr":"10.0.0.2"}],"domains":[{"name":"example.org"}]}]}`))
	f.Add([]byte(`{"links":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, err := ParseLinkRecords("f", data)
		if err != nil {
			return
		}
		for _, r := range recs {
			if r.IfIndex <= 0 {
				t.Fatalf("ifindex %d accepted", r.IfIndex)
			}
			if r.DNS != nil {
				for _, d := range *r.DNS {
					if _, err := netip.ParseAddr(d.Addr); err != nil {
						t.Fatalf("address %q accepted", d.Addr)
					}
				}
			}
		}
	})
}
