package policy

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/nodefs"
)

// kubesprayNode copies one of the kubespray-shaped trees and swaps in a lease file and dhclient.conf
// captured from a real dhclient 4.4 (internal/leases/testdata/kubespray), and optionally nodedns's record.
func kubesprayNode(t *testing.T, tree, leaseFile, conf, record string) string {
	t.Helper()
	root := t.TempDir()
	src := filepath.Join("../../cmd/nodedns/testdata/kubespray", tree)
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(root, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(root, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	put := func(node, data string) {
		full := filepath.Join(root, node)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if leaseFile != "" {
		data, err := os.ReadFile(filepath.Join("../leases/testdata/kubespray", leaseFile))
		if err != nil {
			t.Fatal(err)
		}
		put("/var/lib/dhcp/dhclient.enp1s0.leases", string(data))
	}
	if conf != "" {
		data, err := os.ReadFile(filepath.Join("../leases/testdata/kubespray", conf))
		if err != nil {
			t.Fatal(err)
		}
		put("/etc/dhcp/dhclient.conf", string(data))
	}
	if record != "" {
		put(node.OfferedStatePath, record)
	}
	return root
}

// TestOfferedBehindSupersede: the server DHCP offered stays known behind kubespray's supersede
// (docs/contract.md "Upstreams"): from the lease history while dhclient keeps it, from nodedns's
// record once dhclient's second restart trimmed it, and else the plan blocks naming the line.
func TestOfferedBehindSupersede(t *testing.T) {
	// The captured lease files expire at 02:2x on 2026-11-24.
	captured := time.Date(2026, 11, 24, 2, 23, 0, 0, time.UTC)
	offered := netip.MustParseAddr("10.66.0.53")
	record := string(node.MarshalOfferedState(node.OfferedState{Interfaces: map[string]node.OfferedRecord{
		"enp1s0": {Servers: []netip.Addr{offered}, LeaseFile: "/var/lib/dhcp/dhclient.enp1s0.leases"}}}))
	tests := []struct {
		name              string
		tree, lease, conf string
		record            string
		now               time.Time
		wantUp            []netip.Addr
		wantFrom          string // DHCPOffer.From
		wantUsed          bool
		wantRecord        bool // the plan writes the record
		wantBlocked       []string
	}{
		{name: "kubespray defaults: the lease still lists the real server", tree: "dhclient", now: time.Now(),
			wantUp: []netip.Addr{offered}, wantFrom: "/var/lib/dhcp/dhclient.enp1s0.leases:1", wantRecord: true},
		{name: "loop only, history in the lease file", tree: "dhclient-loop-only", now: time.Now(),
			wantUp: []netip.Addr{offered}, wantFrom: "/var/lib/dhcp/dhclient.enp1s0.leases:1", wantUsed: true, wantRecord: true},
		{name: "loop only, history in the lease file, record up to date", tree: "dhclient-loop-only", record: record, now: time.Now(),
			wantUp: []netip.Addr{offered}, wantFrom: "/var/lib/dhcp/dhclient.enp1s0.leases:1", wantUsed: true},
		{name: "loop only after dhclient's second restart, with nodedns's record", tree: "dhclient-loop-only",
			lease: "loop-only-after-second-restart.leases", record: record, now: captured,
			wantUp: []netip.Addr{offered}, wantFrom: node.OfferedStatePath, wantUsed: true},
		{name: "loop only after dhclient's second restart, nothing recorded", tree: "dhclient-loop-only",
			lease: "loop-only-after-second-restart.leases", now: captured,
			wantBlocked: []string{"/var/lib/nodedns/resolv.conf", node.EtcResolvConf}},
		{name: "prepend keeps the offer in the lease", tree: "dhclient", lease: "prepend.leases", conf: "prepend.conf",
			now: captured, wantUp: []netip.Addr{offered}, wantFrom: "/var/lib/dhcp/dhclient.enp1s0.leases:1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := kubesprayNode(t, tc.tree, tc.lease, tc.conf, tc.record)
			cfg := config.Default()
			s := node.Observe(nodefs.NewReader(root), cfg, tc.now)
			p := Compute(s, cfg)
			if !slices.Equal(p.Facts.Upstreams, tc.wantUp) {
				t.Errorf("upstreams %v (from %q), want %v", p.Facts.Upstreams, p.Facts.UpstreamSource, tc.wantUp)
			}
			if len(p.Facts.DHCPOffers) != 1 {
				t.Fatalf("offers %+v, want one for enp1s0", p.Facts.DHCPOffers)
			}
			o := p.Facts.DHCPOffers[0]
			if o.From != tc.wantFrom || o.Used != tc.wantUsed || o.Rule == nil || o.Rule.Line != 2 || o.Rule.Path != "/etc/dhcp/dhclient.conf" || len(o.RuleLoops) == 0 {
				t.Errorf("offer %+v (rule %v), want from %q, used %v, the rule at /etc/dhcp/dhclient.conf:2 with a loop address", o, o.Rule, tc.wantFrom, tc.wantUsed)
			}
			wrote := slices.ContainsFunc(p.Changes, func(c Change) bool { return c.Path == node.OfferedStatePath })
			if wrote != tc.wantRecord {
				t.Errorf("record written: %v, want %v", wrote, tc.wantRecord)
			}
			var blocked []string
			for _, b := range p.Blocked {
				blocked = append(blocked, b.Target)
				for _, say := range []string{"/etc/dhcp/dhclient.conf:2 (`supersede domain-name-servers 169.254.25.10`)", "kubespray writes that line", "disable_host_nameservers"} {
					if !strings.Contains(b.Reason, say) {
						t.Errorf("blocked %s: reason lacks %q: %s", b.Target, say, b.Reason)
					}
				}
			}
			if !slices.Equal(blocked, tc.wantBlocked) {
				t.Errorf("blocked %v, want %v", blocked, tc.wantBlocked)
			}
			if len(tc.wantUp) > 0 {
				kf := slices.IndexFunc(p.Changes, func(c Change) bool { return c.Path == cfg.Kubelet.ResolvConf })
				if kf < 0 || !strings.Contains(string(p.Changes[kf].After), "nameserver 10.66.0.53\n") {
					t.Errorf("kubelet file does not list the DHCP server: %+v", p.Changes)
				}
			}
		})
	}
}

// TestOfferedRecordFixedPoint: once written, the record matches what the plan would write again,
// and a record is kept (not rewritten) when the history is gone.
func TestOfferedRecordFixedPoint(t *testing.T) {
	root := kubesprayNode(t, "dhclient-loop-only", "", "", "")
	cfg := config.Default()
	p := Compute(node.Observe(nodefs.NewReader(root), cfg, time.Now()), cfg)
	i := slices.IndexFunc(p.Changes, func(c Change) bool { return c.Path == node.OfferedStatePath })
	if i < 0 {
		t.Fatal("no record planned")
	}
	if err := os.MkdirAll(filepath.Join(root, "var/lib/nodedns"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, node.OfferedStatePath), p.Changes[i].After, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := node.ParseOfferedState("record", p.Changes[i].After); err != nil {
		t.Fatalf("the record does not parse: %v", err)
	}
	p = Compute(node.Observe(nodefs.NewReader(root), cfg, time.Now()), cfg)
	if slices.ContainsFunc(p.Changes, func(c Change) bool { return c.Path == node.OfferedStatePath }) {
		t.Error("the record is rewritten although nothing changed")
	}
}
