package nstest

import (
	"math"
	"testing"
	"time"
)

// TestResolverWindow checks what a window of lookups sums up to: only the lookups asked in
// [from, to) count; the longest gap runs from the window's start to the first answer, between
// answers (by the time each ended, whatever order they were asked in), and from the last answer
// to the window's end, an answer ending after the window counting as at its end.
func TestResolverWindow(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ok := func(start, end int, tcp bool) Lookup {
		return Lookup{Start: at(start), End: at(end), OK: true, TCP: tcp}
	}
	failed := func(start, end int) Lookup { return Lookup{Start: at(start), End: at(end), Err: "timeout"} }
	for _, tc := range []struct {
		name                 string
		lookups              []Lookup
		from, to             int
		asked, answered, tcp int
		gap                  int
	}{
		{name: "none asked", from: 0, to: 1000, gap: 1000},
		{
			name:    "all answered",
			lookups: []Lookup{ok(0, 5, true), ok(10, 12, false), ok(20, 21, false)},
			from:    0, to: 30,
			asked: 3, answered: 3, tcp: 1, gap: 9, // 21 to the window's end at 30
		},
		{
			name: "an outage in the middle",
			lookups: []Lookup{ok(0, 1, false), ok(10, 11, false), failed(20, 520), failed(30, 530),
				ok(600, 602, false), ok(610, 611, false)},
			from: 0, to: 700,
			asked: 6, answered: 4, gap: 591, // 11 to 602
		},
		{
			name:    "outside the window, and an answer after it",
			lookups: []Lookup{ok(-50, 1, false), ok(100, 120, false), ok(990, 1400, false), ok(1000, 1001, false)},
			from:    0, to: 1000,
			asked: 2, answered: 2, gap: 880, // 120 to the answer to 990, counted at the window's end (1000)
		},
		{
			name:    "answers out of order",
			lookups: []Lookup{ok(0, 400, false), ok(10, 20, false), ok(300, 310, false)},
			from:    0, to: 400,
			asked: 3, answered: 3, gap: 290, // 20 to 310
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Resolver{lookups: tc.lookups}
			w := r.Window(at(tc.from), at(tc.to))
			if w.Asked != tc.asked || w.Answered != tc.answered || w.TCP != tc.tcp || w.LongestGap != time.Duration(tc.gap)*time.Millisecond {
				t.Errorf("Window = %s (tcp %d); want %d asked, %d answered, %d over TCP, longest gap %dms", w, w.TCP, tc.asked, tc.answered, tc.tcp, tc.gap)
			}
			if len(w.Failed) != tc.asked-tc.answered {
				t.Errorf("%d failed lookups listed, want %d", len(w.Failed), tc.asked-tc.answered)
			}
			if want := float64(tc.asked) / (float64(tc.to-tc.from) / 1000); w.Rate != want {
				t.Errorf("rate %v, want %v", w.Rate, want)
			}
		})
	}
}

// TestGapAllowed: 200 ms on a quiet machine (a control's usual gap of up to 50 ms adds nothing);
// what a stalled machine cost the control beyond that is added.
func TestGapAllowed(t *testing.T) {
	for control, want := range map[time.Duration]time.Duration{
		0:                      200 * time.Millisecond,
		20 * time.Millisecond:  200 * time.Millisecond,
		50 * time.Millisecond:  200 * time.Millisecond,
		350 * time.Millisecond: 500 * time.Millisecond,
	} {
		if got := GapAllowed(Window{LongestGap: control}); got != want {
			t.Errorf("GapAllowed(control gap %v) = %v, want %v", control, got, want)
		}
	}
}

// TestShareAllowed: the promise itself where the control answered everything (or asked nothing);
// what the machine's load cost the control comes off it.
func TestShareAllowed(t *testing.T) {
	for _, tc := range []struct {
		control Window
		want    float64
	}{
		{Window{}, 0.999},
		{Window{Asked: 3000, Answered: 3000}, 0.999},
		{Window{Asked: 3000, Answered: 2997}, 0.998},
	} {
		if got := ShareAllowed(0.999, tc.control); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("ShareAllowed(0.999, %d of %d answered) = %v, want %v", tc.control.Answered, tc.control.Asked, got, tc.want)
		}
	}
}
