// Package node is nodedns's model of a node's DNS setup: one Snapshot, read from the node's files
// under a root directory by one tolerant reader per source. A bad source is recorded as a Problem
// naming the file (and line where there is one) and skipped; Observe never fails as a whole, so one
// broken lease file cannot stop nodedns from fixing the rest of the node (docs/contract.md, invariant 5).
//
// Reading the live node (systemd-resolved over D-Bus, netlink) is layered on top by other packages;
// this package only reads files.
package node

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/nodedns/nodedns/internal/kubelet"
	"github.com/nodedns/nodedns/internal/leases"
	"github.com/nodedns/nodedns/internal/nodefs"
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

// maxConfigSize bounds a configuration file nodedns reads (nodefs.Config).
const maxConfigSize = 1 << 20

// ResolvKind bounds a resolv.conf nodedns reads (the node's, the kubelet's, a pod's).
var ResolvKind = nodefs.Kind{Name: "resolv.conf file", Max: resolvconf.MaxSize}

// Source is the kind of input a Problem is about, so a check can tell which of its inputs could not
// be read without matching message text.
type Source string

// Sources.
const (
	SourceResolvConf Source = "resolv.conf"
	SourceResolved   Source = "systemd-resolved configuration"
	SourceLinkState  Source = "link state"
	SourceKubelet    Source = "kubelet config"
	SourceLease      Source = "DHCP lease"
	SourceNetplan    Source = "netplan"
	SourceNetworkd   Source = "systemd-networkd configuration"
	SourceUnit       Source = "systemd unit"
	SourceManaged    Source = "nodedns-managed file"
	SourceLive       Source = "live source" // D-Bus or netlink, on the live node
)

// Problem is a source nodedns could not use.
type Problem struct {
	Path   string // node path of the file or directory; "" for a live source
	Line   int
	Source Source
	Msg    string
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

// ProblemsFrom lists the problems with one of the sources.
func (s *Snapshot) ProblemsFrom(srcs ...Source) []Problem {
	var out []Problem
	for _, p := range s.Problems {
		if slices.Contains(srcs, p.Source) {
			out = append(out, p)
		}
	}
	return out
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
	Now time.Time

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
	// DNSDelegates are resolved's DNS delegates (systemd 258+; nil on an older systemd), and
	// SystemdVersion the installed systemd's major version (0: unknown): systemd.LoadDelegates.
	DNSDelegates   *systemd.DNSDelegates
	SystemdVersion int

	Kubelet       kubelet.Config
	kubeletInputs kubelet.Inputs // what finding Kubelet.Path read (KubeletSources)
	KubeletResolv ResolvFile     // the file kubelet's resolvConf names ("" when disabled)
	NodednsResolv ResolvFile     // the kubelet resolv.conf nodedns writes (config kubelet.resolvConf)
	// KubeletFiles is kubelet's config as the node's files say (what kubelet reads when it starts
	// next), before a running kubelet's own command line replaces Kubelet on the live node.
	KubeletFiles kubelet.Config
	// KubeletManage is kubelet.manage's edit (nil when kubelet.manage is off or nothing is to do),
	// KubeletRestart nodedns's record that kubelet must restart to read it (kubeletmanage.go).
	KubeletManage  *kubelet.Edit
	KubeletRestart *KubeletRestart
	// KubeletStarted is when the running kubelet (or k3s, RKE2's kubelet) started, zero when no
	// process was read (--root) or none is root's (docs/contract.md "Kubelet's config").
	KubeletStarted time.Time
	// KubeletIgnored names each running process that calls itself kubelet (or k3s) but is not
	// root's kubelet, with the rule it failed (live node only; kubelet.FindProcess), for `check`;
	// KubeletUnverified that one of them could not be verified at all (nodedns lacks the ptrace
	// access the kernel asks to show its executable and namespaces): if it is root's kubelet,
	// nodedns cannot see it restart.
	KubeletIgnored    []string
	KubeletUnverified bool
	// KubeletScanned is set when the running kubelet was looked for (live node, kubelet.manage):
	// whether KubeletStarted can be believed when zero, and whether a restart nodedns plans is
	// carried out (under --root it is not, and is not recorded as done).
	KubeletScanned bool

	Leases []leases.Lease
	// LiveLeases is set when the live node's lease sources were asked too (networkd's leases over
	// varlink, which networkd 262 keeps in no file); under --root only lease files are read.
	LiveLeases bool
	Netplan    *netplan.Config // nil when netplan's files could not be read
	// NetplanOthers is netplan's configuration without nodedns's own file (what the node asks for; nil
	// when unreadable), NetplanOwn that file; Networkd the networkd .network files that turn DHCP
	// on; Uplink the default-route interface (live only). See networking.go.
	NetplanOthers *netplan.Config
	NetplanOwn    Managed
	Networkd      []NetworkdNetwork
	Uplink        *Uplink

	DhclientConf bool // /etc/dhcp/dhclient.conf exists: dhclient is in use or may be
	DhclientHook Managed
	// DhclientRules are dhclient.conf's supersede/prepend/append/default rules for the DNS options
	// (nil when there is no readable dhclient.conf); DhclientOffers what DHCP offered behind them
	// per lease file and interface; Offered nodedns's record of earlier offers, read from
	// OfferedState (see dhclient.go).
	DhclientRules  *leases.DhclientConf
	DhclientOffers []DhclientOffer
	OfferedState   Managed
	Offered        map[string]OfferedRecord
	// DHCPDomainsState is nodedns's record of the DHCP search domains networkd's links were handed,
	// DHCPDomains its content by interface, LinkNames the node's links (nil when /sys/class/net
	// cannot be listed). See dhcpdomains.go.
	DHCPDomainsState Managed
	DHCPDomains      map[string]DHCPDomainsRecord
	LinkNames        map[string]bool

	// NetworkManager is NM's configuration, profiles and DHCP state (networkmanager.go).
	NetworkManager NetworkManager

	Unit Unit

	// CacheInterfaceAddrs are the addresses on the nodelocaldns interface. Only the live layer
	// (netlink) fills them; under --root they stay empty.
	CacheInterfaceAddrs []netip.Addr

	Problems []Problem
}

// netplanPath is the file a netplan error is about ("" when it names none).
func netplanPath(err error) string {
	var ne *netplan.Error
	if errors.As(err, &ne) {
		return ne.Path
	}
	return ""
}

func (s *Snapshot) problem(src Source, path string, line int, msg string) {
	s.Problems = append(s.Problems, Problem{Path: path, Line: line, Source: src, Msg: msg})
}

// problems records what a reader's Load reported (a nodefs.Problem, or a type of the same shape:
// systemd.Warning, kubelet.Problem) as problems of source src, in order.
func problems[P ~struct {
	Path string
	Line int
	Msg  string
}](s *Snapshot, src Source, ps []P) {
	for _, p := range ps {
		q := nodefs.Problem(p)
		s.problem(src, q.Path, q.Line, q.Msg)
	}
}

func (s *Snapshot) readResolv(r nodefs.Reader, p string) ResolvFile {
	rf := ResolvFile{Path: p, Target: p}
	fi, err := r.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return rf
	}
	if err != nil {
		rf.Err = err
		s.problem(SourceResolvConf, p, 0, err.Error())
		return rf
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		rf.Symlink = true
		rf.LinkTarget, _ = r.Readlink(p)
		t, err := r.ResolveLink(p)
		if err != nil {
			rf.Err = err
			s.problem(SourceResolvConf, p, 0, err.Error())
			return rf
		}
		rf.Target = t
	}
	// The mode from the descriptor the bytes were read from: no second lookup of the path.
	data, ti, err := nodefs.ReadFileInfo(r, rf.Target, ResolvKind)
	if errors.Is(err, fs.ErrNotExist) {
		// A dangling symlink (e.g. to resolved's stub while resolved is down) is "missing".
		return rf
	}
	rf.Exists = true
	if err != nil {
		rf.Err = err
		s.problem(SourceResolvConf, rf.Target, 0, err.Error())
		return rf
	}
	if ti == nil {
		ti, _ = r.Stat(rf.Target) // systemd's /dev/null mask, read as empty without an open
	}
	if ti != nil {
		rf.Mode = ti.Mode().Perm()
	}
	rf.Data = data
	f, err := resolvconf.Parse(data)
	if err != nil {
		rf.Err = fmt.Errorf("%s: %w", rf.Target, err)
		s.problem(SourceResolvConf, rf.Target, 0, err.Error())
		return rf
	}
	for _, w := range f.Warnings() {
		s.problem(SourceResolvConf, rf.Target, w.Line, w.Msg)
	}
	rf.File = f
	return rf
}

