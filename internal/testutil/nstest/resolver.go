package nstest

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/vishvananda/netns"
)

// Question is a name a Resolver asks (an A query) and the address its answer must carry.
type Question struct{ Name, Addr string }

// Lookup is one of a Resolver's lookups: when it was asked, when it ended, whether the right answer
// came.
type Lookup struct {
	Start, End time.Time
	OK         bool
	TCP        bool
	Name       string
	Err        string // the last try's error, for a failed lookup
}

// Resolver asks a DNS server from inside a pod's network namespace, continuously, as the pods of a
// node do: a lookup every 10 ms (100 a second), its questions by turns, every fifth over TCP, each
// lookup two tries of 250 ms (a client with glibc's retry, only quicker). Window sums up what a span
// of time cost it.
type Resolver struct {
	server    string
	questions []Question
	mu        sync.Mutex
	lookups   []Lookup
	stop      chan struct{}
	done      sync.WaitGroup
}

// StartResolver starts a Resolver in pod asking server (port 53) the questions by turns; it stops
// when the test ends (or at Stop).
func StartResolver(t testing.TB, pod *Pod, server string, questions ...Question) *Resolver {
	t.Helper()
	if len(questions) == 0 {
		t.Fatal("StartResolver: no question to ask")
	}
	ns, err := netns.GetFromPid(pod.PID)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	r := &Resolver{stop: make(chan struct{}), server: server, questions: questions}
	jobs := make(chan int, 1000)
	// Enough workers that lookups timing out (two tries of 250 ms) still go out 100 a second.
	const workers = 64
	ready := make(chan error, workers)
	for range workers {
		r.done.Go(func() {
			// The goroutine's thread joins the pod's network namespace for good: it is never unlocked,
			// so the thread ends with the goroutine and no other goroutine runs in the pod's namespace.
			runtime.LockOSThread()
			if err := netns.Set(ns); err != nil {
				ready <- err
				return
			}
			ready <- nil
			for i := range jobs {
				r.record(r.ask(i))
			}
		})
	}
	for range workers {
		if err := <-ready; err != nil {
			t.Fatal(err)
		}
	}
	go func() {
		defer close(jobs)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-r.stop:
				return
			case <-tick.C:
				select {
				case jobs <- i:
				default: // every worker busy and the queue full: the lookup is lost
					r.record(Lookup{Start: time.Now(), End: time.Now(), Name: "(not sent)"})
				}
			}
		}
	}()
	t.Cleanup(r.Stop)
	return r
}

func (r *Resolver) ask(i int) Lookup {
	q := r.questions[i%len(r.questions)]
	l := Lookup{Start: time.Now(), Name: q.Name, TCP: i%5 == 0}
	c := &dns.Client{Net: "udp", Timeout: 250 * time.Millisecond}
	if l.TCP {
		c.Net = "tcp"
	}
	m := new(dns.Msg)
	m.SetQuestion(q.Name, dns.TypeA)
	for try := 0; try < 2 && !l.OK; try++ {
		resp, _, err := c.Exchange(m, r.server+":53")
		if err != nil {
			l.Err = err.Error()
		} else if resp.Rcode != dns.RcodeSuccess {
			l.Err = dns.RcodeToString[resp.Rcode]
		}
		if err == nil && resp.Rcode == dns.RcodeSuccess && len(resp.Answer) > 0 {
			if a, ok := resp.Answer[0].(*dns.A); ok && a.A.String() == q.Addr {
				l.OK = true
			}
		}
	}
	l.End = time.Now()
	return l
}

func (r *Resolver) record(l Lookup) {
	r.mu.Lock()
	r.lookups = append(r.lookups, l)
	r.mu.Unlock()
}

// Stop ends the lookups and waits for the ones in flight.
func (r *Resolver) Stop() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	r.done.Wait()
}

// Window is what the lookups asked in a span of time came to: how many, how many answered, the
// rate, and the longest time without an answer (from the span's start, between answers, to its end).
type Window struct {
	Asked, Answered, TCP int
	Rate                 float64
	LongestGap           time.Duration
	Failed               []Lookup
}

// Window sums up the lookups asked in [from, to).
func (r *Resolver) Window(from, to time.Time) Window {
	r.mu.Lock()
	ls := slices.Clone(r.lookups)
	r.mu.Unlock()
	var w Window
	var answers []time.Time
	for _, l := range ls {
		if l.Start.Before(from) || !l.Start.Before(to) {
			continue
		}
		w.Asked++
		if l.TCP {
			w.TCP++
		}
		if l.OK {
			w.Answered++
			answers = append(answers, l.End)
		} else {
			w.Failed = append(w.Failed, l)
		}
	}
	w.Rate = float64(w.Asked) / to.Sub(from).Seconds()
	slices.SortFunc(answers, func(a, b time.Time) int { return a.Compare(b) })
	prev := from
	for _, a := range answers {
		if a.After(to) {
			a = to
		}
		if g := a.Sub(prev); g > w.LongestGap {
			w.LongestGap = g
		}
		if a.After(prev) {
			prev = a
		}
	}
	if g := to.Sub(prev); g > w.LongestGap {
		w.LongestGap = g
	}
	return w
}

func (w Window) String() string {
	return fmt.Sprintf("%d lookups (%d over TCP, %.0f/s), %d answered (%.2f%%), longest gap without an answer %v",
		w.Asked, w.TCP, w.Rate, w.Answered, 100*w.AnsweredShare(), w.LongestGap.Round(time.Millisecond))
}

// AnsweredShare is the share of the lookups answered (0 when none was asked).
func (w Window) AnsweredShare() float64 {
	if w.Asked == 0 {
		return 0
	}
	return float64(w.Answered) / float64(w.Asked)
}

// GapAllowed is the longest gap the standby may leave pods over a window (docs/contract.md
// "Standby"): 200 ms, plus what the machine's load alone cost a control Resolver (in the same pod,
// asking a server nothing under test touches) beyond its usual gap (about two lookups' spacing and
// an answer's time) over the same window. On a quiet machine that is 200 ms; with two busy loops on
// this 2-core machine the control's longest gap was 15 to 20 ms, so the allowance grows only when
// the machine stalls the test itself.
func GapAllowed(control Window) time.Duration {
	return 200*time.Millisecond + max(0, control.LongestGap-50*time.Millisecond)
}

// ShareAllowed is the least share of a window's lookups that must be answered where the standby
// promises want (docs/contract.md "Standby"): want, less the share a control Resolver (in the same pod, asking a
// server nothing under test touches) failed over the same window, which only the machine's load
// (lookups not sent, or not answered within their two tries) can cost it. On a quiet machine the
// control answers every lookup and ShareAllowed is want.
func ShareAllowed(want float64, control Window) float64 {
	if control.Asked == 0 {
		return want
	}
	return want - (1 - control.AnsweredShare())
}
