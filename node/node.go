// Package node is nodedns's model of a node's DNS setup: one Snapshot, read from the node's files
// under a root directory by one tolerant reader per source. A bad source is recorded as a Problem
// naming the file (and line where there is one) and skipped; Observe never fails as a whole, so one
// broken lease file cannot stop nodedns from fixing the rest of the node (design.md invariant 5).
//
// Reading the live node (systemd-resolved over D-Bus, netlink) is layered on top by other packages;
// this package only reads files.
package node

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/nodedns/nodedns/config"
	"github.com/nodedns/nodedns/files"
	"github.com/nodedns/nodedns/leases"
	"github.com/nodedns/nodedns/netplan"
	"github.com/nodedns/nodedns/resolvconf"
	"github.com/nodedns/nodedns/systemd"
)

// Node paths nodedns reads and owns.
const (
	EtcResolvConf      = "/etc/resolv.conf"
	ResolvedRunDir     = "/run/systemd/resolve"
	ResolvedResolvConf = "/run/systemd/resolve/resolv.conf"
	ResolvedStubConf   = "/run/systemd/resolve/stub-resolv.conf"
	ResolvedDropIn     = "/etc/systemd/resolved.conf.d/zz-nodedns.conf"
	DhclientConf       = "/etc/dhcp/dhclient.conf"
	DhclientHook       = "/etc/dhcp/dhclient-enter-hooks.d/nodedns"
	UnitName           = "nodedns.service"
)

// unitDirs are where systemd looks for a unit installed by a package or an admin (systemd.unit(5)),
// highest priority first.
var unitDirs = []string{"/etc/systemd/system", "/run/systemd/system", "/usr/local/lib/systemd/system", "/lib/systemd/system", "/usr/lib/systemd/system"}

// maxConfigSize bounds every file nodedns reads: none of them is legitimately larger.
const maxConfigSize = 1 << 20

// Problem is a source nodedns could not use.
type Problem struct {
	Path string
	Line int
	Msg  string
}

func (p Problem) String() string {
	if p.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", p.Path, p.Line, p.Msg)
	}
	if p.Path == "" || strings.Contains(p.Msg, p.Path) {
		return p.Msg // the reader's error already names the file
	}
	return fmt.Sprintf("%s: %s", p.Path, p.Msg)
}

// ResolvFile is one resolv.conf-format file as found on the node.
type ResolvFile struct {
	Path       string // the node path asked for
	Exists     bool
	Symlink    bool   // Path itself is a symlink
	LinkTarget string // what the symlink says, as written
	Target     string // the final node path after following links inside the root
	Mode       fs.FileMode
	Data       []byte
	File       *resolvconf.File // nil when missing or unparsable
	Err        error            // why File is nil although the file exists
}

// Managed is the current state of a file nodedns owns.
type Managed struct {
	Path   string
	Exists bool
	Data   []byte
	Err    error
}

// Unit is what the next boot needs from the nodedns unit.
type Unit struct {
	Path      string   // node path of the unit file found, "" when not installed
	Enabled   bool     // a .wants symlink under /etc/systemd/system pulls it in
	WantedBy  []string // the targets whose .wants directory holds it
	Before    []string // Before= from the unit and its drop-ins
	ReadError error
}

// Snapshot is everything nodedns knows about the node's DNS setup at one moment.
type Snapshot struct {
	Root string
	Now  time.Time

	ResolvConf     ResolvFile // /etc/resolv.conf, followed inside the root
	ResolvedResolv ResolvFile // /run/systemd/resolve/resolv.conf: resolved's uplink view
	ResolvedStub   ResolvFile // /run/systemd/resolve/stub-resolv.conf

	// Resolved is resolved.conf with all drop-ins; ResolvedOthers the same without nodedns's own
	// drop-in (what the rest of the node asks for); ResolvedPersistent without anything under /run
	// (what survives a reboot).
	Resolved           *systemd.ResolvedConfig
	ResolvedOthers     *systemd.ResolvedConfig
	ResolvedPersistent *systemd.ResolvedConfig
	ResolvedDropIn     Managed
	Links              []systemd.LinkState
	// ResolvedLive is resolved's own view over D-Bus (live node only; nil under --root or when
	// resolved could not be asked). The live source also folds its per-link DNS and domains into
	// Links, so readers of Links see what resolved really uses.
	ResolvedLive *systemd.ResolvedState

	Kubelet       Kubelet
	KubeletResolv ResolvFile // the file kubelet's resolvConf names ("" when disabled)
	NodednsResolv ResolvFile // the kubelet resolv.conf nodedns writes (config kubelet.resolvConf)

	Leases  []leases.Lease
	Netplan *netplan.Config // nil when netplan's files could not be read
	// NetplanOthers is netplan's configuration without nodedns's own file (what the node asks for; nil
	// when unreadable), NetplanOwn that file; Networkd the networkd .network files that turn DHCP
	// on; Uplink the default-route interface (live only). See networking.go.
	NetplanOthers *netplan.Config
	NetplanOwn    Managed
	Networkd      []NetworkdNetwork
	Uplink        *Uplink

	DhclientConf bool // /etc/dhcp/dhclient.conf exists: dhclient is in use or may be
	DhclientHook Managed

	Unit Unit

	// CacheInterfaceAddrs are the addresses on the nodelocaldns interface. Only the live layer
	// (netlink) fills them; under --root they stay empty.
	CacheInterfaceAddrs []netip.Addr

	Problems []Problem
}

