package policy

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/nodedns/nodedns/systemd"
)

// Action is a step of a plan that is not a file write: restarting a service, a per-link setting over
// D-Bus, a command that makes a networking change live. Every kind is its own type with a typed
// payload, so an actor switches on the type and never parses a string back; the set is closed (the
// unexported method), and edges' TestEveryActionHasAnActor finds every type declared here and
// holds each to exactly one actor.
type Action interface {
	// Kind is the action's stable name in `plan` and `apply` output ("restart-resolved", ...).
	Kind() string
	// Target names what the action acts on, for people ("systemd-resolved.service", "eth1").
	Target() string
	// Detail is the payload, for people ("drop 169.254.25.10"); "" when there is none.
	Detail() string
	// Why says why the plan needs it.
	Why() string

	action()
}

// Link names a network interface an action is about: its index (what the kernel and D-Bus use) and,
// when known, its name (what people read).
type Link struct {
	Index int
	Name  string
}

// String is the name, or "ifindex N" for a link nobody named.
func (l Link) String() string {
	if l.Name != "" {
		return l.Name
	}
	return fmt.Sprintf("ifindex %d", l.Index)
}

// RestartResolved restarts systemd-resolved so that it reads resolved.conf.d again: resolved reads its
// configuration only at start, and SIGHUP kills resolved 252 instead of reloading it.
type RestartResolved struct {
	Reason string
}

// SetLinkDNS removes loop addresses from a link's DNS servers in systemd-resolved (SetLinkDNS over
// D-Bus), keeping every other server in its order.
type SetLinkDNS struct {
	Link   Link
	Drop   []netip.Addr
	Reason string
}

// SetLinkDomains removes DHCP search domains from a link's domains in systemd-resolved
// (SetLinkDomains over D-Bus); routing-only domains and every other domain stay.
type SetLinkDomains struct {
	Link   Link
	Drop   []string
	Reason string
}

// NetplanApply runs `netplan apply` so that a changed netplan file takes effect now rather than at
// the next boot. Like NetworkctlReload it is planned only with config netplan.apply: true (or
// `nodedns netplan pin --apply`) and carried out only on the live node: never by surprise.
type NetplanApply struct {
	File   string
	Reason string
}

// NetworkctlReload runs `networkctl reload` so that changed networkd drop-ins take effect now
// (config netplan.apply).
type NetworkctlReload struct {
	Reason string
}

// ReloadNetworkManager reloads NetworkManager (Manager.Reload over D-Bus, as `nmcli general
// reload`) so that it reads /etc/NetworkManager/conf.d again: NM 1.42 does not watch its
// configuration. Reload answers success even when a file fails to parse (NM 1.42.4 logs the error
// and keeps the old configuration), so the actor reads GlobalDnsConfiguration back and fails
// unless NM uses Expect.
type ReloadNetworkManager struct {
	// Expect are the "*" servers NetworkManager must use after the reload (nil: no "*" domain).
	Expect []netip.Addr
	// BackUp are files NetworkManager itself changes on this reload, backed up first so that
	// `nodedns restore` puts them back: NetworkManager-intern.conf, whose global DNS set over
	// D-Bus NM 1.42 drops for good once a config file sets global DNS.
	BackUp []string
	Reason string
}

// RestartKubelet restarts the unit that starts kubelet (kubelet.service, rke2-server.service,
// k3s.service, ...) over systemd's D-Bus API, so that kubelet reads the config kubelet.manage
// changed: kubelet reads its config, its flags and RKE2's and k3s's choice only when it starts.
// Planned only with kubelet.restart: true (docs/contract.md "kubelet.manage").
type RestartKubelet struct {
	Unit   string
	Reason string
}

func (RestartResolved) Kind() string   { return "restart-resolved" }
func (RestartResolved) Target() string { return systemd.ResolvedUnit }
func (RestartResolved) Detail() string { return "" }
func (a RestartResolved) Why() string  { return a.Reason }
func (RestartResolved) action()        {}

func (SetLinkDNS) Kind() string     { return "set-link-dns" }
func (a SetLinkDNS) Target() string { return a.Link.String() }
func (a SetLinkDNS) Detail() string {
	s := make([]string, len(a.Drop))
	for i, d := range a.Drop {
		s[i] = d.String()
	}
	return "drop " + strings.Join(s, " ")
}
func (a SetLinkDNS) Why() string { return a.Reason }
func (SetLinkDNS) action()       {}

func (SetLinkDomains) Kind() string     { return "set-link-domains" }
func (a SetLinkDomains) Target() string { return a.Link.String() }
func (a SetLinkDomains) Detail() string { return "drop " + strings.Join(a.Drop, " ") }
func (a SetLinkDomains) Why() string    { return a.Reason }
func (SetLinkDomains) action()          {}

func (NetplanApply) Kind() string     { return "netplan-apply" }
func (a NetplanApply) Target() string { return a.File }
func (NetplanApply) Detail() string   { return "" }
func (a NetplanApply) Why() string    { return a.Reason }
func (NetplanApply) action()          {}

func (NetworkctlReload) Kind() string   { return "networkctl-reload" }
func (NetworkctlReload) Target() string { return "systemd-networkd" }
func (NetworkctlReload) Detail() string { return "" }
func (a NetworkctlReload) Why() string  { return a.Reason }
func (NetworkctlReload) action()        {}

func (ReloadNetworkManager) Kind() string   { return "reload-networkmanager" }
func (ReloadNetworkManager) Target() string { return "NetworkManager" }
func (a ReloadNetworkManager) Detail() string {
	want := "no global \"*\" servers"
	if len(a.Expect) > 0 {
		s := make([]string, len(a.Expect))
		for i, x := range a.Expect {
			s[i] = x.String()
		}
		want = "\"*\" servers " + strings.Join(s, " ")
	}
	d := "Manager.Reload, then GlobalDnsConfiguration must have " + want
	if len(a.BackUp) > 0 {
		d = "back up " + strings.Join(a.BackUp, " ") + "; " + d
	}
	return d
}
func (a ReloadNetworkManager) Why() string { return a.Reason }
func (ReloadNetworkManager) action()       {}

func (RestartKubelet) Kind() string     { return "restart-kubelet" }
func (a RestartKubelet) Target() string { return a.Unit }
func (RestartKubelet) Detail() string   { return "systemd D-Bus RestartUnit, mode replace" }
func (a RestartKubelet) Why() string    { return a.Reason }
func (RestartKubelet) action()          {}

// HasAction reports whether the plan already holds an action of the same kind as a.
func (p *Plan) HasAction(kind string) bool {
	for _, x := range p.Actions {
		if x.Kind() == kind {
			return true
		}
	}
	return false
}
