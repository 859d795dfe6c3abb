package probes

import (
	"context"
	"strings"
	"testing"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/leases"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/policy"
	"github.com/nodedns/nodedns/resolvconf"
)

func TestSearchLimits(t *testing.T) {
	mk := func(search string) *Env {
		f, err := resolvconf.Parse([]byte("nameserver 10.0.0.2\nsearch " + search + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		s := &node.Snapshot{ResolvConf: node.ResolvFile{Path: node.EtcResolvConf, Target: node.EtcResolvConf, Exists: true, File: f}}
		return &Env{Snapshot: s, Config: config.Default(), Plan: policy.Compute(s, config.Default())}
	}
	var many []string
	for i := range 30 {
		many = append(many, "d"+strings.Repeat("x", i%5)+string(rune('a'+i%26))+".example")
	}
	tests := []struct {
		name, search string
		want         Status
		say          string
	}{
		{"fine", "corp.example", OK, ""},
		{"too many for kubelet", strings.Join(many, " "), Problem, "kubelet allows 32"},
		{"musl line limit", strings.Repeat("a", 60) + ".example " + strings.Repeat("b", 60) + ".example " + strings.Repeat("c", 60) + ".example", Problem, "musl ignores"},
	}
	for _, tc := range tests {
		r := resolvConfSearch{}.Run(context.Background(), mk(tc.search))
		if r.Status != tc.want || !strings.Contains(r.Message, tc.say) {
			t.Errorf("%s: %s %q", tc.name, r.Status, r.Message)
		}
	}
}

// TestSearchHostileWord: a word of a hostile DHCP offer that reached /etc/resolv.conf's search line
// is shown quoted and escaped, as dhcp.search shows the offer.
func TestSearchHostileWord(t *testing.T) {
	f, err := resolvconf.Parse([]byte("nameserver 10.0.0.2\nsearch x.example$(id)`id` corp.example\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := &node.Snapshot{ResolvConf: node.ResolvFile{Path: node.EtcResolvConf, Target: node.EtcResolvConf, Exists: true, File: f},
		Leases: []leases.Lease{{Path: "/var/lib/dhcp/dhclient.eth0.leases", Interface: "eth0", DomainName: "x.example$(id)`id`"}}}
	r := resolvConfSearch{}.Run(context.Background(), &Env{Snapshot: s, Config: config.Default(), Plan: policy.Compute(s, config.Default())})
	if want := "DHCP search domain \"x.example$(id)`id`\" reaches the host search list"; r.Status != Problem || !strings.Contains(r.Message, want) {
		t.Errorf("%s %q, want a problem saying %q", r.Status, r.Message, want)
	}
}
