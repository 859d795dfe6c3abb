package edges

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nodedns/nodedns/internal/networkmanager"
	"github.com/nodedns/nodedns/internal/networkmanager/bus"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/internal/policy"
	"github.com/nodedns/nodedns/internal/store"
)

// NMBus is what the NetworkManager integration needs from NM's D-Bus API. *bus.Client implements
// it over D-Bus; tests give a fake, so the integration's decisions are tested without privileges.
type NMBus interface {
	NameOwner(ctx context.Context) (string, error)
	Version(ctx context.Context) (string, error)
	Devices(ctx context.Context) ([]bus.Device, error)
	Connections(ctx context.Context) ([]bus.Connection, error)
	GlobalDNS(ctx context.Context) (*networkmanager.GlobalDNS, error)
	DNSManager(ctx context.Context) (bus.DNSManager, error)
	Reload(ctx context.Context, flags uint32) error
}

// NetworkManager is the live NetworkManager integration (docs/contract.md "What nodedns manages",
// NetworkManager). It is:
//   - a Source: NM's own view over D-Bus (GlobalDnsConfiguration, the DNS manager's mode, every
//     device's DHCP4/DHCP6 options, the connection profiles) replaces what the files say;
//   - an Actor for policy.ReloadNetworkManager: it backs up the files NM itself will change, calls
//     Manager.Reload, and reads GlobalDnsConfiguration back until NM uses what was planned (NM
//     1.42.4 answers success to a Reload with a file it cannot parse, and keeps the old
//     configuration);
//   - a Validator and an Explainer of zz-nodedns.conf: networkmanager.LoadConfig and CheckOverride
//     on the candidate configuration, then NetworkManager's own `--print-config` on a copy of
//     conf.d with the candidate in place (live, when the binary is there);
//   - a Reverter: after restore put NM's files back (zz-nodedns.conf removed,
//     NetworkManager-intern.conf restored) it reloads NM, which reads the intern file again;
//   - an EventSource: DHCP option changes (renewals), global DNS changes and NM (re)starts.
//
// All share one lazily dialled bus.Client: one D-Bus connection per run, made only on a node where
// NM writes /etc/resolv.conf or has its run directory.
type NetworkManager struct {
	// Options configure the D-Bus client.
	Options bus.Options
	// Store is the node's store for backups and the validators' work directory: the run's
	// (edges.New).
	Store *store.Store
	Log   *slog.Logger

	// Bus, when set, replaces the D-Bus client (tests).
	Bus NMBus
	// IfIndex maps an interface name to its index (nil: the host's, through net.InterfaceByName).
	// NM 1.42's Device object has no Ifindex property.
	IfIndex func(name string) (int, error)
	// Binary is NetworkManager's program for --print-config ("": NetworkManager on PATH, else
	// /usr/sbin/NetworkManager; none found: only nodedns's own loader judges).
	Binary string
	// VerifyTimeout bounds how long the actor waits for NM to show the reloaded global DNS
	// (default 5s).
	VerifyTimeout time.Duration

	conn     lazyBus[*bus.Client]
	mu       sync.Mutex // guards decision
	decision string     // the last decision logged
}

func (n *NetworkManager) log() *slog.Logger {
	if n.Log != nil {
		return n.Log
	}
	return slog.New(slog.DiscardHandler)
}

// Client returns the shared D-Bus client, connecting on first use.
func (n *NetworkManager) Client(ctx context.Context) (*bus.Client, error) {
	return n.conn.get(ctx,
		func(ctx context.Context) (*bus.Client, error) { return bus.Dial(ctx, n.Options) },
		func(c *bus.Client, out chan<- string) { n.forward(c.Events(), out) })
}

func (n *NetworkManager) api(ctx context.Context) (NMBus, error) {
	if n.Bus != nil {
		return n.Bus, nil
	}
	return n.Client(ctx)
}

