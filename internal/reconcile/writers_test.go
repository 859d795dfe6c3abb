package reconcile

import (
	"fmt"
	"io/fs"
	"path"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/node"
)

func TestFights(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ours, theirs, other := []byte("ours\n"), []byte("theirs\n"), []byte("other\n")
	type step struct {
		at      time.Duration
		op      string // wrote, change, activity, resume
		data    []byte
		want    verdict
		resumed int
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"first write is no fight", []step{
			{op: "change", data: theirs, want: verdict{}},
		}},
		{"our own content unchanged is no fight", []step{
			{op: "wrote", data: ours},
			{op: "change", data: ours, want: verdict{}},
		}},
		{"rewrites up to the limit are followed, one more backs off", []step{
			{op: "wrote", data: ours},
			{at: 1 * time.Second, op: "change", data: theirs, want: verdict{count: 1}},
			{op: "wrote", data: ours},
			{at: 2 * time.Second, op: "change", data: theirs, want: verdict{count: 2}},
			{op: "wrote", data: ours},
			{at: 3 * time.Second, op: "change", data: theirs, want: verdict{hold: true, started: true, logNew: true, count: 3}},
			{at: 4 * time.Second, op: "change", data: theirs, want: verdict{hold: true, count: 3}},
			{at: 5 * time.Second, op: "change", data: other, want: verdict{hold: true, logNew: true, count: 3}},
		}},
		{"rewrites spread wider than the window never back off", []step{
			{op: "wrote", data: ours},
			{at: 0, op: "change", data: theirs, want: verdict{count: 1}},
			{op: "wrote", data: ours},
			{at: 11 * time.Second, op: "change", data: theirs, want: verdict{count: 1}},
			{op: "wrote", data: ours},
			{at: 22 * time.Second, op: "change", data: theirs, want: verdict{count: 1}},
			{op: "wrote", data: ours},
			{at: 33 * time.Second, op: "change", data: theirs, want: verdict{count: 1}},
		}},
		{"resume one quiet window after the last foreign touch", []step{
			{op: "wrote", data: ours},
			{op: "change", data: theirs, want: verdict{count: 1}},
			{op: "wrote", data: ours},
			{op: "change", data: theirs, want: verdict{count: 2}},
			{op: "wrote", data: ours},
			{op: "change", data: theirs, want: verdict{hold: true, started: true, logNew: true, count: 3}},
			{at: 8 * time.Second, op: "activity", data: other},
			{at: 17 * time.Second, op: "resume", resumed: 0},
			{at: 18 * time.Second, op: "resume", resumed: 1},
			// After resuming, the other writer's content stands: the next change is no fight.
			{at: 19 * time.Second, op: "change", data: other, want: verdict{}},
		}},
		{"accepted foreign content ends ownership", []step{
			{op: "wrote", data: ours},
			{op: "accepted", data: theirs},
			{op: "change", data: other, want: verdict{}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFights(2, 10*time.Second)
			for i, s := range tc.steps {
				now := t0.Add(s.at)
				switch s.op {
				case "wrote":
					f.wrote("/etc/resolv.conf", s.data)
				case "accepted":
					f.accepted("/etc/resolv.conf", s.data)
				case "activity":
					f.foreignActivity("/etc/resolv.conf", s.data, now)
				case "resume":
					got, _ := f.resumable(now)
					if len(got) != s.resumed {
						t.Fatalf("step %d: resumed %d, want %d", i, len(got), s.resumed)
					}
				case "change":
					got := f.change("/etc/resolv.conf", s.data, now)
					got.digest = ""
					if diff := cmp.Diff(s.want, got, cmp.AllowUnexported(verdict{})); diff != "" {
						t.Fatalf("step %d: verdict (-want +got):\n%s", i, diff)
					}
				}
			}
		})
	}
}

func TestFightsOurs(t *testing.T) {
	f := newFights(10, time.Minute)
	if f.ours("/etc/resolv.conf", []byte("x")) {
		t.Error("nothing written yet, but ours")
	}
	f.wrote("/etc/resolv.conf", []byte("x"))
	if !f.ours("/etc/resolv.conf", []byte("x")) || f.ours("/etc/resolv.conf", []byte("y")) {
		t.Error("ours does not compare with the bytes last written")
	}
}

// TestComplete judges new content by what the reader that declared the file says is complete
// (node.Watches): each row names a node path and finds its declaration.
func TestComplete(t *testing.T) {
	decl := node.Watches(config.Default(), nil)
	spec := func(p string) watchSpec {
		for _, w := range decl {
			if w.Dir == path.Dir(p) && w.Match(path.Base(p)) {
				return watchSpec{Watch: w}
			}
		}
		t.Fatalf("%s is not declared by any reader", p)
		return watchSpec{}
	}
	const (
		resolv   = "/etc/resolv.conf"
		dhclient = "/var/lib/dhcp/dhclient.eth0.leases"
		networkd = "/run/systemd/netif/leases/2"
		yml      = "/etc/netplan/50-cloud-init.yaml"
		conf     = "/etc/systemd/resolved.conf.d/kubespray.conf"
		anyFile  = "/etc/dhcp/dhclient.conf"
	)
	tests := []struct {
		name string
		data string
		err  error
		sp   watchSpec
		want bool
	}{
		{"resolv complete", "nameserver 10.0.0.2\n", nil, spec(resolv), true},
		{"resolv empty", "", nil, spec(resolv), false},
		{"resolv half-written", "nameserver 10.0.", nil, spec(resolv), false},
		{"resolv NUL", "nameserver 10.0.0.2\x00\n", nil, spec(resolv), false},
		{"missing", "", fs.ErrNotExist, spec(resolv), false},
		{"dhclient closed", "lease {\n  interface \"eth0\";\n}\n", nil, spec(dhclient), true},
		{"dhclient open block", "lease {\n  interface \"eth0\";\n", nil, spec(dhclient), false},
		{"networkd", "ADDRESS=192.0.2.1\n", nil, spec(networkd), true},
		{"yaml ok", "network:\n  version: 2\n", nil, spec(yml), true},
		{"yaml cut", "network:\n  version: [2\n", nil, spec(yml), false},
		{"conf cut", "[Resolve]\nDNS=1", nil, spec(conf), false},
		{"any", "x", nil, spec(anyFile), true},
		{"dir", "", fs.ErrNotExist, watchSpec{dirOnly: true}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got, why := complete([]byte(tc.data), tc.err, tc.sp); got != tc.want {
				t.Errorf("complete = %v (%s), want %v", got, why, tc.want)
			}
		})
	}
}

// TestFightsLogBounded: a writer that never writes the same bytes twice, 20,000 times while
// nodedns is backed off, gets maxLoggedContents log lines for the episode, the last one marked.
func TestFightsLogBounded(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f := newFights(2, time.Hour)
	logged, last := 0, 0
	for i := 0; i < 20000; i++ {
		f.wrote("/etc/resolv.conf", []byte("ours\n"))
		v := f.change("/etc/resolv.conf", []byte(fmt.Sprintf("theirs %d\n", i)), t0.Add(time.Duration(i)*time.Millisecond))
		if v.logNew || v.started {
			logged++
		}
		if v.lastLogged {
			last++
		}
	}
	if logged != maxLoggedContents || last != 1 {
		t.Errorf("20,000 distinct foreign contents: %d logged (%d marked last), want %d (1)", logged, last, maxLoggedContents)
	}
}