// Observe reads the node under root. It never fails: every unusable source is in Problems.
func Observe(root string, cfg config.Config, now time.Time) *Snapshot {
	if root == "" {
		root = "/"
	}
	st := &files.Store{Root: root, FS: files.OS(), StateDir: config.StateDir}
	s := &Snapshot{Root: root, Now: now}

	s.ResolvConf = s.readResolv(st, EtcResolvConf)
	s.ResolvedResolv = s.readResolv(st, ResolvedResolvConf)
	s.ResolvedStub = s.readResolv(st, ResolvedStubConf)

	s.readResolved(root)
	var warns []systemd.Warning
	s.Links, warns = systemd.LoadLinkStates(root)
	for _, w := range warns {
		s.problem(w.Path, w.Line, w.Msg)
	}
	s.ResolvedDropIn = readManaged(st, ResolvedDropIn)

	s.readKubelet(st, cfg)
	// The same file is read once (and a bad one reported once), whoever names it.
	known := map[string]ResolvFile{EtcResolvConf: s.ResolvConf, ResolvedResolvConf: s.ResolvedResolv, ResolvedStubConf: s.ResolvedStub}
	readOnce := func(p string) ResolvFile {
		if rf, ok := known[path.Clean(p)]; ok {
			return rf
		}
		rf := s.readResolv(st, p)
		known[path.Clean(p)] = rf
		return rf
	}
	if s.Kubelet.ResolvConf != "" {
		s.KubeletResolv = readOnce(s.Kubelet.ResolvConf)
	}
	s.NodednsResolv = readOnce(cfg.Kubelet.ResolvConf)

	ls, lp := leases.Read(root)
	s.Leases = ls
	for _, p := range lp {
		s.problem(p.Path, 0, p.Err.Error())
	}

	// One read of the netplan tree, merged with and without nodedns's own file.
	np, err, others, othersErr := netplan.LoadSplit(root, netplan.NodednsFile)
	if err != nil {
		s.problem("", 0, err.Error())
	} else {
		s.Netplan = np
	}
	s.readNetworking(st, root, others, othersErr)

	if _, err := os.Lstat(filepath.Join(root, DhclientConf)); err == nil {
		s.DhclientConf = true
	}
	s.DhclientHook = readManaged(st, DhclientHook)
	s.Unit = readUnit(st, root)
	return s
}

func (s *Snapshot) problem(path string, line int, msg string) {
	s.Problems = append(s.Problems, Problem{Path: path, Line: line, Msg: msg})
}

func (s *Snapshot) readResolv(st *files.Store, p string) ResolvFile {
	rf := ResolvFile{Path: p, Target: p}
	full := filepath.Join(s.Root, p)
	fi, err := os.Lstat(full)
	if errors.Is(err, fs.ErrNotExist) {
		return rf
	}
	if err != nil {
		rf.Err = err
		s.problem(p, 0, err.Error())
		return rf
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		rf.Symlink = true
		rf.LinkTarget, _ = os.Readlink(full)
		t, err := st.ResolveLink(p)
		if err != nil {
			rf.Err = err
			s.problem(p, 0, err.Error())
			return rf
		}
		rf.Target = t
	}
	data, err := st.Read(rf.Target, resolvconf.MaxSize)
	if errors.Is(err, fs.ErrNotExist) {
		// A dangling symlink (e.g. to resolved's stub while resolved is down) is "missing".
		return rf
	}
	rf.Exists = true
	if err != nil {
		rf.Err = err
		s.problem(rf.Target, 0, err.Error())
		return rf
	}
	if ti, err := os.Stat(filepath.Join(s.Root, rf.Target)); err == nil {
		rf.Mode = ti.Mode().Perm()
	}
	rf.Data = data
	f, err := resolvconf.Parse(data)
	if err != nil {
		rf.Err = fmt.Errorf("%s: %w", rf.Target, err)
		s.problem(rf.Target, 0, err.Error())
		return rf
	}
	for _, w := range f.Warnings() {
		s.problem(rf.Target, w.Line, w.Msg)
	}
	rf.File = f
	return rf
}

func readManaged(st *files.Store, p string) Managed {
	m := Managed{Path: p}
	data, err := st.Read(p, maxConfigSize)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		m.Exists, m.Err = true, err
	default:
		m.Exists, m.Data = true, data
	}
	return m
}

