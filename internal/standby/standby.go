package standby

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nodedns/nodedns/internal/cachenet"
	"github.com/nodedns/nodedns/internal/standby/statefile"
)

// States of the standby (docs/contract.md "Standby"; the check nodelocaldns.standby reports them),
// as its state file (statefile) says them.
const (
	Ready   = statefile.Ready
	Active  = statefile.Active
	Unknown = statefile.Unknown
)

// StatePath is the node path of the standby's state file: its status for `nodedns check` and the
// cache's cluster DNS as its Corefile last said.
const StatePath = statefile.Path

// Cache is the process holding the cache's listener, as the check finds it.
type Cache struct {
	PID int
	// PIDs are every process that holds one of the cache's listeners (PID among them: a cache
	// being replaced and its successor share the address), watched for exit.
	PIDs     []int
	Forwards []Forward
	// Likely says the kernel hid which process holds the listeners (their /proc/PID/fd takes
	// ptrace access): PIDs are the cache processes that may (live.FindCacheHolders: of the
	// socket's owner, in the socket's network namespace), PID one of them, and which of them
	// holds the listeners is not known.
	Likely bool
}

// Standby watches the cache addresses and stands in while no cache listens there.
type Standby struct {
	// Addrs are the cache addresses to cover.
	Addrs []netip.Addr
	// Inputs gives the current targets' inputs (re-read on each resync); CorefileClusterDNS is
	// filled in by the standby from the cache as last seen.
	Inputs func() (Inputs, error)
	// FindCache finds the process holding a cache listener on one of addrs (nil: none found).
	FindCache func(addrs []netip.Addr) *Cache
	// Resync is how often everything is read again without an event.
	Resync time.Duration
	// Recheck is how often the listeners are looked at again while standing in (or while a listener
	// belongs to no process the standby can watch); at most once a second when idle.
	Recheck time.Duration
	// LoadState and SaveState keep the status and the Corefile's cluster DNS in the state directory.
	LoadState func() ([]byte, error)
	SaveState func([]byte) error
	Log       *slog.Logger
	// Metrics, when set, is told what the standby does.
	Metrics Metrics
	// Port is 53 but for tests.
	Port int

	// Interface is the cache's interface (config nodeLocalDNS.interface): node-cache's teardown
	// deletes it, and the standby puts it back (docs/contract.md "Standby"). "": nothing is put back.
	Interface string
	// HandsOut reads kubelet's effective clusterDNS (docs/contract.md "Kubelet's config"): a cache
	// address is put back only while kubelet hands it to pods. nil: nothing is put back.
	HandsOut func() ([]netip.Addr, error)
	// LoadRecord and SaveRecord keep the record of what the standby put back and node-cache has not
	// taken over (cachenet.RecordPath); SaveRecord(nil) removes it.
	LoadRecord func() ([]byte, error)
	SaveRecord func([]byte) error
	// ProbeEvery is how often the cache is asked whether it answers; HungAfter how long it may
	// answer nothing while it holds its listeners before the standby stands in beside it (0: the
	// defaults; a negative HungAfter: never).
	ProbeEvery, HungAfter time.Duration

	mu     sync.Mutex
	status Status
	fwd    map[netip.Addr]*Forwarder
	watch  *exitWatch
	// watchKey are the listeners (inodes) others held when the watched processes were found.
	watchKey string
	targets  Targets
	lastSave time.Time

	steers  map[netip.Addr]*steering
	probes  map[netip.Addr]*prober
	health  chan struct{} // a prober saw the cache start or stop answering
	fp      cachenet.Footprint
	fpOK    bool
	fpSeen  time.Time // when this interface was first seen
	made    []cachenet.Made
	leaving map[uint64]time.Time // sockets of a cache whose teardown ran: never given back to
	ctx     context.Context
	// lastCache is the process found holding the listeners; caught the sockets bound the moment
	// it exited, for the forwarder to serve.
	lastCache *Cache
	caught    map[netip.Addr]caughtConns
}

