package node

import (
	"errors"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/leases"
	"github.com/nodedns/nodedns/internal/networkmanager"
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/netplan"
	"github.com/nodedns/nodedns/systemd"
)

// observer.go splits Observe into its sources (parts), so the daemon can re-read only the sources
// whose files changed and keep the rest of the previous snapshot. Each part records every node path
// it touched (read, listed, stat'ed, found missing); a change to one of them, to a directory above
// one, or to a file in a directory it listed makes it read again, and so do the parts that use its
// fields. A part that touched /proc (no inotify events there) is read on every pass; /sys/class/net
// is not watched either, but a link that comes or goes shows in networkd's files, which are (as
// Watches says), and those make the parts that map interface indexes read again. A
// full read is the same parts run in the same order, so an incremental snapshot equals a full one
// field by field, Problems included (the property test in this package holds it to that).

// part is one source of the snapshot: one row of the table below reads it, says what it depends
// on, and declares what it reads for the daemon (Watches is the union of the rows' watches).
type part struct {
	name string
	// deps are the parts whose fields read uses: when one of them is read again, so is this one;
	// depsOf, when set, adds those it uses on the snapshot as read so far.
	deps   []int
	depsOf func(s *Snapshot, cfg config.Config) []int
	read   func(s *Snapshot, r nodefs.Reader, cfg config.Config)
	// take copies the part's fields from src to dst (with src the zero Snapshot: clears them).
	take func(dst, src *Snapshot)
	// watches declares the directories read reads (s is the snapshot as read, nil before the
	// first read); nil for a part that reads no file or none that is watched.
	watches func(cfg config.Config, s *Snapshot) []nodefs.Watch
}

// Part indexes, in Observe's order (the order of Problems).
const (
	partResolv = iota
	partResolvedResolv
	partResolvedStub
	partResolved
	partKubelet
	partKubeletResolv
	partNodednsResolv
	partLeases
	partNetworking
	partDhclient
	partNetworkManager
	partNMResolvConf
	partUnit
)

