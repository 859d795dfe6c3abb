package bus_test

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodedns/nodedns/internal/testutil/nstest"
	"github.com/nodedns/nodedns/systemd"
	"github.com/nodedns/nodedns/systemd/bus"
)

// liveResolved is a sandbox with a private system bus, a real systemd-resolved (the suite's: 252 or 262) on it and a
// bridge link resolved does not see managed by networkd (no networkd runs), plus a client from the
// test process on that bus.
type liveResolved struct {
	sb       *nstest.Sandbox
	sysbus   *exec.Cmd
	resolved *nstest.Resolved
	client   *bus.Resolved
	ifindex  int
}

func newLiveResolved(t *testing.T, s nstest.Suite, opts bus.ResolvedOptions) *liveResolved {
	t.Helper()
	sb := nstest.NewWith(t, nstest.Options{Suite: s})
	sb.Isolate(t)
	sb.Run(t, "ip link add ndr0 type bridge && ip link set ndr0 up")
	sysbus := sb.SystemBus(t)
	r := sb.StartResolved(t)
	idx := strings.TrimSpace(sb.Run(t, "cat /sys/class/net/ndr0/ifindex"))
	opts.Address = sb.BusAddress()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := bus.DialResolved(ctx, opts)
	if err != nil {
		t.Fatalf("DialResolved: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	lr := &liveResolved{sb: sb, sysbus: sysbus, resolved: r, client: c}
	if lr.ifindex, err = strconv.Atoi(idx); err != nil {
		t.Fatalf("ifindex %q: %v", idx, err)
	}
	return lr
}

// TestResolvedLinkSettingsLive sets a link's DNS and domains on a real resolved, reads them back
// through the Link object and the Manager, sees them in resolved's own resolv.conf, and reverts.
func TestResolvedLinkSettingsLive(t *testing.T) { nstest.Suites(t, testResolvedLinkSettingsLive) }

func testResolvedLinkSettingsLive(t *testing.T, s nstest.Suite) {
	lr := newLiveResolved(t, s, bus.ResolvedOptions{})
	ctx := context.Background()
	c := lr.client

	servers := []systemd.DNSServer{{Addr: netip.MustParseAddr("10.77.0.2")}, {Addr: netip.MustParseAddr("fd00::53"), Port: 5353}}
	domains := []systemd.Domain{{Name: "example.org"}, {Name: "corp.example", RoutingOnly: true}}
	if err := c.SetLinkDNS(ctx, lr.ifindex, servers); err != nil {
		t.Fatalf("SetLinkDNS: %v", err)
	}
	if err := c.SetLinkDomains(ctx, lr.ifindex, domains); err != nil {
		t.Fatalf("SetLinkDomains: %v", err)
	}
	li, err := c.Link(ctx, lr.ifindex)
	if err != nil {
		t.Fatalf("Link: %v", err)
	}
	want := systemd.LinkInfo{IfIndex: lr.ifindex, DNS: []systemd.DNSServer{
		{IfIndex: lr.ifindex, Addr: netip.MustParseAddr("10.77.0.2")},
		{IfIndex: lr.ifindex, Addr: netip.MustParseAddr("fd00::53"), Port: 5353},
	}, Domains: domains, HasDefaultRoute: true, DefaultRoute: li.DefaultRoute}
	if diff := cmp.Diff(want, li, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("Link (-want +got):\n%s", diff)
	}

	st, err := c.State(ctx)
	if err != nil {
		t.Fatalf("State: %v", err)
	}
	got, ok := st.Link(lr.ifindex)
	if !ok || len(got.DNS) != 2 || len(got.Domains) != 2 {
		t.Errorf("State link %d = %+v (found %v)", lr.ifindex, got, ok)
	}
	if st.ResolvConfMode == "" {
		t.Errorf("ResolvConfMode empty on resolved 252 (it has the property since 247)")
	}
	resolv := readSandbox(t, lr.sb, "/run/systemd/resolve/resolv.conf")
	if !strings.Contains(resolv, "nameserver 10.77.0.2") || !strings.Contains(resolv, "search example.org") {
		t.Errorf("resolved's resolv.conf does not show the link settings:\n%s", resolv)
	}

	if err := c.RevertLink(ctx, lr.ifindex); err != nil {
		t.Fatalf("RevertLink: %v", err)
	}
	if err := c.FlushCaches(ctx); err != nil {
		t.Fatalf("FlushCaches: %v", err)
	}
	li, err = c.Link(ctx, lr.ifindex)
	if err != nil || len(li.DNS) != 0 || len(li.Domains) != 0 {
		t.Errorf("after RevertLink: %+v, %v", li, err)
	}
}

// TestResolvedErrorsLive proves the errors a real resolved answers are matched by name: a link
// index nobody has (NoSuchLink: ErrLinkGone), a method resolved 252 lacks (UnknownMethod), a link
// networkd manages (LinkBusy; networkd's state file is written by the test, as networkd 252 writes
// it, since resolved only reads that file through sd-network), and resolved gone (ErrNotRunning).
func TestResolvedErrorsLive(t *testing.T) { nstest.Suites(t, testResolvedErrorsLive) }

func testResolvedErrorsLive(t *testing.T, s nstest.Suite) {
	lr := newLiveResolved(t, s, bus.ResolvedOptions{})
	ctx := context.Background()

	if _, err := lr.client.Link(ctx, 99999); !errors.Is(err, bus.ErrLinkGone) {
		t.Errorf("Link(99999) = %v, want ErrLinkGone", err)
	}
	var be *bus.BusError
	if err := lr.client.SetLinkDomains(ctx, 99999, nil); !errors.As(err, &be) || be.Name != bus.ErrNameNoSuchLink {
		t.Errorf("SetLinkDomains(99999) = %v, want %s", err, bus.ErrNameNoSuchLink)
	}

	// networkd's per-link state file makes the link managed for resolved (link_is_managed).
	lr.sb.Run(t, "mkdir -p /run/systemd/netif/links && printf 'ADMIN_STATE=configured\\nOPER_STATE=routable\\nNETWORK_FILE=/run/systemd/network/10-ndr0.network\\n' > /run/systemd/netif/links/"+strconv.Itoa(lr.ifindex))
	// resolved 252 learns of it through sd-network's inotify monitor, which may miss a directory
	// created after it started; a resolved started now reads the state file at once.
	lr.resolved.Restart(t)
	err := lr.client.SetLinkDomains(ctx, lr.ifindex, []systemd.Domain{{Name: "example.org"}})
	if !errors.Is(err, bus.ErrLinkBusy) {
		t.Errorf("SetLinkDomains on a networkd link = %v, want ErrLinkBusy", err)
	}

	lr.resolved.Stop(t)
	if err := lr.client.Ping(ctx); !errors.Is(err, bus.ErrNotRunning) {
		t.Errorf("Ping with resolved stopped = %v, want ErrNotRunning", err)
	}
	if owner, err := lr.client.NameOwner(ctx); err != nil || owner != "" {
		t.Errorf("NameOwner with resolved stopped = %q, %v", owner, err)
	}
}

// TestResolvedTimeoutLive stops a real resolved with SIGSTOP: it keeps its bus name but never
// answers, so every call must end at the call timeout instead of hanging.
func TestResolvedTimeoutLive(t *testing.T) { nstest.Suites(t, testResolvedTimeoutLive) }

func testResolvedTimeoutLive(t *testing.T, s nstest.Suite) {
	lr := newLiveResolved(t, s, bus.ResolvedOptions{CallTimeout: 300 * time.Millisecond})
	pid := lr.resolved.PID(t)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	start := time.Now()
	_, err := lr.client.Manager(context.Background())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Manager on a stopped resolved = %v, want a deadline error", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Manager took %v with a 300ms call timeout", d)
	}
	// A caller's shorter deadline wins too.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := lr.client.Ping(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Ping = %v, want a deadline error", err)
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := lr.client.Ping(context.Background()); err != nil {
		t.Errorf("Ping after SIGCONT: %v", err)
	}
}