// Metrics receives the standby's events.
type Metrics interface {
	StandbyActive(active bool)
	StandbyQuery(rcode int)
	StandbyTakeover(delay time.Duration)
}

// Status is what the standby says about itself, kept in the state file for `nodedns check`.
type Status = statefile.Status

// PutBack is what the standby did when node-cache's interface or a cache address went.
type PutBack = statefile.PutBack

// ParseStatus reads the state file; name is for the error.
func ParseStatus(name string, data []byte) (Status, error) { return statefile.Parse(name, data) }

// Status returns the current status.
func (s *Standby) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.status
	st.Covering = slices.Clone(st.Covering)
	for _, f := range s.fwd {
		st.Queries += f.Queries()
	}
	return st
}

func (s *Standby) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.New(slog.DiscardHandler)
}

// Run covers the addresses until ctx ends; then it closes its sockets.
func (s *Standby) Run(ctx context.Context, pid int) {
	if s.Resync <= 0 {
		s.Resync = 5 * time.Minute
	}
	if s.Recheck <= 0 {
		s.Recheck = 250 * time.Millisecond
	}
	if s.ProbeEvery <= 0 {
		s.ProbeEvery = DefaultProbeEvery
	}
	if s.HungAfter == 0 {
		s.HungAfter = DefaultHungAfter
	}
	if s.Port == 0 {
		s.Port = 53
	}
	s.ctx = ctx
	s.fwd = map[netip.Addr]*Forwarder{}
	s.steers = map[netip.Addr]*steering{}
	s.probes = map[netip.Addr]*prober{}
	s.leaving = map[uint64]time.Time{}
	s.health = make(chan struct{}, 1)
	s.status.PID = pid
	s.status.UID = uint32(os.Geteuid())
	if s.LoadState != nil {
		if data, err := s.LoadState(); err == nil {
			if old, err := ParseStatus("standby state", data); err == nil {
				s.status.CorefileClusterDNS = old.CorefileClusterDNS
				s.status.PutBack = old.PutBack
				s.status.CacheUID = old.CacheUID
			}
		}
	}
	s.loadRecord()
	defer s.shutdown()
	if s.HungAfter > 0 {
		var wg sync.WaitGroup
		defer wg.Wait()
		pctx, cancel := context.WithCancel(ctx)
		defer cancel()
		for _, a := range s.Addrs {
			p := newProber(a, s.Port, s.ProbeEvery, s.HungAfter, func() {
				select {
				case s.health <- struct{}{}:
				default:
				}
			})
			s.probes[a] = p
			wg.Go(func() { p.run(pctx) })
		}
	}
	var netEvents <-chan netEvent
	if s.Interface != "" && s.HandsOut != nil {
		if w, err := watchNet(s.Interface, s.Addrs); err == nil {
			defer w.Close()
			netEvents = w.Events
		} else {
			s.log().Warn("cannot watch the cache's interface and addresses: node-cache's teardown is not covered", "err", err)
		}
	}
	resync := time.NewTicker(s.Resync)
	defer resync.Stop()
	s.refresh()
	s.check(time.Time{})
	for {
		var exited <-chan struct{}
		if s.watch != nil {
			exited = s.watch.Exited
		}
		var recheck, listed <-chan time.Time
		switch {
		case len(s.fwd) > 0:
			recheck = time.After(s.Recheck)
		case s.watch == nil:
			// Nothing to wait on (no cache process found, or the address is gone): once a second.
			recheck = time.After(time.Second)
		case s.fpOK && s.fp.RulesRead.IsZero() && time.Since(s.fpSeen) < rulesWithin:
			// node-cache writes its rules at its first sync tick (60 s after it starts, at once
			// with -pidfile): look for them until they are there, then at each resync.
			recheck = time.After(5 * time.Second)
		default:
			// Watching the cache's processes: the sockets on its addresses are listed once a
			// second (sock_diag alone), and looked at in full when others hold them than when the
			// processes were found.
			listed = time.After(time.Second)
		}
		select {
		case <-ctx.Done():
			return
		case e := <-netEvents:
			s.gone(e)
		case <-exited:
			at := time.Now()
			s.mu.Lock()
			caught := len(s.caught)
			s.mu.Unlock()
			s.log().Info("a node-local cache process exited; checking its address", "pids", s.watch.PIDs, "bound at its exit", caught)
			s.watch.Close()
			s.watch = nil
			s.check(at)
		case <-s.health:
			s.check(time.Time{})
		case <-recheck:
			s.check(time.Time{})
		case <-listed:
			if s.listenersMoved() {
				s.check(time.Time{})
			}
		case <-resync.C:
			s.refresh()
			s.fp.RulesRead = time.Time{} // read node-cache's rules again
			s.check(time.Time{})
		}
	}
}

