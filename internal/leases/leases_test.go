package leases

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// cmpOpts compares netip values by value (they have unexported fields).
var cmpOpts = cmp.Options{cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})}

// now is the fixed "current time" of every test: 2026-01-15 08:00:00 UTC.
var now = time.Date(2026, 1, 15, 8, 0, 0, 0, time.UTC)

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func TestCurrent(t *testing.T) {
	tests := []struct {
		name   string
		expire time.Time
		want   bool
	}{
		{"no expiry (networkd, expire never)", time.Time{}, true},
		{"expires later", now.Add(time.Minute), true},
		{"expired earlier", now.Add(-time.Minute), false},
		{"expires exactly now", now, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (Lease{Expire: tt.expire}).Current(now); got != tt.want {
				t.Errorf("Current(%v) with Expire %v = %v, want %v", now, tt.expire, got, tt.want)
			}
		})
	}
}

func TestDomains(t *testing.T) {
	tests := []struct {
		name   string
		domain string
		search []string
		want   []string
	}{
		{"none", "", nil, nil},
		{"domain name only", "example.org", nil, []string{"example.org"}},
		{"search only, trailing dots", "", []string{"example.org.", "corp.example."}, []string{"example.org", "corp.example"}},
		{"deduplicated across options", "example.org", []string{"example.org.", "corp.example."}, []string{"example.org", "corp.example"}},
		{"lowercased", "Example.ORG.", []string{"CORP.example"}, []string{"example.org", "corp.example"}},
		{"multi-word domain-name split", "a.example  b.example", nil, []string{"a.example", "b.example"}},
		{"empty and root entries dropped", " ", []string{"", ".", "x.example"}, []string{"x.example"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Lease{DomainName: tt.domain, SearchDomains: tt.search}.Domains()
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Domains() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMaskBits(t *testing.T) {
	tests := []struct {
		mask string
		bits int
		ok   bool
	}{
		{"255.255.255.0", 24, true},
		{"255.255.240.0", 20, true},
		{"255.255.255.255", 32, true},
		{"0.0.0.0", 0, true},
		{"255.0.255.0", 0, false},
		{"255.255.255.1", 0, false},
		{"::ffff", 0, false},
	}
	for _, tt := range tests {
		bits, ok := maskBits(netip.MustParseAddr(tt.mask))
		if bits != tt.bits || ok != tt.ok {
			t.Errorf("maskBits(%s) = %d, %v; want %d, %v", tt.mask, bits, ok, tt.bits, tt.ok)
		}
	}
}
