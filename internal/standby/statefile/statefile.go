// Package statefile is the standby's state file (docs/contract.md "Standby"): its node path, the
// standby's states and the status it keeps there for `nodedns check`. It is pure, so the self-check
// reads the file without importing the standby's listeners, sock_diag and netlink, as node reads
// the backup manifest through store/manifest.
package statefile

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"time"
)

// States of the standby (docs/contract.md "Standby"; the check nodelocaldns.standby reports them).
const (
	Ready   = "ready"   // the cache answers; the standby would stand in
	Active  = "active"  // standing in on at least one address
	Unknown = "unknown" // cannot stand in; Why says why
)

// Path is the node path of the standby's state file: its status for `nodedns check` and the
// cache's cluster DNS as its Corefile last said.
const Path = "/var/lib/nodedns/standby.json"

// Status is what the standby says about itself, kept in the state file for `nodedns check`.
type Status struct {
	PID   int       `json:"pid"`
	State string    `json:"state"`
	Since time.Time `json:"since"`
	// Queries counts the queries answered in the current stand-in (Active).
	Queries int64 `json:"queries"`
	// Covering are the addresses the standby holds now.
	Covering []netip.Addr `json:"covering,omitempty"`
	// Targets says where it forwards (or would).
	Targets string `json:"targets,omitempty"`
	Why     string `json:"why,omitempty"`
	// CorefileClusterDNS is where the cache's Corefile, as last seen, sends the cluster domain.
	CorefileClusterDNS []netip.Addr `json:"corefileClusterDNS,omitempty"`
	// Takeovers counts stand-ins since the daemon started; LastTakeoverDelay is the time from the
	// cache's exit to the standby's sockets being bound.
	Takeovers         int           `json:"takeovers"`
	LastTakeoverDelay time.Duration `json:"lastTakeoverDelay,omitempty"`
	// Hung names the addresses where the standby stands in beside a cache that holds its
	// listeners and answers nothing.
	Hung []netip.Addr `json:"hung,omitempty"`
	// Steering says how the standby shares the cache's sockets (its reuseport program), or why it
	// cannot.
	Steering string `json:"steering,omitempty"`
	// Footprint is node-cache's interface, addresses and rules as last read while it ran.
	Footprint string `json:"footprint,omitempty"`
	// PutBack is the last time the cache's interface or address went: what was put back, or why
	// nothing was.
	PutBack *PutBack `json:"putBack,omitempty"`
	// UID is the standby's own (effective) user; CacheUID the user the cache's listeners belonged
	// to when last seen (kept across restarts; nil: never seen). The kernel lets a socket join a
	// SO_REUSEPORT group only when the same user made both, so the standby never stands in for a
	// cache of another user: while it held the address the cache could not bind it again.
	UID      uint32    `json:"uid"`
	CacheUID *uint32   `json:"cacheUID,omitempty"`
	Updated  time.Time `json:"updated"`
}

// OtherUser reports whether the cache's listeners were, when last seen, another user's than the
// standby's: then the standby does not stand in (docs/contract.md "Standby").
func (s Status) OtherUser() bool { return s.CacheUID != nil && *s.CacheUID != s.UID }

// PutBack is what the standby did when node-cache's interface or a cache address went.
type PutBack struct {
	At time.Time `json:"at"`
	// Gone says what went (the kernel's event).
	Gone string `json:"gone"`
	// What is what the standby put back, Took how long after the kernel's event it was back; What
	// is empty with Why when it put nothing back.
	What string        `json:"what,omitempty"`
	Took time.Duration `json:"took,omitempty"`
	Why  string        `json:"why,omitempty"`
	// Adopted is when node-cache took it over (it listened and answered there again): from then
	// on the interface and rules are node-cache's, and restore leaves them.
	Adopted time.Time `json:"adopted,omitzero"`
}

// Parse reads the state file; name is for the error.
func Parse(name string, data []byte) (Status, error) {
	var s Status
	if err := json.Unmarshal(data, &s); err != nil {
		return Status{}, fmt.Errorf("%s: %w", name, err)
	}
	switch s.State {
	case Ready, Active, Unknown:
	default:
		return Status{}, fmt.Errorf("%s: unknown state %q", name, s.State)
	}
	return s, nil
}