// refresh re-reads the targets' inputs.
func (s *Standby) refresh() {
	in, err := s.Inputs()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.status.Why = "cannot read the node: " + err.Error()
		return
	}
	in.CacheAddrs = appendNew(in.CacheAddrs, s.Addrs...)
	in.CorefileClusterDNS = s.status.CorefileClusterDNS
	s.targets = Choose(in)
	s.status.Targets = s.targets.Describe()
}

// held is what listens on one cache address besides the standby.
type held struct {
	udp, tcp         []uint64 // the sockets of others: UDP, listening TCP
	udpSize, tcpSize int      // the groups' sizes, the standby's sockets included
	leaving          bool     // a socket of a cache whose teardown ran is still open
}

// members is a key of the group's membership: it changes whenever a socket joins or leaves.
func (h held) members() string { return fmt.Sprint(h.udp, h.tcp, h.udpSize, h.tcpSize) }

// check looks at the listeners on the cache addresses and stands in or gives back. exitAt is when
// the cache was seen to exit (zero: not from an exit event).
func (s *Standby) check(exitAt time.Time) {
	ls, err := Listeners(s.Addrs)
	if err != nil {
		s.setUnknown("cannot list the sockets on the cache addresses: " + err.Error())
		return
	}
	hs := map[netip.Addr]*held{}
	for _, a := range s.Addrs {
		hs[a] = &held{}
	}
	for k, since := range s.leaving {
		// A cache whose interface went without it exiting (deleted by hand) is no longer leaving
		// after a while: it may be given the address back.
		if time.Since(since) > leaveGrace {
			delete(s.leaving, k)
		}
	}
	caught := s.caughtInodes()
	var uids []uint32 // the users of the others' sockets
	for _, l := range ls {
		h := hs[l.Addr]
		if caught[l.Inode] {
			continue // the standby's own, bound at the cache's exit: counted when it stands in
		}
		if l.Proto == "udp" {
			h.udpSize++
		} else {
			h.tcpSize++
		}
		if f := s.fwd[l.Addr]; f != nil && f.Own(l.Inode) {
			continue
		}
		uids = append(uids, l.UID)
		if _, ok := s.leaving[l.Inode]; ok {
			h.leaving = true
			continue
		}
		if l.Proto == "udp" {
			h.udp = append(h.udp, l.Inode)
		} else {
			h.tcp = append(h.tcp, l.Inode)
		}
	}
	// Another listener holds an address when it has both its UDP socket and its listening TCP one:
	// giving back on UDP alone would leave TCP queries unanswered while the cache starts.
	others := map[netip.Addr]bool{}
	hung := map[netip.Addr]bool{}
	for a, h := range hs {
		if len(h.udp) > 0 && (len(h.tcp) > 0 || s.fwd[a] == nil) {
			others[a] = true
			hung[a] = s.probes[a] != nil && s.probes[a].isHung()
		}
	}
	// The cache's user, as its listeners say; another user's than the standby's locks the standby
	// out of standing in (the cache could not bind beside it, nor again after it).
	otherUser, uidSeen := s.noteCacheUID(uids)
	if otherUser {
		for a, f := range s.fwd {
			s.stopForwarder(a, f, "the node-local cache's sockets are another user's: standby closed its sockets so that the cache can bind")
		}
	}
	// Give back every address the cache (or anything else) serves again.
	for a, f := range s.fwd {
		if !others[a] || hung[a] {
			continue
		}
		st := s.steers[a]
		if st == nil || !st.ok {
			// Not steering (the program was refused): close at once, as CoreDNS binds beside.
			s.stopForwarder(a, f, "the node-local cache listens again; standby closed its sockets")
			continue
		}
		if hs[a].leaving {
			continue // the leaving cache's sockets are still open: never give back to them
		}
		st.steer(hs[a], s.log())
		if s.probes[a] == nil || s.probes[a].answers() {
			s.handBack(a, f, st)
		}
	}
	// The processes watched are those found when the listeners were as they are: once other sockets
	// hold the address (a replacement bound beside, or the process found closed its sockets and
	// lives on), they are found again, else the standby could go on watching a process that holds
	// nothing while the cache's exit goes unseen. Not while sockets caught at an exit wait to be
	// served: that exit is told by this watch.
	key := s.listenerKey(ls)
	if s.watch != nil && key != s.watchKey && len(s.caughtAddrs()) == 0 {
		s.log().Debug("the listeners on the cache addresses changed; finding their processes again", "pids", s.watch.PIDs)
		s.watch.Close()
		s.watch = nil
	}
	// Watch the cache while it listens.
	if len(others) > 0 && s.watch == nil {
		var pids []int
		s.lastCache = s.findCache()
		if c := s.lastCache; c != nil {
			if dns := ClusterDNSFromCorefile(c.Forwards, s.clusterDomain()); len(dns) > 0 && !slices.Equal(dns, s.status.CorefileClusterDNS) {
				s.mu.Lock()
				s.status.CorefileClusterDNS = dns
				s.mu.Unlock()
				s.refresh()
			}
			pids = c.PIDs
		}
		// Else no process known to hold the listener (FindCache: its holder, or where the kernel
		// hides that, a cache process of the socket's owner in the socket's namespace): nothing is
		// watched, and the listeners are looked at again every second. A process is never watched
		// for its name alone: anyone can start one called coredns, and each of its exits would wake
		// the standby.
		if len(pids) > 0 {
			// The process holding the listeners is known: the moment it exits, its sockets are
			// gone, and the standby binds in that goroutine, before pods' queries meet a closed port
			// (a crash loop's losses were there: the run loop woke and bound about 1 ms later).
			var onExit, onThread func()
			var ready []armed
			// Sockets bound at the process's exit take every query left in the group: only when
			// the one process watched holds the listeners (or, hidden, is the only one that may).
			// Sockets bound at a thread's exit keep every query on the group's first socket while
			// it is open, which is the cache's: with the others' sockets on each address one per
			// protocol (alone), any of the likely holders may be watched for that, since whichever
			// of them dies, the socket it closes, if any, is the cache's.
			c := s.lastCache
			one := c != nil && len(pids) == 1 && pids[0] == c.PID
			if (one || c != nil && c.Likely && alone(others, hs)) && s.targets.Usable() && !otherUser {
				// Every address it serves: one the standby still covers (it is giving back) is
				// skipped at the exit, when the standby's own sockets are there.
				var catch []netip.Addr
				for a := range others {
					catch = append(catch, a)
				}
				ready = arm(catch)
			}
			var once *catchOnce
			if ready != nil {
				once = &catchOnce{as: ready}
				port := s.Port
				onThread = func() { s.catch(once, port, true) }
				if one {
					onExit = func() { s.catch(once, port, false) }
				}
			}
			if w, err := watchExit(onExit, onThread, pids...); err == nil {
				w.armed = once
				s.watch, s.watchKey = w, key
				s.log().Debug("watching the node-local cache's processes", "pids", w.PIDs, "listeners", key, "armed", ready != nil)
			} else {
				disarm(ready)
				s.log().Warn("cannot watch the node-local cache for exit; checking every second", "pids", pids, "err", err)
			}
		}
	}
	// Remember node-cache's footprint while it serves, and hand over what was put back once it
	// serves every address again.
	if len(others) > 0 {
		s.observe(others, hung)
	}
	// Stand in on every address nobody serves: no listener, only a leaving cache's, or a hung one;
	// and beside a cache that bound before its predecessor's exit was told, where sockets were
	// caught for that exit: their program sends every query to the group's first socket, which,
	// the dead cache's sockets gone, may be theirs. Served, they answer what they hold and what
	// comes until the new cache answers; then the address is given back as from a hung cache.
	// (Kept unserved, they held queries nobody read, and a later catch on the address lost them,
	// still bound, to the listeners the standby takes for a cache's.)
	atExit, caughtOn := !exitAt.IsZero(), s.caughtAddrs()
	var why []string
	if otherUser {
		why = append(why, s.otherUserWhy())
	}
	for _, a := range s.Addrs {
		if f := s.fwd[a]; f != nil {
			if st := s.steers[a]; st != nil && st.ok {
				st.steer(hs[a], s.log()) // the group changed: find the standby's place again
			}
			continue
		}
		if otherUser || others[a] && !hung[a] && !(atExit && caughtOn[a]) {
			continue
		}
		if !isLocal(a) {
			why = append(why, fmt.Sprintf("%s is on no local interface (the cache's interface is gone)", a))
			continue
		}
		s.mu.Lock()
		t := s.targets
		s.mu.Unlock()
		if !t.Usable() {
			why = append(why, "nowhere to forward that is not a loop: "+t.Describe())
			continue
		}
		st := s.newSteering(a)
		f := &Forwarder{Targets: t, Port: s.Port, Wrap: st.wrap, Bound: s.takeCaught}
		if s.Metrics != nil {
			f.OnQuery = s.Metrics.StandbyQuery
		}
		if err := f.Start([]netip.Addr{a}); err != nil {
			why = append(why, err.Error())
			continue
		}
		// Take every new query at once (the kernel would spread them over a hung or leaving
		// cache's sockets and the standby's); the sizes are the groups' once the standby joined.
		h := *hs[a]
		h.udpSize++
		h.tcpSize++
		st.steer(&h, s.log())
		s.steers[a] = st
		delay := time.Duration(0)
		if !exitAt.IsZero() {
			delay = time.Since(exitAt)
		}
		s.mu.Lock()
		first := len(s.fwd) == 0
		s.fwd[a] = f
		if first {
			s.status.Takeovers++
			s.status.LastTakeoverDelay = delay
			s.status.Since = time.Now()
			s.status.Queries = 0
		}
		s.mu.Unlock()
		if first && s.Metrics != nil {
			s.Metrics.StandbyTakeover(delay)
		}
		switch {
		case others[a] && !hung[a]:
			s.log().Warn("the node-local cache exited and another listens already; standby answers beside it until it answers", "addr", a, "delay", delay, "targets", t.Describe(), "steering", st.describe())
		case others[a]:
			s.log().Warn("the node-local cache holds its listeners but answers nothing; standby answers beside it", "addr", a, "hung for", s.HungAfter, "targets", t.Describe(), "steering", st.describe())
		default:
			s.log().Warn("no node-local cache listens; standby answers in its place", "addr", a, "delay", delay, "targets", t.Describe(), "steering", st.describe())
		}
	}
	serving := map[netip.Addr]bool{}
	for a := range others {
		serving[a] = !hung[a]
	}
	s.dropCaught(serving, atExit)
	s.mu.Lock()
	if len(why) == 0 && len(s.fwd) == 0 && !s.targets.Usable() {
		// Ready only when it could stand in: say now that it could not.
		why = append(why, "nowhere to forward that is not a loop: "+s.targets.Describe())
	}
	prev := s.status.State
	switch {
	case len(s.fwd) > 0:
		s.status.State = Active
		if s.status.CacheUID == nil {
			// Standing in for a cache whose user is not known (not seen listening since nodedns
			// first ran here): root's, as node-local-dns runs, binds beside the standby; another
			// user's could not (docs/contract.md "Standby").
			why = append(why, fmt.Sprintf("the node-local cache has not been seen listening, so its user is not known: a cache run as another user than nodedns's (uid %d) cannot bind while nodedns stands in", s.status.UID))
		}
		s.status.Why = strings.Join(why, "; ")
	case len(why) > 0:
		s.status.State = Unknown
		s.status.Why = strings.Join(why, "; ")
	default:
		s.status.State = Ready
		s.status.Why = ""
	}
	s.status.Covering = s.status.Covering[:0]
	s.status.Hung = s.status.Hung[:0]
	var steering []string
	for _, a := range s.Addrs {
		if s.fwd[a] != nil {
			s.status.Covering = append(s.status.Covering, a)
			if hung[a] {
				s.status.Hung = append(s.status.Hung, a)
			}
			if st := s.steers[a]; st != nil {
				steering = append(steering, a.String()+": "+st.describe())
			}
		}
	}
	s.status.Steering = strings.Join(steering, "; ")
	if s.fpOK {
		s.status.Footprint = s.fp.Describe()
	}
	changed := prev != s.status.State
	if changed && prev != Active && s.status.State != Active {
		s.status.Since = time.Now()
	}
	s.mu.Unlock()
	if changed && s.Metrics != nil {
		s.Metrics.StandbyActive(s.status.State == Active)
	}
	if changed || uidSeen || time.Since(s.lastSave) >= 2*time.Second && s.status.State == Active {
		s.save()
	}
}

