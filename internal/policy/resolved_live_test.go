package policy

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/systemd"
)

// TestResolvedStaleRestart: when resolved's live global DNS (over D-Bus) still lists a loop address
// that its configuration files no longer list (a drop-in written while the restart failed), the
// plan restarts resolved; when the files agree with what runs, or the files still list the loop
// (the drop-in fixes that), no extra restart is planned.
func TestResolvedStaleRestart(t *testing.T) {
	cache := netip.MustParseAddr("169.254.25.10")
	real := netip.MustParseAddr("10.0.0.2")
	srv := func(a netip.Addr) systemd.Server { return systemd.Server{Addr: a, Raw: a.String()} }
	tests := []struct {
		name    string
		files   []systemd.Server // what resolved.conf + drop-ins say, nodedns's drop-in included
		others  []systemd.Server // the same without nodedns's drop-in
		live    []netip.Addr     // nil: no live view (under --root)
		dropIn  bool
		restart int
	}{
		{name: "drop-in in place, resolved not restarted", files: []systemd.Server{srv(real)}, others: []systemd.Server{srv(cache), srv(real)}, live: []netip.Addr{cache, real}, dropIn: true, restart: 1},
		{name: "drop-in in place, resolved restarted", files: []systemd.Server{srv(real)}, others: []systemd.Server{srv(cache), srv(real)}, live: []netip.Addr{real}, dropIn: true, restart: 0},
		{name: "no live view", files: []systemd.Server{srv(real)}, others: []systemd.Server{srv(cache), srv(real)}, dropIn: true, restart: 0},
		{name: "files still list the cache: the drop-in plans the one restart", files: []systemd.Server{srv(cache), srv(real)}, others: []systemd.Server{srv(cache), srv(real)}, live: []netip.Addr{cache, real}, restart: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &node.Snapshot{Now: time.Now(),
				Resolved: &systemd.ResolvedConfig{DNS: tc.files}, ResolvedOthers: &systemd.ResolvedConfig{DNS: tc.others},
				ResolvedPersistent: &systemd.ResolvedConfig{DNS: tc.files},
				ResolvedResolv:     resolvFile(t, node.ResolvedResolvConf, "nameserver 10.0.0.2\n"),
			}
			if tc.dropIn {
				s.ResolvedDropIn = node.Managed{Path: node.ResolvedDropIn, Exists: true, Data: DropIn([]string{"10.0.0.2"}, []string{"169.254.25.10"}, nil)}
			}
			if tc.live != nil {
				s.ResolvedLive = &systemd.ResolvedState{}
				for _, a := range tc.live {
					s.ResolvedLive.DNS = append(s.ResolvedLive.DNS, systemd.DNSServer{Addr: a})
				}
			}
			p := Compute(s, config.Default())
			n := 0
			for _, a := range p.Actions {
				if a.Kind() == "restart-resolved" {
					n++
				}
			}
			if n != tc.restart {
				t.Errorf("restart-resolved actions = %d, want %d (actions %+v, changes %d)", n, tc.restart, p.Actions, len(p.Changes))
			}
			if tc.restart == 1 && tc.dropIn && slices.ContainsFunc(p.Changes, func(c Change) bool { return c.Path == node.ResolvedDropIn }) {
				t.Errorf("the drop-in was rewritten although it is right: %+v", p.Changes)
			}
		})
	}
}