var parts = []part{
	partResolv: {name: "resolv.conf", read: func(s *Snapshot, r nodefs.Reader, _ config.Config) {
		s.ResolvConf = s.readResolv(r, EtcResolvConf)
	}, take: func(d, s *Snapshot) { d.ResolvConf = s.ResolvConf },
		watches: func(_ config.Config, s *Snapshot) []nodefs.Watch {
			return resolvWatches(EtcResolvConf, target(s, func(s *Snapshot) string { return s.ResolvConf.Target }))
		}},
	partResolvedResolv: {name: "resolved's resolv.conf", read: func(s *Snapshot, r nodefs.Reader, _ config.Config) {
		s.ResolvedResolv = s.readResolv(r, ResolvedResolvConf)
	}, take: func(d, s *Snapshot) { d.ResolvedResolv = s.ResolvedResolv },
		watches: func(config.Config, *Snapshot) []nodefs.Watch { return resolvWatches(ResolvedResolvConf) }},
	partResolvedStub: {name: "resolved's stub-resolv.conf", read: func(s *Snapshot, r nodefs.Reader, _ config.Config) {
		s.ResolvedStub = s.readResolv(r, ResolvedStubConf)
	}, take: func(d, s *Snapshot) { d.ResolvedStub = s.ResolvedStub },
		watches: func(config.Config, *Snapshot) []nodefs.Watch { return resolvWatches(ResolvedStubConf) }},

	partResolved: {name: "resolved", read: func(s *Snapshot, r nodefs.Reader, _ config.Config) {
		s.readResolved(r)
		s.DNSDelegates, s.SystemdVersion = systemd.LoadDelegates(r)
		if s.DNSDelegates != nil {
			problems(s, SourceResolved, s.DNSDelegates.Warnings)
		}
		var warns []systemd.Warning
		s.Links, warns = systemd.LoadLinkStates(r)
		problems(s, SourceLinkState, warns)
		s.ResolvedDropIn = s.readManaged(r, ResolvedDropIn)
	}, take: func(d, s *Snapshot) {
		d.Resolved, d.ResolvedOthers, d.ResolvedPersistent = s.Resolved, s.ResolvedOthers, s.ResolvedPersistent
		d.Links, d.ResolvedDropIn = s.Links, s.ResolvedDropIn
		d.DNSDelegates, d.SystemdVersion = s.DNSDelegates, s.SystemdVersion
	}, watches: func(_ config.Config, s *Snapshot) []nodefs.Watch {
		// resolved.conf with its drop-ins (nodedns's among them) and the link state files.
		var delegates *systemd.DNSDelegates
		if s != nil {
			delegates = s.DNSDelegates
		}
		return append(systemd.Watches(), delegates.Watches()...)
	}},

	partKubelet: {name: "kubelet", read: func(s *Snapshot, r nodefs.Reader, cfg config.Config) {
		s.readKubelet(r, cfg)
	}, take: func(d, s *Snapshot) {
		d.Kubelet, d.kubeletInputs, d.KubeletFiles = s.Kubelet, s.kubeletInputs, s.KubeletFiles
		d.KubeletManage, d.KubeletRestart = s.KubeletManage, s.KubeletRestart
	}, watches: kubeletWatches},

	partKubeletResolv: {name: "kubelet resolv.conf", deps: []int{partKubelet}, depsOf: func(s *Snapshot, _ config.Config) []int {
		return resolvDeps(s.Kubelet.ResolvConf)
	}, read: func(s *Snapshot, r nodefs.Reader, _ config.Config) {
		if s.Kubelet.ResolvConf != "" {
			s.KubeletResolv = s.readResolvOnce(r, s.Kubelet.ResolvConf, false)
		}
	}, take: func(d, s *Snapshot) { d.KubeletResolv = s.KubeletResolv },
		watches: func(_ config.Config, s *Snapshot) []nodefs.Watch {
			return resolvWatches(target(s, func(s *Snapshot) string { return s.Kubelet.ResolvConf }),
				target(s, func(s *Snapshot) string { return s.KubeletResolv.Target }))
		}},

	// nodedns's own kubelet file, a part of its own: a change to the kubelet's file (or to
	// /etc/resolv.conf, which the kubelet reads by default) does not read it again.
	partNodednsResolv: {name: "nodedns's kubelet resolv.conf", depsOf: func(s *Snapshot, cfg config.Config) []int {
		deps := resolvDeps(cfg.Kubelet.ResolvConf)
		if s.Kubelet.ResolvConf != "" && path.Clean(s.Kubelet.ResolvConf) == path.Clean(cfg.Kubelet.ResolvConf) {
			deps = append(deps, partKubeletResolv)
		}
		return deps
	}, read: func(s *Snapshot, r nodefs.Reader, cfg config.Config) {
		s.NodednsResolv = s.readResolvOnce(r, cfg.Kubelet.ResolvConf, true)
	}, take: func(d, s *Snapshot) { d.NodednsResolv = s.NodednsResolv },
		watches: func(cfg config.Config, s *Snapshot) []nodefs.Watch {
			return append([]nodefs.Watch{resolvWatch(cfg.Kubelet.ResolvConf)},
				resolvWatches(target(s, func(s *Snapshot) string { return s.NodednsResolv.Target }))...)
		}},

	partLeases: {name: "leases", read: func(s *Snapshot, r nodefs.Reader, _ config.Config) {
		ls, lp := leases.Load(r)
		s.Leases = ls
		problems(s, SourceLease, lp)
		s.readDHCPDomains(r)
	}, take: func(d, s *Snapshot) {
		d.Leases = s.Leases
		d.DHCPDomainsState, d.DHCPDomains, d.LinkNames = s.DHCPDomainsState, s.DHCPDomains, s.LinkNames
	}, watches: func(config.Config, *Snapshot) []nodefs.Watch {
		// Every file of package leases (the dhclient part's dhclient.conf and lease history too),
		// and nodedns's record of the DHCP domains.
		return append(leases.Watches(), stateWatch(DHCPDomainsStatePath, func(b []byte) error {
			_, err := ParseDHCPDomainsState(DHCPDomainsStatePath, b)
			return err
		}))
	}},

	partNetworking: {name: "netplan and networkd", deps: []int{partResolved}, read: func(s *Snapshot, r nodefs.Reader, _ config.Config) {
		// One read of the netplan tree, merged with and without nodedns's own file.
		np, err, others, othersErr := netplan.LoadSplit(r, netplan.NodednsFile)
		if err != nil {
			s.problem(SourceNetplan, netplanPath(err), 0, err.Error())
		} else {
			s.Netplan = np
		}
		s.readNetworking(r, others, othersErr)
	}, take: func(d, s *Snapshot) {
		d.Netplan, d.NetplanOthers, d.NetplanOwn, d.Networkd = s.Netplan, s.NetplanOthers, s.NetplanOwn, s.Networkd
	}, watches: func(_ config.Config, s *Snapshot) []nodefs.Watch {
		ws := append(netplan.Watches(), systemd.NetworkWatches()...)
		if s != nil {
			for _, n := range s.Networkd {
				d := NetworkdDropIn(n.Path)
				ws = append(ws, nodefs.Watch{Dir: path.Dir(d), Match: nodefs.Names(path.Base(d)), Complete: nodefs.NewlineTerminated})
			}
		}
		return ws
	}},

	partDhclient: {name: "dhclient", read: func(s *Snapshot, r nodefs.Reader, _ config.Config) {
		if _, err := r.Lstat(DhclientConf); err == nil {
			s.DhclientConf = true
		}
		s.DhclientHook = s.readManaged(r, DhclientHook)
		s.readDhclient(r)
	}, take: func(d, s *Snapshot) {
		d.DhclientConf, d.DhclientHook, d.DhclientRules = s.DhclientConf, s.DhclientHook, s.DhclientRules
		d.DhclientOffers, d.OfferedState, d.Offered = s.DhclientOffers, s.OfferedState, s.Offered
	}, watches: func(config.Config, *Snapshot) []nodefs.Watch {
		// dhclient.conf and the lease history are package leases' (the leases part declares them).
		return []nodefs.Watch{
			stateWatch(OfferedStatePath, func(b []byte) error {
				_, err := ParseOfferedState(OfferedStatePath, b)
				return err
			}),
			{Dir: path.Dir(DhclientHook), Match: nodefs.Names(path.Base(DhclientHook))},
		}
	}},

	partNetworkManager: {name: "NetworkManager", read: func(s *Snapshot, r nodefs.Reader, _ config.Config) {
		s.readNetworkManagerFiles(r)
	}, take: func(d, s *Snapshot) {
		// All but the judgement of /etc/resolv.conf (partNMResolvConf).
		owns, why := d.NetworkManager.OwnsResolvConf, d.NetworkManager.Why
		d.NetworkManager = s.NetworkManager
		d.NetworkManager.OwnsResolvConf, d.NetworkManager.Why = owns, why
	}, watches: func(config.Config, *Snapshot) []nodefs.Watch { return networkmanager.Watches() }},

	partNMResolvConf: {name: "NetworkManager's resolv.conf", deps: []int{partResolv, partNetworkManager}, read: func(s *Snapshot, _ nodefs.Reader, _ config.Config) {
		s.judgeNMResolvConf()
	}, take: func(d, s *Snapshot) {
		d.NetworkManager.OwnsResolvConf, d.NetworkManager.Why = s.NetworkManager.OwnsResolvConf, s.NetworkManager.Why
	}},

	// Not watched, on purpose (see Watches).
	partUnit: {name: "nodedns unit", read: func(s *Snapshot, r nodefs.Reader, _ config.Config) {
		s.Unit = s.readUnit(r)
	}, take: func(d, s *Snapshot) { d.Unit = s.Unit }},
}