// noteCacheUID remembers the user of the others' sockets on the cache addresses (one that is not
// the standby's, if any is) and reports whether the cache, as last seen, is another user's, and
// whether that is news.
func (s *Standby) noteCacheUID(uids []uint32) (other, news bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(uids) > 0 {
		u := uids[0]
		for _, x := range uids {
			if x != s.status.UID {
				u = x
			}
		}
		if s.status.CacheUID == nil || *s.status.CacheUID != u {
			s.log().Info("the node-local cache's listeners belong to uid", "uid", u, "standby uid", s.status.UID)
			s.status.CacheUID = &u
			news = true
		}
	}
	return s.status.OtherUser(), news
}

// otherUserWhy says why the standby does not stand in for a cache of another user.
func (s *Standby) otherUserWhy() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("the node-local cache's listeners belong to uid %d, not nodedns's (uid %d): the kernel lets a socket join a SO_REUSEPORT group only when the same user made both, so with nodedns on the address the cache could not bind it again; nodedns does not stand in", *s.status.CacheUID, s.status.UID)
}

// listenerKey names the sockets others hold on the cache addresses: the standby's own, those caught
// at an exit and a leaving cache's left out.
func (s *Standby) listenerKey(ls []Listener) string {
	caught := s.caughtInodes()
	var inodes []uint64
	for _, l := range ls {
		if f := s.fwd[l.Addr]; caught[l.Inode] || f != nil && f.Own(l.Inode) {
			continue
		}
		if _, ok := s.leaving[l.Inode]; !ok {
			inodes = append(inodes, l.Inode)
		}
	}
	slices.Sort(inodes)
	return fmt.Sprint(inodes)
}

