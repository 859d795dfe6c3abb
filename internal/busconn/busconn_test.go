package busconn

import (
	"errors"
	"fmt"
	"testing"

	"github.com/godbus/dbus/v5"
)

// TestErrorName finds the name of a D-Bus error reply however godbus hands it over (by value or
// pointer, wrapped or not), and none in other errors.
func TestErrorName(t *testing.T) {
	reply := dbus.Error{Name: ErrNameNameHasNoOwner, Body: []any{"no owner"}}
	for _, err := range []error{reply, &reply, fmt.Errorf("call: %w", reply), fmt.Errorf("call: %w", &reply)} {
		if name, msg := ErrorName(err); name != ErrNameNameHasNoOwner || msg != "no owner" {
			t.Errorf("ErrorName(%v) = %q, %q", err, name, msg)
		}
	}
	for _, err := range []error{nil, errors.New("EOF"), ErrDisconnected} {
		if name, _ := ErrorName(err); name != "" {
			t.Errorf("ErrorName(%v) = %q, want none", err, name)
		}
	}
}

// TestOptionsDefaults: a zero Options gets a call timeout and a backoff that grows from 100 ms to 5 s.
func TestOptionsDefaults(t *testing.T) {
	o := Options{}.withDefaults()
	if o.CallTimeout <= 0 || o.MinBackoff <= 0 || o.MaxBackoff < o.MinBackoff {
		t.Errorf("defaults %+v", o)
	}
	if o := (Options{MinBackoff: 10e9}).withDefaults(); o.MaxBackoff < o.MinBackoff {
		t.Errorf("a min backoff above the default max: %+v", o)
	}
}

// TestReplyMatchesSentinelsByName: a reply matches the sentinels declared for its name, wrapped or
// not, and no other; a non-reply error stays as it is.
func TestReplyMatchesSentinelsByName(t *testing.T) {
	busy := Sentinel(errors.New("busy"), "org.example.Busy")
	gone := Sentinel(errors.New("gone"), "org.example.Gone", ErrNameUnknownObject)
	for _, tc := range []struct {
		name       string
		busy, gone bool
	}{
		{"org.example.Busy", true, false},
		{ErrNameUnknownObject, false, true},
		{"org.example.Other", false, false},
	} {
		err := fmt.Errorf("set link: %w", AsReply(dbus.Error{Name: tc.name, Body: []any{"misleading: org.example.Busy"}}))
		if errors.Is(err, busy) != tc.busy || errors.Is(err, gone) != tc.gone {
			t.Errorf("%s: Is(busy) %v Is(gone) %v, want %v %v", tc.name, errors.Is(err, busy), errors.Is(err, gone), tc.busy, tc.gone)
		}
	}
	plain := errors.New("EOF")
	if AsReply(plain) != plain || AsReply(nil) != nil {
		t.Error("AsReply changed a non-reply error")
	}
}