// Observer reads the node source by source and keeps what each source read, so the next
// observation can re-read only the sources a change touched. The zero Observer reads in full.
// One goroutine at a time.
type Observer struct {
	base     *Snapshot // the last snapshot read, before any live source added to it
	touched  [][]string
	volatile []bool
	problems [][]Problem
	// Read lists the parts the last observation read (for tests and debug logs).
	Read []string
}

// Observe reads the node through r (a nodefs.Tree or a store.Store: under the node's root, bounded,
// never a blocking open), in full: every source, nothing kept from an earlier read. It never fails:
// every unusable source is in Problems.
func Observe(r nodefs.Reader, cfg config.Config, now time.Time) *Snapshot {
	var o Observer
	return o.Observe(r, cfg, now, nil)
}

// Observe reads the node through r. changed are the node paths that changed since the last
// observation (files, or directories that appeared or went); nil means "unknown": every source is
// read again (the first observation, a resync, an overflow, a live event). Sources whose recorded
// paths changed is none of are taken over from the last snapshot. The snapshot returned is the
// caller's: the live sources may add to it without touching what the Observer keeps.
func (o *Observer) Observe(r nodefs.Reader, cfg config.Config, now time.Time, changed []string) *Snapshot {
	full := changed == nil || o.base == nil
	if full {
		o.touched = make([][]string, len(parts))
		o.volatile = make([]bool, len(parts))
		o.problems = make([][]Problem, len(parts))
	}
	s := &Snapshot{Now: now}
	if !full {
		*s = *o.base
		s.Now = now
	}
	reread := make([]bool, len(parts))
	o.Read = o.Read[:0]
	for i, p := range parts {
		again := full || o.volatile[i] || affected(o.touched[i], changed)
		deps := p.deps
		if p.depsOf != nil {
			deps = append(slices.Clip(deps), p.depsOf(s, cfg)...)
			if !full {
				// And those it used when it was last read: a part that took a file another part
				// read (readResolvOnce) must read it itself once that part no longer does.
				deps = append(deps, p.depsOf(o.base, cfg)...)
			}
		}
		for _, d := range deps {
			again = again || reread[d]
		}
		if !again {
			continue
		}
		reread[i] = true
		o.Read = append(o.Read, p.name)
		scratch := *s
		p.take(&scratch, &Snapshot{})
		scratch.Problems = nil
		rec := &recorder{r: r}
		p.read(&scratch, rec, cfg)
		p.take(s, &scratch)
		o.touched[i], o.volatile[i], o.problems[i] = rec.paths(), rec.volatile, scratch.Problems
	}
	s.Problems = nil
	for _, ps := range o.problems {
		s.Problems = append(s.Problems, ps...)
	}
	base := *s
	o.base = &base
	// The caller's copy: the live sources append to Problems and fold into Links.
	s.Problems = slices.Clip(s.Problems)
	s.Links = slices.Clone(s.Links)
	return s
}

