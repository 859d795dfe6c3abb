package edges

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodedns/nodedns/systemd/bus"
)

// TestResolvedNotice: which client events make the daemon re-read and re-apply.
func TestResolvedNotice(t *testing.T) {
	tests := []struct {
		name string
		e    bus.Event
		want string
	}{
		{"resolved restarted", bus.Event{Kind: bus.EventResolvedStarted, Owner: ":1.7"}, "systemd-resolved started (NameOwnerChanged)"},
		{"bus back", bus.Event{Kind: bus.EventBusReconnected}, "system bus reconnected"},
		{"global DNS changed", bus.Event{Kind: bus.EventPropertiesChanged, Properties: []string{"CurrentDNSServer", "DNS"}}, "systemd-resolved PropertiesChanged DNS"},
		{"undecodable properties", bus.Event{Kind: bus.EventPropertiesChanged}, "systemd-resolved PropertiesChanged"},
		// resolved switching between servers it already has: nothing nodedns reads changes.
		{"current server only", bus.Event{Kind: bus.EventPropertiesChanged, Properties: []string{"CurrentDNSServer"}}, ""},
		{"current server ex only", bus.Event{Kind: bus.EventPropertiesChanged, Properties: []string{"CurrentDNSServer", "CurrentDNSServerEx"}}, ""},
		// Nothing can be read until resolved or the bus is back, and that return is an event.
		{"resolved gone", bus.Event{Kind: bus.EventResolvedStopped}, ""},
		{"bus gone", bus.Event{Kind: bus.EventBusLost, Err: errors.New("EOF")}, ""},
		{"unknown kind", bus.Event{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ResolvedNotice(tt.e); got != tt.want {
				t.Errorf("ResolvedNotice(%+v) = %q, want %q", tt.e, got, tt.want)
			}
		})
	}
}

// TestResolvedEventsCoalesce: the notices channel exists before any client, is the same for every
// caller, holds one pending notice (a burst while the daemon is busy costs one more pass, not one per
// event), and the forwarder ends when the client's event channel closes.
func TestResolvedEventsCoalesce(t *testing.T) {
	r := &Resolved{}
	ch := r.Events()
	if r.Events() != ch {
		t.Fatal("Events returned a different channel on the second call")
	}
	events := make(chan bus.Event, 8)
	done := make(chan struct{})
	go func() {
		r.forward(events, r.conn.events())
		close(done)
	}()
	for _, e := range []bus.Event{
		{Kind: bus.EventResolvedStopped},
		{Kind: bus.EventBusLost},
		{Kind: bus.EventBusReconnected},
		{Kind: bus.EventResolvedStarted},
		{Kind: bus.EventPropertiesChanged, Properties: []string{"DNS"}},
	} {
		events <- e
	}
	close(events)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("forward did not end after the client's channel closed")
	}
	var got []string
	for len(ch) > 0 {
		got = append(got, <-ch)
	}
	if diff := cmp.Diff([]string{"system bus reconnected"}, got); diff != "" {
		t.Errorf("pending notices (-want +got):\n%s", diff)
	}
}