func (s *Snapshot) readResolved(root string) {
	all, err := systemd.LoadResolvedConfig(root)
	if err != nil {
		s.problem("", 0, err.Error())
		return
	}
	for _, w := range all.Warnings {
		s.problem(w.Path, w.Line, w.Msg)
	}
	s.Resolved = all
	s.ResolvedOthers = reparse(root, all.Files, func(p string) bool { return p == ResolvedDropIn })
	s.ResolvedPersistent = reparse(root, all.Files, func(p string) bool { return strings.HasPrefix(p, "/run/") })
}

// reparse rebuilds a resolved configuration from the same files minus those skip selects, in the same
// order, so "what would resolved use without X" needs no second directory walk.
func reparse(root string, paths []string, skip func(string) bool) *systemd.ResolvedConfig {
	cfg := &systemd.ResolvedConfig{}
	for _, p := range paths {
		if skip(p) {
			continue
		}
		data, err := os.ReadFile(files.HostPath(root, p))
		if err != nil {
			continue // already reported by the first load
		}
		systemd.ParseResolvedConf(cfg, p, data)
		cfg.Files = append(cfg.Files, p)
	}
	cfg.Warnings = nil
	return cfg
}

func (s *Snapshot) readKubelet(st *files.Store, cfg config.Config) {
	s.Kubelet = Kubelet{Path: cfg.Kubelet.Config, ResolvConf: KubeletDefaultResolvConf}
	data, err := st.Read(cfg.Kubelet.Config, maxConfigSize)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		s.Kubelet.Exists = true
		s.problem(cfg.Kubelet.Config, 0, err.Error())
		return
	}
	k, err := ParseKubelet(data, cfg.Kubelet.Config)
	if err != nil {
		s.problem("", 0, err.Error())
	}
	s.Kubelet = k
}

// readUnit finds the nodedns unit the way systemd would on the next boot: the first unit directory
// that has it, its drop-ins, and the .wants symlinks under /etc/systemd/system (what `systemctl
// enable` creates).
func readUnit(st *files.Store, root string) Unit {
	var u Unit
	for _, d := range unitDirs {
		p := path.Join(d, UnitName)
		if _, err := os.Stat(files.HostPath(root, p)); err == nil {
			u.Path = p
			break
		}
	}
	if u.Path == "" {
		return u
	}
	sources := []string{u.Path}
	for _, d := range unitDirs {
		matches, _ := filepath.Glob(filepath.Join(root, d, UnitName+".d", "*.conf"))
		sort.Strings(matches)
		for _, m := range matches {
			rel, _ := filepath.Rel(root, m)
			sources = append(sources, "/"+rel)
		}
	}
	for _, src := range sources {
		data, err := os.ReadFile(files.HostPath(root, src))
		if err != nil {
			u.ReadError = err
			continue
		}
		u.Before = append(u.Before, unitValues(data, "Unit", "Before")...)
	}
	wants, _ := filepath.Glob(filepath.Join(root, "/etc/systemd/system", "*.wants", UnitName))
	for _, w := range wants {
		rel, _ := filepath.Rel(root, w)
		target, err := st.ResolveLink("/" + rel)
		if err != nil {
			continue
		}
		if _, err := os.Stat(files.HostPath(root, target)); err != nil {
			continue // a dangling enable symlink does not start anything
		}
		u.Enabled = true
		u.WantedBy = append(u.WantedBy, strings.TrimSuffix(filepath.Base(filepath.Dir(w)), ".wants"))
	}
	sort.Strings(u.WantedBy)
	return u
}

// unitValues returns the space-separated values of key in section, as systemd accumulates list
// settings such as Before= (an empty assignment resets the list).
func unitValues(data []byte, section, key string) []string {
	var out []string
	cur := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' && strings.HasSuffix(line, "]") {
			cur = line[1 : len(line)-1]
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || cur != section || strings.TrimSpace(k) != key {
			continue
		}
		v = strings.TrimSpace(v)
		if v == "" {
			out = nil
			continue
		}
		out = append(out, strings.Fields(v)...)
	}
	return out
}

// ResolvedInUse reports whether systemd-resolved is the node's resolver: /etc/resolv.conf points into
// /run/systemd/resolve, or resolved has left its runtime files (it runs, or ran this boot).
func (s *Snapshot) ResolvedInUse() bool {
	if s.ResolvConf.Symlink && strings.HasPrefix(s.ResolvConf.Target, ResolvedRunDir+"/") {
		return true
	}
	return s.ResolvedResolv.Exists || s.ResolvedStub.Exists
}

// ResolvConfManagedByResolved reports whether /etc/resolv.conf is one of resolved's own files, which
// nodedns never edits (it fixes resolved instead).
func (s *Snapshot) ResolvConfManagedByResolved() bool {
	return s.ResolvConf.Symlink && strings.HasPrefix(s.ResolvConf.Target, ResolvedRunDir+"/")
}