// running returns the bus and whether NetworkManager is on it (someone owns its name).
func (n *NetworkManager) running(ctx context.Context) (NMBus, bool, error) {
	c, err := n.api(ctx)
	if err != nil {
		return nil, false, err
	}
	owner, err := c.NameOwner(ctx)
	if err != nil {
		return nil, false, err
	}
	return c, owner != "", nil
}

// Close closes the client if one was made.
func (n *NetworkManager) Close() error { return n.conn.close() }

// Name implements Source.
func (n *NetworkManager) Name() string { return "NetworkManager over D-Bus" }

// Observe implements Source. It asks NM only where NM is, or was, in charge (its header on
// /etc/resolv.conf, or its run directory): elsewhere there is nothing to ask and no bus to need.
// With NM off the bus the snapshot keeps what the files say.
func (n *NetworkManager) Observe(ctx context.Context, s *node.Snapshot) error {
	nm := &s.NetworkManager
	if !nm.OwnsResolvConf && !nm.RunDir {
		return nil
	}
	c, running, err := n.running(ctx)
	if err != nil {
		return err
	}
	if !running {
		n.logDecision(s, "not on the bus")
		return nil
	}
	live := &node.NMLive{}
	if live.Version, err = c.Version(ctx); err != nil {
		return err
	}
	if live.GlobalDNS, err = c.GlobalDNS(ctx); err != nil {
		return err
	}
	dm, err := c.DNSManager(ctx)
	if err != nil {
		return err
	}
	live.DNSMode, live.RcManager = dm.Mode, dm.RcManager
	devs, err := c.Devices(ctx)
	if err != nil {
		return err
	}
	conns, err := c.Connections(ctx)
	if err != nil {
		return err
	}
	nm.Devices = n.liveDevices(devs, nm.Devices)
	nm.Connections = liveConnections(conns)
	nm.Live = live
	n.logDecision(s, "on the bus")
	return nil
}

// logDecision logs what nodedns decided about NetworkManager, once per change of it, as one line.
func (n *NetworkManager) logDecision(s *node.Snapshot, bus string) {
	nm := &s.NetworkManager
	d := fmt.Sprintf("networkmanager: [resolv.conf=%t (%s) bus=%s", s.NMOwnsResolvConf(), nm.Why, bus)
	if nm.Live != nil {
		d += fmt.Sprintf(" version=%s dns=%s rc-manager=%s", nm.Live.Version, nm.Live.DNSMode, nm.Live.RcManager)
	}
	d += "]"
	n.mu.Lock()
	changed := d != n.decision
	n.decision = d
	n.mu.Unlock()
	if changed {
		n.log().Info(d)
	}
}

// liveDevices turns NM's devices into the snapshot's: those with DHCP options, by ifindex (from
// the IP interface's name: NM 1.42's Device has no Ifindex), with the connection profile the device
// state file names. NM's answer wins for every device it reports; a device state file of a device
// NM does not report (yet: NM restarted a moment ago and has not realized it) stands, so a restart
// of NM does not make its DHCP servers and domains vanish for a pass and the override flap.
func (n *NetworkManager) liveDevices(devs []bus.Device, fromFiles []node.NMDevice) []node.NMDevice {
	var out []node.NMDevice
	reported := map[int]bool{}
	for _, d := range devs {
		name := d.IPInterface
		if name == "" {
			name = d.Interface
		}
		idx := d.IfIndex
		if idx <= 0 {
			var err error
			if idx, err = n.ifIndex(name); err != nil {
				n.log().Debug("NetworkManager device without a link", "device", d.Path, "interface", name, "err", err)
			}
		}
		if idx > 0 {
			reported[idx] = true
		}
		if d.DHCP4 == nil && d.DHCP6 == nil {
			continue
		}
		nd := node.NMDevice{IfIndex: idx, IfName: name, Source: fmt.Sprintf("NetworkManager device %s (D-Bus)", name)}
		if i := slices.IndexFunc(fromFiles, func(f node.NMDevice) bool { return f.IfIndex == idx && idx > 0 }); i >= 0 {
			nd.ConnectionUUID = fromFiles[i].ConnectionUUID
		}
		if d.DHCP4 != nil {
			nd.DHCP4 = networkmanager.DHCP4DNS(d.DHCP4)
		}
		if d.DHCP6 != nil {
			nd.DHCP6 = networkmanager.DHCP6DNS(d.DHCP6)
		}
		out = append(out, nd)
	}
	for _, f := range fromFiles {
		if !reported[f.IfIndex] {
			out = append(out, f)
		}
	}
	slices.SortFunc(out, func(a, b node.NMDevice) int { return a.IfIndex - b.IfIndex })
	return out
}