// TestResolvedEventsLive sees resolved's restarts (NameOwnerChanged) and its PropertiesChanged for
// the Manager's DNS (the only property resolved 252 signals), and reconnects after dbus-daemon is
// restarted in the sandbox.
func TestResolvedEventsLive(t *testing.T) { nstest.Suites(t, testResolvedEventsLive) }

func testResolvedEventsLive(t *testing.T, s nstest.Suite) {
	lr := newLiveResolved(t, s, bus.ResolvedOptions{MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	ctx := context.Background()
	ev := lr.client.Events()

	lr.resolved.Restart(t)
	waitEvent(t, ev, bus.EventResolvedStopped)
	waitEvent(t, ev, bus.EventResolvedStarted)

	if err := lr.client.SetLinkDNS(ctx, lr.ifindex, []systemd.DNSServer{{Addr: netip.MustParseAddr("10.77.0.9")}}); err != nil {
		t.Fatal(err)
	}
	e := waitEvent(t, ev, bus.EventPropertiesChanged)
	if e.Path != "/org/freedesktop/resolve1" {
		t.Errorf("PropertiesChanged on %s", e.Path)
	}

	// dbus-daemon goes away and comes back; resolved 252 exits with its bus, so it is started
	// again as a service manager would.
	// Only this sandbox's dbus-daemon, by its process (the command Start returns is the program itself).
	if err := lr.sysbus.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = lr.sysbus.Wait()
	waitEvent(t, ev, bus.EventBusLost)
	if err := lr.client.Ping(ctx); !errors.Is(err, bus.ErrDisconnected) {
		t.Errorf("Ping while the bus is down = %v, want ErrDisconnected", err)
	}
	lr.sb.SystemBus(t)
	waitEvent(t, ev, bus.EventBusReconnected)
	lr.resolved.Restart(t)
	if err := lr.client.WaitReady(ctx, ""); err != nil {
		t.Fatalf("WaitReady after the bus came back: %v", err)
	}
	if _, err := lr.client.State(ctx); err != nil {
		t.Errorf("State after reconnect: %v", err)
	}
}

func waitEvent(t *testing.T, ev <-chan bus.Event, kind bus.EventKind) bus.Event {
	t.Helper()
	timeout := time.After(10 * time.Second)
	var seen []string
	for {
		select {
		case e, ok := <-ev:
			if !ok {
				t.Fatalf("event channel closed waiting for %v", kind)
			}
			if e.Kind == kind {
				return e
			}
			seen = append(seen, e.Kind.String())
		case <-timeout:
			t.Fatalf("no %v event within 10s (saw %v)", kind, seen)
		}
	}
}

func readSandbox(t *testing.T, sb *nstest.Sandbox, p string) string {
	t.Helper()
	data, err := os.ReadFile(sb.Path(p))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
