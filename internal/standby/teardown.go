package standby

// teardown.go: node-cache's footprint remembered while it serves and put back when its teardown
// removes it (docs/contract.md "Standby", "node-cache's teardown"), through cachenet.

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/nodedns/nodedns/internal/cachenet"
)

// rulesWithin is how long after its interface is first seen node-cache's rules are looked for every
// few seconds: its first sync tick comes 60 s after it starts (cache_app.go runPeriodic, the default
// -syncinterval).
const rulesWithin = 3 * time.Minute

// leaveGrace is how long a cache whose interface went counts as leaving while it keeps running.
const leaveGrace = 10 * time.Second

// observe reads node-cache's footprint (its interface and the cache addresses on it each time,
// its rules until found and then at each resync), and, once a cache serves every address the
// standby put back, hands what it put back over to it.
func (s *Standby) observe(others, hung map[netip.Addr]bool) {
	if s.Interface == "" {
		return
	}
	if link, as, err := cachenet.ReadLink(s.Interface, s.Addrs); err == nil && len(as) > 0 {
		if s.fp.Link.Index != link.Index {
			s.fp.RulesRead = time.Time{} // another interface: its cache's rules may differ
			s.fpSeen = time.Now()
		}
		s.fp.Link, s.fp.Addrs, s.fpOK = link, as, true
	}
	if s.fpOK && s.fp.RulesRead.IsZero() {
		rules, err := cachenet.ReadRules(s.ctx, s.Addrs)
		if err != nil {
			s.log().Warn("cannot read node-cache's rules", "err", err)
		}
		if len(rules) > 0 {
			s.fp.Rules, s.fp.RulesRead = rules, time.Now()
			s.log().Debug("node-cache's footprint", "footprint", s.fp.Describe())
		}
	}
	if len(s.made) == 0 {
		return
	}
	for _, m := range s.made {
		for _, a := range m.Addrs {
			if !others[a.Prefix.Addr()] || hung[a.Prefix.Addr()] || s.fwd[a.Prefix.Addr()] != nil {
				return
			}
		}
	}
	s.made = nil
	s.saveRecord()
	s.mu.Lock()
	if s.status.PutBack != nil {
		s.status.PutBack.Adopted = time.Now()
	}
	s.mu.Unlock()
	s.log().Info("the node-local cache took over what the standby put back: its interface and rules are node-cache's again")
	s.save()
}

// gone reacts to the cache's interface or an address going: while kubelet still hands the address
// to pods, put back what node-cache had, mark the cache's sockets as leaving (its teardown runs on
// its way out), and stand in.
func (s *Standby) gone(e netEvent) {
	if s.fpOK {
		// Only what is missing now counts: a deletion already put back is old news.
		link, as, err := cachenet.ReadLink(s.fp.Link.Name, s.Addrs)
		if err == nil && len(as) == len(s.fp.Addrs) && link.Index != 0 {
			s.check(e.at)
			return
		}
	}
	pb := &PutBack{At: e.at, Gone: e.what}
	defer func() {
		s.mu.Lock()
		s.status.PutBack = pb
		s.mu.Unlock()
		s.save()
	}()
	if !s.fpOK {
		pb.Why = "the standby never saw node-cache's interface with a cache address on it: nothing to put back"
		s.log().Warn("the cache's interface or address went, and the standby never saw it", "what", e.what)
		s.check(e.at)
		return
	}
	handed, err := s.HandsOut()
	var want, not []netip.Addr
	for _, a := range s.fp.Addrs {
		if err == nil && slices.Contains(handed, a.Prefix.Addr()) {
			want = append(want, a.Prefix.Addr())
		} else {
			not = append(not, a.Prefix.Addr())
		}
	}
	if len(want) == 0 {
		if err != nil {
			pb.Why = "kubelet's clusterDNS cannot be read (" + err.Error() + "): nothing put back"
		} else {
			pb.Why = fmt.Sprintf("kubelet hands out %s, not %s: node-local-dns was removed on purpose; nothing put back", addrs(handed), addrs(not))
		}
		s.log().Info("the cache's interface or address went; not put back", "what", e.what, "why", pb.Why)
		s.check(e.at)
		return
	}
	// The cache's sockets now are those of the process whose teardown ran.
	if ls, err := Listeners(s.Addrs); err == nil {
		for _, l := range ls {
			if f := s.fwd[l.Addr]; f == nil || !f.Own(l.Inode) {
				s.leaving[l.Inode] = e.at
			}
		}
	}
	m, err := cachenet.PutBack(s.ctx, s.fp, want)
	took := time.Since(e.at)
	if !m.Empty() {
		m.Why = e.what
		s.made = append(s.made, m)
		s.saveRecord()
	}
	pb.What, pb.Took = m.Describe(), took
	if err != nil {
		pb.Why = "put back in part: " + err.Error()
		s.log().Warn("could not put back all of node-cache's footprint", "err", err)
	}
	if len(not) > 0 {
		pb.Why = strings.TrimPrefix(pb.Why+fmt.Sprintf("; %s not put back: kubelet no longer hands it out", addrs(not)), "; ")
	}
	s.log().Warn("node-cache's interface or address went while kubelet hands it out; put back", "what", e.what, "put back", pb.What, "in", took)
	s.check(e.at)
}

func (s *Standby) loadRecord() {
	if s.LoadRecord == nil {
		return
	}
	data, err := s.LoadRecord()
	if err != nil {
		return
	}
	ms, err := cachenet.ParseRecord(cachenet.RecordPath, data)
	if err != nil {
		s.log().Warn("cannot read the record of what the standby put back", "err", err)
		return
	}
	s.made = ms
}

func (s *Standby) saveRecord() {
	if s.SaveRecord == nil {
		return
	}
	var data []byte
	if len(s.made) > 0 {
		var err error
		if data, err = cachenet.MarshalRecord(s.made); err != nil {
			s.log().Warn("cannot record what the standby put back", "err", err)
			return
		}
	}
	if err := s.SaveRecord(data); err != nil {
		s.log().Warn("cannot record what the standby put back", "err", err)
	}
}
