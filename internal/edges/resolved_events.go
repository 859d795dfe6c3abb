package edges

import (
	"strings"

	"github.com/nodedns/nodedns/systemd/bus"
)

// Events implements EventSource: the change notices of the shared D-Bus client, for Daemon.Run. The
// channel exists before the client does (the client is dialled by the first pass that finds
// resolved in use) and outlives reconnects: every client Client dials feeds it, from its dial until
// Close. It is never closed.
//
// What the daemon is told, and why (systemd 252):
//   - resolved (re)started (NameOwnerChanged with a new owner): a restarted resolved reads its
//     configuration again, and whoever pushes per-link settings over D-Bus (NetworkManager, a
//     dhclient hook) pushes them again on its own NameOwnerChanged, loop servers and DHCP domains
//     included: the daemon re-reads resolved and re-applies;
//   - the bus is back (dbus-daemon restarted): resolved 252 does not follow a restarted bus (it
//     stays up, off the bus, until it is restarted too), so what resolved now says must be read
//     again; its return is a NameOwnerChanged of its own;
//   - PropertiesChanged of the Manager's DNS: the global servers changed.
//
// Not told (logged only): resolved leaving the bus and the bus going away (nothing can be read or
// set until they are back, and their return is an event), and PropertiesChanged of
// CurrentDNSServer alone (resolved switching between servers it already has; nothing nodedns reads
// changes).
//
// The channel holds one notice: a notice that finds one pending is dropped, because the pending
// one's pass starts after it and reads the whole state then (a notice never says what to change,
// only that something may have).
func (r *Resolved) Events() <-chan string { return r.conn.events() }

// forward turns one client's events into notices until the client is closed (its channel closes).
func (r *Resolved) forward(events <-chan bus.Event, out chan<- string) {
	forward(events, out, func(e bus.Event) string {
		what := ResolvedNotice(e)
		r.logEvent(e, what)
		return what
	})
}

// ResolvedNotice is the daemon's notice for a resolved client event: "" when the event needs no
// pass (see Events).
func ResolvedNotice(e bus.Event) string {
	switch e.Kind {
	case bus.EventResolvedStarted:
		return "systemd-resolved started (NameOwnerChanged)"
	case bus.EventBusReconnected:
		return "system bus reconnected"
	case bus.EventPropertiesChanged:
		var relevant []string
		for _, p := range e.Properties {
			if p != "CurrentDNSServer" && p != "CurrentDNSServerEx" {
				relevant = append(relevant, p)
			}
		}
		switch {
		case len(relevant) > 0:
			return "systemd-resolved PropertiesChanged " + strings.Join(relevant, ",")
		case len(e.Properties) > 0:
			return "" // CurrentDNSServer alone
		}
		// No property names at all: a signal this client could not decode; read everything.
		return "systemd-resolved PropertiesChanged"
	}
	return ""
}

func (r *Resolved) logEvent(e bus.Event, what string) {
	log := r.log()
	switch e.Kind {
	case bus.EventResolvedStarted:
		log.Info("systemd-resolved is on the bus", "owner", e.Owner) // what follows (a daemon pass, nothing for restore) is logged by who acts
	case bus.EventResolvedStopped:
		log.Info("systemd-resolved left the bus: waiting for it to come back")
	case bus.EventBusLost:
		log.Warn("system bus connection lost: reconnecting with backoff", "err", e.Err)
	case bus.EventBusReconnected:
		log.Info("system bus reconnected")
	case bus.EventPropertiesChanged:
		log.Debug("systemd-resolved PropertiesChanged", "path", e.Path, "properties", strings.Join(e.Properties, ","), "reconcile", what != "")
	}
}