// readManaged reads a file nodedns owns. A file that cannot be read is reported: nodedns would
// otherwise take it for missing and write over what it cannot see.
func (s *Snapshot) readManaged(r nodefs.Reader, p string) Managed {
	return s.readManagedKind(r, p, nodefs.Config)
}

func (s *Snapshot) readResolved(r nodefs.Reader) {
	s.Resolved, s.ResolvedOthers, s.ResolvedPersistent = systemd.LoadResolvedViews(r, ResolvedDropIn)
	problems(s, SourceResolved, s.Resolved.Warnings)
}

// readUnit finds the nodedns unit the way systemd would on the next boot: the first unit directory
// that has it, its drop-ins (ordered by nodefs.DropIns, systemd's rule), and the .wants symlinks under
// /etc/systemd/system (what `systemctl enable` creates).
func (s *Snapshot) readUnit(r nodefs.Reader) Unit {
	var u Unit
	var dropIns []string
	var errs []error
	u.Path, dropIns, errs = systemd.FindUnit(r, UnitName)
	if u.Path == "" {
		return u
	}
	for _, err := range errs {
		s.problem(SourceUnit, "", 0, err.Error())
	}
	var files []systemd.UnitFile
	for _, src := range append([]string{u.Path}, dropIns...) {
		data, err := r.ReadFile(src, nodefs.Config)
		if err != nil {
			u.ReadError = err
			s.problem(SourceUnit, src, 0, err.Error())
			continue
		}
		files = append(files, systemd.UnitFile{Path: src, Data: data})
	}
	var fatal *systemd.Warning
	if u.Before, fatal = systemd.UnitDependencies(UnitName, "Before", files); fatal != nil {
		s.problem(SourceUnit, fatal.Path, fatal.Line, fatal.Msg)
	}
	const etcUnits = "/etc/systemd/system"
	es, _ := r.ReadDir(etcUnits)
	for _, e := range es {
		if !strings.HasSuffix(e.Name(), ".wants") {
			continue
		}
		w := path.Join(etcUnits, e.Name(), UnitName)
		if _, err := r.Lstat(w); err != nil {
			continue
		}
		if _, err := r.Stat(w); err != nil {
			continue // a dangling enable symlink does not start anything
		}
		u.Enabled = true
		u.WantedBy = append(u.WantedBy, strings.TrimSuffix(e.Name(), ".wants"))
	}
	sort.Strings(u.WantedBy)
	return u
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