// listenersMoved reports whether the sockets others hold on the cache addresses are no longer those
// the watched processes were found for (or cannot be listed).
func (s *Standby) listenersMoved() bool {
	ls, err := Listeners(s.Addrs)
	return err != nil || s.listenerKey(ls) != s.watchKey
}

// alone reports whether, on every address others serve, the group holds one UDP socket and at most
// one listening TCP socket besides the standby's, and none of a cache whose teardown ran: one
// process's (CoreDNS binds one of each per address and port).
func alone(others map[netip.Addr]bool, hs map[netip.Addr]*held) bool {
	for a := range others {
		if h := hs[a]; len(h.udp) != 1 || len(h.tcp) > 1 || h.leaving {
			return false
		}
	}
	return true
}

// stopForwarder closes the standby's sockets on a.
func (s *Standby) stopForwarder(a netip.Addr, f *Forwarder, msg string) {
	if st := s.steers[a]; st != nil {
		st.detach(s.log())
		delete(s.steers, a)
	}
	f.Stop()
	s.mu.Lock()
	s.status.Queries += f.Queries()
	delete(s.fwd, a)
	s.mu.Unlock()
	s.log().Info(msg, "addr", a, "queries", f.Queries())
}

// handBack gives the address back to a cache that answers: every new query and connection goes to
// the cache's socket, what the standby's socket already holds is answered, then the program goes
// and the standby's sockets close.
func (s *Standby) handBack(a netip.Addr, f *Forwarder, st *steering) {
	start := time.Now()
	if err := st.toCache(); err != nil {
		s.log().Warn("cannot steer the group to the cache; closing at once", "addr", a, "err", err)
	}
	st.udp.drain(250 * time.Millisecond)
	s.stopForwarder(a, f, "the node-local cache answers again; standby gave the address back")
	s.log().Debug("hand back done", "addr", a, "took", time.Since(start))
}