func (n *NetworkManager) ifIndex(name string) (int, error) {
	if n.IfIndex != nil {
		return n.IfIndex(name)
	}
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return 0, err
	}
	return ifi.Index, nil
}

// liveConnections are NM's profiles as it has them (any settings plugin: keyfile, or ifcfg-rh on
// RHEL 8 nodes, whose profiles the keyfile reader cannot see).
func liveConnections(conns []bus.Connection) *networkmanager.Connections {
	cs := &networkmanager.Connections{}
	for _, c := range conns {
		cs.Profiles = append(cs.Profiles, &networkmanager.Connection{Path: c.Path, ID: c.ID, UUID: c.UUID, Type: c.Type,
			InterfaceName: c.InterfaceName, IPv4: c.IPv4, IPv6: c.IPv6})
	}
	return cs
}

// Handles implements Actor.
func (n *NetworkManager) Handles(a policy.Action) bool {
	_, ok := a.(policy.ReloadNetworkManager)
	return ok
}

// Do implements Actor: policy.ReloadNetworkManager.
func (n *NetworkManager) Do(ctx context.Context, a policy.Action) error {
	r, ok := a.(policy.ReloadNetworkManager)
	if !ok {
		return fmt.Errorf("%s: not a NetworkManager action", a.Kind())
	}
	// Before NM can change them: NM 1.42 drops a global DNS set over D-Bus from its intern file at
	// the reload that makes a config file set one, and only this backup brings it back on restore.
	st := n.Store
	for _, p := range r.BackUp {
		if err := st.Backup(p); err != nil {
			return fmt.Errorf("back up %s before reloading NetworkManager: %w", p, err)
		}
	}
	c, running, err := n.running(ctx)
	if err != nil {
		return err
	}
	if !running {
		n.log().Info("NetworkManager is not running: it reads its new configuration when it starts")
		return nil
	}
	if err := c.Reload(ctx, bus.ReloadAll); err != nil {
		return err
	}
	return n.verify(ctx, c, r.Expect)
}

