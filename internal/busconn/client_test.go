package busconn

import (
	"testing"

	"github.com/godbus/dbus/v5"
)

// TestClientEvents: the service's NameOwnerChanged becomes Started (with the new owner) or Stopped,
// another name's or a malformed one none; the service's own signals go through Service.Signal; a
// full channel drops events instead of blocking the connection's goroutine.
func TestClientEvents(t *testing.T) {
	const name = "org.example.Service"
	c := newClient(Service[string]{
		Name: name,
		Signal: func(s *dbus.Signal) (string, bool) {
			return "signal " + string(s.Path), s.Name == "org.example.Service.Changed"
		},
		Started: func(owner string) string { return "started " + owner },
		Stopped: func() string { return "stopped" },
	})
	owner := func(body ...any) *dbus.Signal {
		return &dbus.Signal{Path: "/org/freedesktop/DBus", Name: "org.freedesktop.DBus.NameOwnerChanged", Body: body}
	}
	for _, tc := range []struct {
		s    *dbus.Signal
		want string // "" for no event
	}{
		{owner(name, "", ":1.5"), "started :1.5"},
		{owner(name, ":1.5", ""), "stopped"},
		{owner("org.example.Other", "", ":1.6"), ""},
		{owner(name, ""), ""},
		{&dbus.Signal{Path: "/x", Name: "org.example.Service.Changed"}, "signal /x"},
		{&dbus.Signal{Path: "/x", Name: "org.example.Service.Other"}, ""},
	} {
		c.signal(tc.s)
		var got string
		select {
		case got = <-c.Events():
		default:
		}
		if got != tc.want {
			t.Errorf("%s %v: event %q, want %q", tc.s.Name, tc.s.Body, got, tc.want)
		}
	}
	for range eventBuffer + 1 {
		c.signal(owner(name, "", ":1.7"))
	}
	if n := len(c.Events()); n != eventBuffer {
		t.Errorf("%d events waiting after %d, want %d", n, eventBuffer+1, eventBuffer)
	}
}
