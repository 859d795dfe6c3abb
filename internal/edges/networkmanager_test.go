package edges

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodedns/nodedns/internal/testutil/fixture"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/nodedns/nodedns/internal/networkmanager"
	nmbus "github.com/nodedns/nodedns/internal/networkmanager/bus"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/policy"
	"github.com/nodedns/nodedns/internal/store"
)

// fakeNM is NetworkManager as the integration sees it over D-Bus, in memory. A reload makes it use
// onReload as its global DNS (what a real NM reads from its files); every call is recorded.
type fakeNM struct {
	owner     string
	global    *networkmanager.GlobalDNS
	onReload  *networkmanager.GlobalDNS
	devices   []nmbus.Device
	conns     []nmbus.Connection
	reloadErr error
	calls     []string
}

func (f *fakeNM) NameOwner(context.Context) (string, error) {
	f.calls = append(f.calls, "NameOwner")
	return f.owner, nil
}
func (f *fakeNM) Version(context.Context) (string, error) { return "1.42.4", nil }
func (f *fakeNM) Devices(context.Context) ([]nmbus.Device, error) {
	f.calls = append(f.calls, "Devices")
	return f.devices, nil
}
func (f *fakeNM) Connections(context.Context) ([]nmbus.Connection, error) { return f.conns, nil }
func (f *fakeNM) GlobalDNS(context.Context) (*networkmanager.GlobalDNS, error) {
	return f.global, nil
}
func (f *fakeNM) DNSManager(context.Context) (nmbus.DNSManager, error) {
	return nmbus.DNSManager{Mode: "default", RcManager: "file"}, nil
}
func (f *fakeNM) Reload(_ context.Context, flags uint32) error {
	f.calls = append(f.calls, "Reload")
	if f.reloadErr != nil {
		return f.reloadErr
	}
	f.global = f.onReload
	return nil
}

func star(servers ...string) *networkmanager.GlobalDNS {
	return &networkmanager.GlobalDNS{Domains: []networkmanager.GlobalDNSDomain{{Name: "*", Servers: servers}}}
}