func (s *Standby) setUnknown(why string) {
	s.mu.Lock()
	s.status.State, s.status.Why = Unknown, why
	s.mu.Unlock()
	s.save()
}

func (s *Standby) findCache() *Cache {
	if s.FindCache == nil {
		return nil
	}
	return s.FindCache(s.Addrs)
}

func (s *Standby) clusterDomain() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.targets.Zones) == 0 {
		return ""
	}
	return s.targets.Zones[0] // Choose puts the cluster domain first
}

func (s *Standby) save() {
	s.lastSave = time.Now()
	if s.SaveState == nil {
		return
	}
	st := s.Status()
	st.Updated = time.Now()
	data, err := json.MarshalIndent(st, "", "  ")
	if err == nil {
		err = s.SaveState(append(data, '\n'))
	}
	if err != nil {
		s.log().Warn("cannot record the standby's state for nodedns check", "err", err)
	}
}

func (s *Standby) shutdown() {
	if s.watch != nil {
		s.watch.Close()
		s.watch = nil
	}
	for a, f := range s.fwd {
		if st := s.steers[a]; st != nil {
			st.detach(s.log())
		}
		f.Stop()
		s.mu.Lock()
		delete(s.fwd, a)
		s.mu.Unlock()
	}
	s.dropCaught(nil, true)
	if s.SaveState != nil {
		s.mu.Lock()
		s.status.State, s.status.Why, s.status.Covering = Unknown, "nodedns is not running", nil
		s.mu.Unlock()
		s.save()
	}
}

// NotInterfaceMode records that the standby cannot run on this node (the cache has no interface of
// its own: mode says how that was decided).
func (s *Standby) NotInterfaceMode(mode string) {
	s.status = Status{PID: 0, State: Unknown, Since: time.Now(), Why: "the node-local cache does not run on an interface of its own (" + mode + "): no address to hold"}
	s.save()
}

// isLocal reports whether a is an address of a local interface.
func isLocal(a netip.Addr) bool {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, ia := range as {
		if n, ok := ia.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap() == a {
				return true
			}
		}
	}
	return false
}

func appendNew(list []netip.Addr, as ...netip.Addr) []netip.Addr {
	for _, a := range as {
		if !slices.Contains(list, a) {
			list = append(list, a)
		}
	}
	return list
}