// verify waits until NM's GlobalDnsConfiguration has the "*" servers expected.
func (n *NetworkManager) verify(ctx context.Context, c NMBus, expect []netip.Addr) error {
	timeout := n.VerifyTimeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	deadline := time.Now().Add(timeout)
	for {
		g, err := c.GlobalDNS(ctx)
		if err != nil {
			return fmt.Errorf("read NetworkManager's global DNS back after the reload: %w", err)
		}
		got := policy.NMStarServers(g)
		if slices.Equal(got, expect) {
			dm, err := c.DNSManager(ctx)
			if err == nil {
				n.log().Info("NetworkManager reloaded", "global_dns", addrs(got), "dns_mode", dm.Mode, "rc_manager", dm.RcManager, "dns_configuration", fmt.Sprint(dm.Configuration))
			}
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("NetworkManager answered the reload but runs with global DNS %q servers %s, not %s: it keeps its old configuration when a file fails to parse (see `NetworkManager --print-config`)", "*", addrs(got), addrs(expect))
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func addrs(as []netip.Addr) string {
	if len(as) == 0 {
		return "(none)"
	}
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, " ")
}

// Validate implements Validator for zz-nodedns.conf: the configuration NM would read with the change
// must load (NM 1.42 refuses all of it for one bad file) and take its global DNS from the file.
// On the live node NetworkManager's own --print-config judges a copy of conf.d with the change in
// place too, since NM, not nodedns's reader, decides what NM accepts.
func (n *NetworkManager) Validate(ctx context.Context, root string, c policy.Change) error {
	if c.Path != networkmanager.NodeDNSConfPath {
		return nil
	}
	var data []byte
	if c.Op == policy.OpWrite {
		data = c.After
	}
	fsys := networkmanager.ReaderFS(nodefs.NewReader(root))
	cfg, err := networkmanager.LoadConfig(networkmanager.Overlay(fsys, map[string][]byte{c.Path: data}))
	if err != nil {
		return fmt.Errorf("validate %s: NetworkManager would refuse its configuration with it: %w", c.Path, err)
	}
	if data != nil {
		o, err := networkmanager.ParseOverride(c.Path, data)
		if err != nil {
			return fmt.Errorf("validate %s: %w", c.Path, err)
		}
		if err := networkmanager.CheckOverride(cfg, o); err != nil {
			return fmt.Errorf("validate %s: %w", c.Path, err)
		}
	}
	if root != "/" {
		return nil
	}
	out, code, err := n.printConfig(ctx, root, map[string][]byte{c.Path: data})
	switch {
	case errors.Is(err, errNoBinary):
		return nil
	case err != nil:
		return fmt.Errorf("validate %s: %w", c.Path, err)
	case code != 0:
		return fmt.Errorf("validate %s: `NetworkManager --print-config` exits %d: %s", c.Path, code, out)
	}
	return nil
}

// Explain implements Explainer: when policy blocked zz-nodedns.conf because NM's configuration does
// not load, NetworkManager's own --print-config on the node as it is gives the reason in NM's
// words.
func (n *NetworkManager) Explain(ctx context.Context, root string, b policy.Blocked) (string, bool) {
	if b.Target != networkmanager.NodeDNSConfPath || root != "/" {
		return "", false
	}
	out, code, err := n.printConfig(ctx, root, nil)
	if err != nil || code == 0 {
		return "", false // NM accepts it (or cannot run): policy's reason stands
	}
	return fmt.Sprintf("NetworkManager refuses its configuration (`NetworkManager --print-config` exits %d: %s): a reload would keep the old configuration and a restart would not come up; fix that file first", code, out), true
}

var errNoBinary = errors.New("NetworkManager's program not found")

func (n *NetworkManager) binary() string {
	if n.Binary != "" {
		return n.Binary
	}
	if p, err := exec.LookPath("NetworkManager"); err == nil {
		return p
	}
	if fi, err := os.Stat("/usr/sbin/NetworkManager"); err == nil && !fi.IsDir() {
		return "/usr/sbin/NetworkManager"
	}
	return ""
}

// printConfigTimeout bounds `NetworkManager --print-config` (it only reads files: milliseconds).
const printConfigTimeout = 10 * time.Second

// printConfig runs `NetworkManager --print-config` with /etc/NetworkManager/conf.d replaced by a
// copy in which changes (node path: content, nil for removed) are made, and the intern file by a
// copy, and returns its output with the copies' paths turned back into the node's, and its exit
// code (NM 1.42 exits 7 naming the file it cannot read). The other files are NM's own: the main
// file and the /run and /usr/lib conf.d, as a Reload would read them.
func (n *NetworkManager) printConfig(ctx context.Context, root string, changes map[string][]byte) (string, int, error) {
	bin := n.binary()
	if bin == "" {
		return "", 0, errNoBinary
	}
	// The copies go into nodedns's work directory (swept by the next lock holder if a kill leaves
	// them), else the system's temp directory for a user who cannot write it.
	work, err := workDir(n.Store)
	if err != nil {
		return "", 0, err
	}
	dir, err := os.MkdirTemp(work, nodefs.WorkPattern("nodedns-nm"))
	if err != nil {
		return "", 0, fmt.Errorf("copy %s: %w", networkmanager.EtcConfDir, err)
	}
	defer os.RemoveAll(dir)
	confDir, intern := filepath.Join(dir, "conf.d"), filepath.Join(dir, "NetworkManager-intern.conf")
	r := nodefs.NewReader(root)
	if err := copyConfDir(r, confDir, changes); err != nil {
		return "", 0, err
	}
	// A copy of the intern file too: --print-config loads the configuration as NM does, and NM
	// 1.42.4 then rewrites the intern file, dropping a global DNS set over D-Bus once a conf.d file
	// sets one (measured: TestFactsPrintConfigWritesIntern). On the real file that would lose the
	// D-Bus configuration before nodedns has backed it up, and while NM still runs with it.
	if data, err := r.ReadFile(networkmanager.InternConfPath, networkmanager.FileKind); err == nil {
		if err := os.WriteFile(intern, data, 0o600); err != nil {
			return "", 0, fmt.Errorf("copy %s: %w", networkmanager.InternConfPath, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, printConfigTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--print-config", "--config-dir="+confDir, "--intern-config="+intern)
	// It dies with nodedns, so a killed pass never leaves it writing into a directory the next
	// lock holder is removing. The parent-death signal comes when the forking *thread* ends, which
	// the Go runtime does to a thread whose goroutine returns locked to it (podnet's inNS when a
	// thread cannot go back to its namespace; prctl(2), PR_SET_PDEATHSIG; go.dev/issue/27505):
	// this goroutine holds its thread from the fork to the wait, so NM is never killed while
	// nodedns still waits for it (netplancmd's dyingWithNodedns likewise).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	runtime.LockOSThread()
	out, err := cmd.CombinedOutput()
	runtime.UnlockOSThread()
	msg := strings.ReplaceAll(string(out), confDir, networkmanager.EtcConfDir)
	msg = strings.TrimSpace(strings.ReplaceAll(msg, intern, networkmanager.InternConfPath))
	var ee *exec.ExitError
	switch {
	case err == nil:
		return msg, 0, nil
	case errors.As(err, &ee) && ee.ExitCode() > 0:
		return msg, ee.ExitCode(), nil
	}
	return "", 0, fmt.Errorf("%s --print-config: %w", bin, err)
}

// copyConfDir copies the *.conf entries of /etc/NetworkManager/conf.d into dir as NM would find
// them (a directory stays a directory and a dangling symlink stays dangling: NM refuses both), then
// applies changes.
func copyConfDir(r nodefs.Reader, dir string, changes map[string][]byte) error {
	kind := networkmanager.FileKind
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("copy %s: %w", networkmanager.EtcConfDir, err)
	}
	entries, err := r.ReadDir(networkmanager.EtcConfDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("copy %s: %w", networkmanager.EtcConfDir, err)
	}
	for _, e := range entries {
		name := e.Name()
		p := path.Join(networkmanager.EtcConfDir, name)
		if _, ok := changes[p]; ok || !strings.HasSuffix(name, ".conf") {
			continue
		}
		to := filepath.Join(dir, name)
		data, err := r.ReadFile(p, kind)
		switch {
		case err == nil:
			err = os.WriteFile(to, data, 0o600)
		case errors.Is(err, nodefs.ErrNotRegular):
			err = os.Mkdir(to, 0o700)
		case errors.Is(err, os.ErrNotExist):
			var target string
			if target, err = r.Readlink(p); err == nil {
				err = os.Symlink(target, to)
			}
		}
		if err != nil {
			return fmt.Errorf("copy %s: %w", p, err)
		}
	}
	for p, data := range changes {
		if data == nil || path.Dir(p) != networkmanager.EtcConfDir {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, path.Base(p)), data, 0o600); err != nil {
			return fmt.Errorf("copy %s: %w", p, err)
		}
	}
	return nil
}

// BeforeRestore implements Reverter: nodedns changes no connection profile and nothing over D-Bus
// but the reload, so there is nothing to revert before the files are put back.
func (n *NetworkManager) BeforeRestore(context.Context) ([]store.RestoreResult, error) {
	return nil, nil
}

// AfterRestore implements Reverter: when restore put back NetworkManager's files (zz-nodedns.conf
// removed, NetworkManager-intern.conf restored), NM is reloaded to read them; a global DNS that was
// set over D-Bus comes back from the restored intern file (measured on 1.42.4). NM's resolv.conf is
// then what NM wrote before apply.
func (n *NetworkManager) AfterRestore(ctx context.Context, restored []store.RestoreResult) ([]store.RestoreResult, error) {
	touched := false
	for _, x := range restored {
		if x.Action != store.ActionKept && isNMConfig(x.Path) {
			touched = true
		}
	}
	if !touched {
		return nil, nil
	}
	kind := policy.ReloadNetworkManager{}.Kind()
	c, running, err := n.running(ctx)
	if err != nil {
		return nil, fmt.Errorf("reload NetworkManager after restoring its configuration: %w", err)
	}
	if !running {
		return []store.RestoreResult{{Path: "NetworkManager", Action: store.ActionKept, Reason: "not running: it reads the restored configuration when it starts"}}, nil
	}
	if err := c.Reload(ctx, bus.ReloadAll); err != nil {
		return nil, fmt.Errorf("reload NetworkManager after restoring its configuration: %w", err)
	}
	reason := "read the restored configuration"
	if g, err := c.GlobalDNS(ctx); err == nil {
		reason += "; global DNS \"*\" servers now " + addrs(policy.NMStarServers(g))
	}
	return []store.RestoreResult{{Path: "NetworkManager", Action: kind, Reason: reason}}, nil
}

func isNMConfig(p string) bool {
	p = path.Clean(p)
	switch {
	case p == networkmanager.InternConfPath, p == networkmanager.MainConfPath, p == networkmanager.OldMainConfPath:
		return true
	}
	d := path.Dir(p)
	return d == networkmanager.EtcConfDir || d == networkmanager.RunConfDir || d == networkmanager.SystemConfDir
}

// Events implements EventSource: notices from the shared client's signals, for Daemon.Run. The
// channel exists before the client does and outlives reconnects; it holds one notice (a pass reads
// everything). What the daemon is told (NM 1.42.4):
//   - DHCP4Config/DHCP6Config Options changed, or a device got or lost a DHCP configuration: a
//     renewal with new options. NM keeps resolv.conf at the old global servers while a "*" domain
//     is in force, so zz-nodedns.conf must follow the new servers;
//   - Manager.GlobalDnsConfiguration changed: a reload with another conf.d, or a write over D-Bus;
//   - NM (re)started (NameOwnerChanged), the bus reconnected: read everything again.
//
// Not told (logged only): device state changes (their DHCP options come as their own signal), DNS
// manager changes (NM rewriting resolv.conf: the file watch sees it), NM leaving the bus.
func (n *NetworkManager) Events() <-chan string { return n.conn.events() }

func (n *NetworkManager) forward(events <-chan bus.Event, out chan<- string) {
	forward(events, out, func(e bus.Event) string {
		what := NMNotice(e)
		n.log().Debug("NetworkManager event", "kind", e.Kind.String(), "path", e.Path, "reconcile", what != "")
		if e.Kind == bus.EventBusLost {
			n.log().Warn("system bus connection lost: reconnecting with backoff", "err", e.Err)
		}
		return what
	})
}

// NMNotice is the daemon's notice for a NetworkManager client event ("" when it needs no pass).
func NMNotice(e bus.Event) string {
	switch e.Kind {
	case bus.EventDHCPChanged:
		return "NetworkManager DHCP options changed (" + e.Path + ")"
	case bus.EventGlobalDNSChanged:
		return "NetworkManager GlobalDnsConfiguration changed"
	case bus.EventNMStarted:
		return "NetworkManager started (NameOwnerChanged)"
	case bus.EventBusReconnected:
		return "system bus reconnected"
	}
	return ""
}
