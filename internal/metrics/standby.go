package metrics

import (
	"sort"
	"strconv"
	"time"

	"github.com/miekg/dns"
)

// standbyState is what the daemon's standby reports (docs/contract.md "Standby"); enabled once the
// daemon runs one, so a node without it exports no standby series.
type standbyState struct {
	enabled   bool
	active    bool
	queries   map[string]uint64 // by rcode name
	takeovers uint64
	lastDelay time.Duration
	delaySum  time.Duration
}

// StandbyEnabled says the daemon runs the standby: its series are exported from now on.
func (r *Recorder) StandbyEnabled() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sb.enabled = true
	if r.sb.queries == nil {
		r.sb.queries = map[string]uint64{}
	}
}

// StandbyActive records whether the standby answers on a cache address now.
func (r *Recorder) StandbyActive(active bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sb.active = active
}

// StandbyQuery counts one query the standby answered, by its rcode.
func (r *Recorder) StandbyQuery(rcode int) {
	name, ok := dns.RcodeToString[rcode]
	if !ok {
		name = strconv.Itoa(rcode)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sb.queries == nil {
		r.sb.queries = map[string]uint64{}
	}
	r.sb.queries[name]++
}

// StandbyTakeover counts one stand-in and the time from the cache's exit to the standby's sockets
// being bound (0 when it was not started by an exit event).
func (r *Recorder) StandbyTakeover(delay time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sb.takeovers++
	r.sb.lastDelay = delay
	r.sb.delaySum += delay
}

// standbyFamilies are the standby's series; the caller holds r.mu.
func (r *Recorder) standbyFamilies() []Family {
	if !r.sb.enabled {
		return nil
	}
	active := 0.0
	if r.sb.active {
		active = 1
	}
	q := Family{Name: "nodedns_standby_queries_total", Type: "counter", Help: "Queries the standby answered in the cache's place, by rcode."}
	names := make([]string, 0, len(r.sb.queries))
	for n := range r.sb.queries {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		q.Samples = append(q.Samples, Sample{Labels: [][2]string{{"rcode", n}}, Value: float64(r.sb.queries[n])})
	}
	return []Family{
		{Name: "nodedns_standby_active", Type: "gauge", Help: "1 while nodedns answers on a cache address in the cache's place.", Samples: []Sample{{Value: active}}},
		q,
		{Name: "nodedns_standby_takeovers_total", Type: "counter", Help: "Times the standby stood in for the cache.", Samples: []Sample{{Value: float64(r.sb.takeovers)}}},
		{Name: "nodedns_standby_takeover_delay_seconds", Type: "gauge", Help: "Time from the cache's exit to the standby answering, at the last takeover.", Samples: []Sample{{Value: r.sb.lastDelay.Seconds()}}},
		{Name: "nodedns_standby_takeover_delay_seconds_total", Type: "counter", Help: "Sum of the takeover delays (with nodedns_standby_takeovers_total: the mean).", Samples: []Sample{{Value: r.sb.delaySum.Seconds()}}},
	}
}