// TestNMObserve: NM's live view replaces the files' devices and profiles; NM is asked nothing on a
// node where it neither wrote resolv.conf nor has its run directory.
func TestNMObserve(t *testing.T) {
	f := &fakeNM{owner: ":1.7", global: star("169.254.25.10", "10.66.0.53"),
		devices: []nmbus.Device{
			{Path: "/org/freedesktop/NetworkManager/Devices/1", Interface: "lo", IPInterface: "lo"},
			{Path: "/org/freedesktop/NetworkManager/Devices/2", Interface: "enp1s0", IPInterface: "enp1s0",
				DHCP4: map[string]string{"domain_name_servers": "10.66.0.54", "domain_search": "example.org"}},
		},
		conns: []nmbus.Connection{{Path: "/org/freedesktop/NetworkManager/Settings/1", UUID: "u1", InterfaceName: "enp1s0"}}}
	n := &NetworkManager{Bus: f, IfIndex: func(name string) (int, error) { return map[string]int{"lo": 1, "enp1s0": 2}[name], nil }}

	s := &node.Snapshot{}
	if err := n.Observe(context.Background(), s); err != nil || len(f.calls) != 0 || s.NetworkManager.Live != nil {
		t.Fatalf("NM asked on a node without it: calls %v, err %v", f.calls, err)
	}

	s.NetworkManager.OwnsResolvConf = true
	s.NetworkManager.Devices = []node.NMDevice{{IfIndex: 2, IfName: "enp1s0", ConnectionUUID: "u1", Source: "/run/NetworkManager/devices/2",
		DHCP4: networkmanager.DHCPDNS{Servers: []netip.Addr{netip.MustParseAddr("10.66.0.53")}}}}
	if err := n.Observe(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	nm := s.NetworkManager
	if nm.Live == nil || nm.Live.DNSMode != "default" || policy.NMStarServers(nm.Live.GlobalDNS)[0] != netip.MustParseAddr("169.254.25.10") {
		t.Errorf("live view: %+v", nm.Live)
	}
	want := []node.NMDevice{{IfIndex: 2, IfName: "enp1s0", ConnectionUUID: "u1", Source: "NetworkManager device enp1s0 (D-Bus)",
		DHCP4: networkmanager.DHCPDNS{Servers: []netip.Addr{netip.MustParseAddr("10.66.0.54")}, Search: []string{"example.org"}}}}
	if diff := cmp.Diff(want, nm.Devices, addrCmp, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("devices (-want +got):\n%s", diff)
	}
	if nm.Connections == nil || len(nm.Connections.Profiles) != 1 || nm.Connections.Profiles[0].UUID != "u1" {
		t.Errorf("profiles: %+v", nm.Connections)
	}

	// NM just restarted: it reports lo only; enp1s0's device state file stands until NM reports it.
	f.devices = f.devices[:1]
	s3 := &node.Snapshot{NetworkManager: node.NetworkManager{OwnsResolvConf: true, Devices: []node.NMDevice{
		{IfIndex: 1, IfName: "lo", Source: "/run/NetworkManager/devices/1", DHCP4: networkmanager.DHCPDNS{Search: []string{"stale.example"}}},
		{IfIndex: 2, IfName: "enp1s0", Source: "/run/NetworkManager/devices/2", DHCP4: networkmanager.DHCPDNS{Search: []string{"example.org"}}}}}}
	if err := n.Observe(context.Background(), s3); err != nil {
		t.Fatal(err)
	}
	if got := s3.NetworkManager.Devices; len(got) != 1 || got[0].Source != "/run/NetworkManager/devices/2" {
		t.Errorf("devices while NM has not realized enp1s0: %+v", got)
	}

	// NM off the bus: the files stand.
	f.owner = ""
	s2 := &node.Snapshot{NetworkManager: node.NetworkManager{RunDir: true}}
	if err := n.Observe(context.Background(), s2); err != nil || s2.NetworkManager.Live != nil {
		t.Errorf("NM off the bus: live %+v, err %v", s2.NetworkManager.Live, err)
	}
}

// TestNMReload: the actor backs up what NM will change, reloads, and reads the global DNS back; a
// reload NM answers with success but does not take (a file it cannot parse) is an error.
func TestNMReload(t *testing.T) {
	root := t.TempDir()
	intern := filepath.Join(root, networkmanager.InternConfPath)
	if err := os.MkdirAll(filepath.Dir(intern), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(intern, []byte("[.intern.global-dns-domain-*]\nservers=169.254.25.10\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := &fakeNM{owner: ":1.7", global: star("169.254.25.10"), onReload: star("10.66.0.53")}
	n := &NetworkManager{Bus: f, Store: testStore(root), VerifyTimeout: 100_000_000}
	a := policy.ReloadNetworkManager{Expect: []netip.Addr{netip.MustParseAddr("10.66.0.53")}, BackUp: []string{networkmanager.InternConfPath}}
	if !n.Handles(a) || n.Handles(policy.RestartResolved{}) {
		t.Fatal("Handles")
	}
	if err := n.Do(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(f.calls, " "), "Reload") {
		t.Errorf("no reload: %v", f.calls)
	}
	bs, err := (&store.Store{Root: root}).Backups()
	if err != nil || len(bs) != 1 || bs[0].Path != networkmanager.InternConfPath {
		t.Errorf("backups %+v (%v), want the intern file", bs, err)
	}

	f.onReload = star("169.254.25.10") // NM keeps its old configuration
	err = n.Do(context.Background(), a)
	if err == nil || !strings.Contains(err.Error(), "runs with global DNS") {
		t.Errorf("a reload NM did not take: %v", err)
	}
	f.reloadErr = errors.New("boom")
	if err := n.Do(context.Background(), a); err == nil {
		t.Error("a failed reload is no error")
	}
	f.owner, f.calls = "", nil
	if err := n.Do(context.Background(), a); err != nil || strings.Contains(strings.Join(f.calls, " "), "Reload") {
		t.Errorf("NM not running: %v, calls %v", err, f.calls)
	}
}

// TestNMValidate: the candidate must load and make NM use it; a later file that wins, a bad file
// elsewhere, are refused with the file named.
func TestNMValidate(t *testing.T) {
	o, err := networkmanager.RenderOverride(networkmanager.Override{Servers: []netip.Addr{netip.MustParseAddr("10.66.0.53")}})
	if err != nil {
		t.Fatal(err)
	}
	write := policy.Change{Path: networkmanager.NodeDNSConfPath, Op: policy.OpWrite, After: o}
	tests := []struct {
		name  string
		tree  map[string]string
		c     policy.Change
		error string
	}{
		{name: "kubespray", tree: map[string]string{"/etc/NetworkManager/conf.d/dns.conf": "[global-dns-domain-*]\nservers = 169.254.25.10\n"}, c: write},
		{name: "a later file wins", tree: map[string]string{"/etc/NetworkManager/conf.d/zzz.conf": "[global-dns-domain-*]\nservers = 169.254.25.10\n"}, c: write,
			error: "from /etc/NetworkManager/conf.d/zzz.conf:2"},
		{name: "a bad file", tree: map[string]string{"/etc/NetworkManager/conf.d/dns.conf": "servers=1\n"}, c: write, error: "/etc/NetworkManager/conf.d/dns.conf:1"},
		{name: "removal", tree: map[string]string{networkmanager.NodeDNSConfPath: string(o)}, c: policy.Change{Path: networkmanager.NodeDNSConfPath, Op: policy.OpRemove}},
		{name: "another file", c: policy.Change{Path: "/etc/resolv.conf", Op: policy.OpWrite, After: []byte("x")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			fixture.TreeAt(t, root, tt.tree)
			err := (&NetworkManager{Binary: "/nonexistent", Store: testStore(root)}).Validate(context.Background(), root, tt.c)
			if (err == nil) != (tt.error == "") || (err != nil && !strings.Contains(err.Error(), tt.error)) {
				t.Errorf("Validate = %v, want an error with %q", err, tt.error)
			}
		})
	}
}

// TestNMPrintConfigCopy: --print-config runs on a copy of conf.d with the candidate in place (a
// directory and a dangling symlink copied as such, since NM refuses both), and its messages name
// /etc/NetworkManager/conf.d, not the copy. A stand-in program plays NetworkManager here; the
// privileged tests run the real one.
func TestNMPrintConfigCopy(t *testing.T) {
	root := t.TempDir()
	fixture.TreeAt(t, root, map[string]string{
		"/etc/NetworkManager/conf.d/dns.conf":    "[global-dns-domain-*]\nservers=169.254.25.10\n",
		"/etc/NetworkManager/conf.d/README":      "not read by NM\n",
		"/etc/NetworkManager/conf.d/old.conf":    "x\n",
		"/etc/NetworkManager/conf.d/sub.conf/ok": "",
	})
	if err := os.Symlink("gone.conf", filepath.Join(root, "etc/NetworkManager/conf.d/link.conf")); err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(t.TempDir(), "NetworkManager")
	// Lists what it finds and fails when a file says "bad".
	script := `#!/bin/sh
dir=${2#--config-dir=}
[ "${3#--intern-config=}" = "$(dirname "$dir")/NetworkManager-intern.conf" ] || { echo "intern: $3"; exit 8; }
cd "$dir" || exit 9
for f in $(ls -A | sort); do
	if [ -L "$f" ]; then echo "$dir/$f -> $(readlink "$f")"; elif [ -d "$f" ]; then echo "$dir/$f/"; else echo "$dir/$f: $(tr "\n" " " < "$f" | sed "s/ $//")"; fi
done
grep -qs bad ./*.conf && exit 7
exit 0
`
	if err := os.WriteFile(prog, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	n := &NetworkManager{Binary: prog, Store: testStore(root)}
	out, code, err := n.printConfig(context.Background(), root, map[string][]byte{
		networkmanager.NodeDNSConfPath:        []byte("[global-dns-domain-*]\nservers=10.66.0.53\n"),
		"/etc/NetworkManager/conf.d/old.conf": nil,
	})
	if err != nil || code != 0 {
		t.Fatalf("printConfig: %v, exit %d:\n%s", err, code, out)
	}
	want := "/etc/NetworkManager/conf.d/dns.conf: [global-dns-domain-*] servers=169.254.25.10\n" +
		"/etc/NetworkManager/conf.d/link.conf -> gone.conf\n" +
		"/etc/NetworkManager/conf.d/sub.conf/\n" +
		"/etc/NetworkManager/conf.d/zz-nodedns.conf: [global-dns-domain-*] servers=10.66.0.53"
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("the copy NetworkManager saw (-want +got):\n%s", diff)
	}
	out, code, err = n.printConfig(context.Background(), root, map[string][]byte{networkmanager.NodeDNSConfPath: []byte("bad\n")})
	if err != nil || code != 7 || !strings.Contains(out, "/etc/NetworkManager/conf.d/zz-nodedns.conf: bad") {
		t.Errorf("a refused candidate: %v, exit %d:\n%s", err, code, out)
	}
	if _, _, err := (&NetworkManager{Binary: "/nonexistent/NetworkManager", Store: testStore(root)}).printConfig(context.Background(), root, nil); err == nil {
		t.Error("a missing program is no error")
	}
}

// TestNMAfterRestore: NM is reloaded only when restore put NM's files back.
func TestNMAfterRestore(t *testing.T) {
	f := &fakeNM{owner: ":1.7", onReload: star("169.254.25.10", "10.66.0.53")}
	n := &NetworkManager{Bus: f}
	res, err := n.AfterRestore(context.Background(), []store.RestoreResult{{Path: "/etc/resolv.conf", Action: store.ActionRestored}, {Path: networkmanager.NodeDNSConfPath, Action: store.ActionKept}})
	if err != nil || res != nil || len(f.calls) != 0 {
		t.Fatalf("nothing of NM restored: %v %v, calls %v", res, err, f.calls)
	}
	res, err = n.AfterRestore(context.Background(), []store.RestoreResult{{Path: networkmanager.NodeDNSConfPath, Action: store.ActionRemoved}})
	if err != nil || len(res) != 1 || res[0].Action != "reload-networkmanager" || !strings.Contains(res[0].Reason, "169.254.25.10 10.66.0.53") {
		t.Errorf("after restoring zz-nodedns.conf: %+v, %v", res, err)
	}
	if got := strings.Join(f.calls, " "); got != "NameOwner Reload" {
		t.Errorf("calls %q", got)
	}
}

func TestNMNotice(t *testing.T) {
	for _, tt := range []struct {
		e    nmbus.Event
		pass bool
	}{
		{nmbus.Event{Kind: nmbus.EventDHCPChanged, Path: "/org/freedesktop/NetworkManager/DHCP4Config/3"}, true},
		{nmbus.Event{Kind: nmbus.EventGlobalDNSChanged}, true},
		{nmbus.Event{Kind: nmbus.EventNMStarted, Owner: ":1.9"}, true},
		{nmbus.Event{Kind: nmbus.EventBusReconnected}, true},
		{nmbus.Event{Kind: nmbus.EventNMStopped}, false},
		{nmbus.Event{Kind: nmbus.EventDeviceState}, false},
		{nmbus.Event{Kind: nmbus.EventDNSChanged}, false},
		{nmbus.Event{Kind: nmbus.EventBusLost}, false},
	} {
		if got := NMNotice(tt.e) != ""; got != tt.pass {
			t.Errorf("%s: pass %v, want %v", tt.e.Kind, got, tt.pass)
		}
	}
}
