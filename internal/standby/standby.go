package standby

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

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

	mu       sync.Mutex
	status   Status
	fwd      map[netip.Addr]*Forwarder
	watch    *exitWatch
	targets  Targets
	lastSave time.Time
}

// Metrics receives the standby's events.
type Metrics interface {
	StandbyActive(active bool)
	StandbyQuery(rcode int)
	StandbyTakeover(delay time.Duration)
}

// Status is what the standby says about itself, kept in the state file for `nodedns check`.
type Status = statefile.Status

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
	s.fwd = map[netip.Addr]*Forwarder{}
	s.status.PID = pid
	if s.LoadState != nil {
		if data, err := s.LoadState(); err == nil {
			if old, err := ParseStatus("standby state", data); err == nil {
				s.status.CorefileClusterDNS = old.CorefileClusterDNS
			}
		}
	}
	defer s.shutdown()
	resync := time.NewTicker(s.Resync)
	defer resync.Stop()
	s.refresh()
	s.check(time.Time{})
	for {
		var exited <-chan struct{}
		if s.watch != nil {
			exited = s.watch.Exited
		}
		var recheck <-chan time.Time
		switch {
		case len(s.fwd) > 0:
			recheck = time.After(s.Recheck)
		case s.watch == nil:
			// Nothing to wait on (no cache process found, or the address is gone): once a second.
			recheck = time.After(time.Second)
		}
		select {
		case <-ctx.Done():
			return
		case <-exited:
			at := time.Now()
			s.log().Info("a node-local cache process exited; checking its address", "pids", s.watch.PIDs)
			s.watch.Close()
			s.watch = nil
			s.check(at)
		case <-recheck:
			s.check(time.Time{})
		case <-resync.C:
			s.refresh()
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

// check looks at the listeners on the cache addresses and stands in or gives back. exitAt is when
// the cache was seen to exit (zero: not from an exit event).
func (s *Standby) check(exitAt time.Time) {
	ls, err := Listeners(s.Addrs)
	if err != nil {
		s.setUnknown("cannot list the sockets on the cache addresses: " + err.Error())
		return
	}
	// Another listener holds an address when it has both its UDP socket and its listening TCP one:
	// giving back on UDP alone would leave TCP queries unanswered while the cache starts.
	udp, tcp := map[netip.Addr]bool{}, map[netip.Addr]bool{}
	for _, l := range ls {
		if f := s.fwd[l.Addr]; f != nil && f.Own(l.Inode) {
			continue
		}
		if l.Proto == "udp" {
			udp[l.Addr] = true
		} else {
			tcp[l.Addr] = true
		}
	}
	others := map[netip.Addr]bool{}
	for a := range udp {
		if tcp[a] || s.fwd[a] == nil {
			others[a] = true
		}
	}
	// Give back every address the cache (or anything else) listens on again.
	for a, f := range s.fwd {
		if others[a] {
			f.Stop()
			s.mu.Lock()
			s.status.Queries += f.Queries()
			delete(s.fwd, a)
			s.mu.Unlock()
			s.log().Info("the node-local cache listens again; standby closed its sockets", "addr", a, "queries", f.Queries())
		}
	}
	// Watch the cache while it listens.
	if len(others) > 0 && s.watch == nil {
		var pids []int
		if c := s.findCache(); c != nil {
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
			if w, err := watchExit(pids...); err == nil {
				s.watch = w
			} else {
				s.log().Warn("cannot watch the node-local cache for exit; checking every second", "pids", pids, "err", err)
			}
		}
	}
	// Stand in on every address nobody listens on.
	var why []string
	for _, a := range s.Addrs {
		if others[a] || s.fwd[a] != nil {
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
		f := &Forwarder{Targets: t, Port: s.Port}
		if s.Metrics != nil {
			f.OnQuery = s.Metrics.StandbyQuery
		}
		if err := f.Start([]netip.Addr{a}); err != nil {
			why = append(why, err.Error())
			continue
		}
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
		s.log().Warn("no node-local cache listens; standby answers in its place", "addr", a, "delay", delay, "targets", t.Describe())
	}
	s.mu.Lock()
	if len(why) == 0 && len(s.fwd) == 0 && !s.targets.Usable() {
		// Ready only when it could stand in: say now that it could not.
		why = append(why, "nowhere to forward that is not a loop: "+s.targets.Describe())
	}
	prev := s.status.State
	switch {
	case len(s.fwd) > 0:
		s.status.State = Active
		s.status.Why = strings.Join(why, "; ")
	case len(why) > 0:
		s.status.State = Unknown
		s.status.Why = strings.Join(why, "; ")
	default:
		s.status.State = Ready
		s.status.Why = ""
	}
	s.status.Covering = s.status.Covering[:0]
	for _, a := range s.Addrs {
		if s.fwd[a] != nil {
			s.status.Covering = append(s.status.Covering, a)
		}
	}
	changed := prev != s.status.State
	if changed && prev != Active && s.status.State != Active {
		s.status.Since = time.Now()
	}
	s.mu.Unlock()
	if changed && s.Metrics != nil {
		s.Metrics.StandbyActive(s.status.State == Active)
	}
	if changed || time.Since(s.lastSave) >= 2*time.Second && s.status.State == Active {
		s.save()
	}
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
		f.Stop()
		delete(s.fwd, a)
	}
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