// affected reports whether a change to one of changed concerns a part that touched these paths: the
// path itself, a directory above it (replaced or removed), or a file in a directory it listed.
func affected(touched, changed []string) bool {
	for _, c := range changed {
		c = path.Clean(c)
		for _, t := range touched {
			if t == c || below(t, c) || below(c, t) {
				return true
			}
		}
	}
	return false
}

// below reports whether the path p is strictly below the directory d, without building d + "/".
func below(p, d string) bool {
	return len(p) > len(d) && p[len(d)] == '/' && p[:len(d)] == d
}

// recorder is a Reader that notes every path asked for.
type recorder struct {
	r        nodefs.Reader
	seen     map[string]bool
	volatile bool
}

func (rc *recorder) note(p string) {
	p = path.Clean(p)
	if rc.seen == nil {
		rc.seen = map[string]bool{}
	}
	rc.seen[p] = true
	if p == "/proc" || strings.HasPrefix(p, "/proc/") {
		rc.volatile = true
	}
}

func (rc *recorder) paths() []string {
	out := make([]string, 0, len(rc.seen))
	for p := range rc.seen {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

func (rc *recorder) ReadFile(p string, k nodefs.Kind) ([]byte, error) {
	rc.note(p)
	return rc.r.ReadFile(p, k)
}

func (rc *recorder) ReadFileInfo(p string, k nodefs.Kind) ([]byte, fs.FileInfo, error) {
	rc.note(p)
	return nodefs.ReadFileInfo(rc.r, p, k)
}

func (rc *recorder) ReadDir(p string) ([]fs.DirEntry, error) {
	rc.note(p)
	return rc.r.ReadDir(p)
}

func (rc *recorder) Stat(p string) (fs.FileInfo, error) {
	rc.note(p)
	return rc.r.Stat(p)
}

func (rc *recorder) Lstat(p string) (fs.FileInfo, error) {
	rc.note(p)
	return rc.r.Lstat(p)
}

func (rc *recorder) Readlink(p string) (string, error) {
	rc.note(p)
	return rc.r.Readlink(p)
}

// ResolveVisitInfo lets nodefs.CheckTrusted walk through the recorder (the reader below is a Walker:
// a Tree or the store), noting the path.
func (rc *recorder) ResolveVisitInfo(p string, followLast bool, visit func(dir string, fi fs.FileInfo) error) (string, fs.FileInfo, error) {
	rc.note(p)
	w, ok := rc.r.(nodefs.Walker)
	if !ok {
		return "", nil, errors.New("this reader cannot say who owns it")
	}
	return w.ResolveVisitInfo(p, followLast, visit)
}

// ResolveLink notes every link on the way, so a change to one in the middle of a chain is seen.
func (rc *recorder) ResolveLink(p string) (string, error) {
	rc.note(p)
	t, err := rc.r.ResolveLink(p)
	if err == nil {
		rc.note(t)
		// The hops between: each link as written, followed one at a time (bounded like the kernel).
		cur := path.Clean(p)
		for i := 0; i < 40 && cur != t; i++ {
			l, err := rc.r.Readlink(cur)
			if err != nil {
				break
			}
			if !strings.HasPrefix(l, "/") {
				l = path.Join(path.Dir(cur), l)
			}
			cur = path.Clean(l)
			rc.note(cur)
		}
	}
	return t, err
}

// resolvDeps: a kubelet resolv.conf takes the node's or one of resolved's files as read already
// when it names one of them (readResolvOnce), and then depends on that part.
func resolvDeps(p string) []int {
	if p == "" {
		return nil
	}
	switch path.Clean(p) {
	case EtcResolvConf:
		return []int{partResolv}
	case ResolvedResolvConf:
		return []int{partResolvedResolv}
	case ResolvedStubConf:
		return []int{partResolvedStub}
	}
	return nil
}

// readResolvOnce reads a kubelet resolv.conf at p, or takes it from the snapshot when another part
// read the same file already (the same file is read once, and a bad one reported once, whoever
// names it); withKubelet also takes the kubelet's file. The path is noted as touched either way,
// so a later change to it reads the part again.
func (s *Snapshot) readResolvOnce(r nodefs.Reader, p string, withKubelet bool) ResolvFile {
	if rc, ok := r.(*recorder); ok {
		rc.note(p)
	}
	known := []ResolvFile{s.ResolvConf, s.ResolvedResolv, s.ResolvedStub}
	if withKubelet && s.Kubelet.ResolvConf != "" {
		known = append(known, s.KubeletResolv)
	}
	for _, rf := range known {
		if rf.Path != "" && path.Clean(rf.Path) == path.Clean(p) {
			return rf
		}
	}
	return s.readResolv(r, p)
}
