// Package config is nodedns's typed, validated configuration. The command layer (cmd/nodedns) turns
// the config file, NODEDNS_* environment and flags into one Config with Load and passes it down;
// nothing below cmd reads globals or viper.
package config

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nodedns/nodedns/resolvconf"
)

// Netplan modes (docs/contract.md: `netplan.mode`).
const (
	NetplanOff      = "off"
	NetplanOverride = "override"
	NetplanPin      = "pin"
)

// Cache modes (docs/contract.md "Cache mode": `nodeLocalDNS.mode`).
const (
	CacheAuto      = "auto"
	CacheInterface = "interface"
	CacheLRP       = "lrp"
	CacheNone      = "none"
)

// DefaultMaxPods is probes.maxPods's default: how many pod network namespaces nodelocaldns.pods
// queries from.
const DefaultMaxPods = 16

// Well-known node paths.
const (
	DefaultConfigPath        = "/etc/nodedns/config.yaml"
	DefaultKubeletConfig     = KubeletConfigAuto
	DefaultKubeletResolvConf = "/var/lib/nodedns/resolv.conf"
	StateDir                 = "/var/lib/nodedns"
)

// Config is the whole configuration of one nodedns run.
type Config struct {
	// Upstreams are real resolvers to use when no other source has one.
	Upstreams []netip.Addr
	// ClusterDNS are the CoreDNS service IPs: never an upstream of the node.
	ClusterDNS []netip.Addr
	// ClusterDomain is the cluster's DNS domain; "" means: from the kubelet config, else cluster.local.
	ClusterDomain string

	NodeLocalDNS NodeLocalDNS
	Kubelet      Kubelet
	Resolved     Resolved
	Netplan      Netplan
	Host         Host
	Probes       Probes
	Writers      Writers
	Metrics      Metrics
	Daemon       Daemon
}

// NodeLocalDNS describes the node-local cache.
type NodeLocalDNS struct {
	// Mode is how the cache runs here: CacheAuto, CacheInterface, CacheLRP or CacheNone.
	Mode      string
	Interface string
	Addresses []netip.Addr
	// Standby makes `nodedns run` answer on the cache addresses while no cache listens there
	// (docs/contract.md "Standby"); only in interface mode.
	Standby bool
}

// KubeletConfigAuto is kubelet.config's default: find the file kubelet really reads
// (docs/contract.md "Kubelet's config").
const KubeletConfigAuto = "auto"

// Kubelet says where kubelet's config is and where nodedns writes kubelet's resolv.conf.
type Kubelet struct {
	// Config is KubeletConfigAuto or the node path of kubelet's config file.
	Config     string
	ResolvConf string
	// Manage makes apply point the configuration kubelet really reads at ResolvConf
	// (docs/contract.md "kubelet.manage"); Restart makes apply restart the unit that starts kubelet
	// afterwards over systemd's D-Bus API (meaningful only with Manage).
	Manage  bool
	Restart bool
}

// Resolved configures how systemd-resolved is handled.
type Resolved struct {
	// RestartCommand replaces the restart over systemd's D-Bus API when set (argv).
	RestartCommand []string
}

// Netplan configures the netplan integration.
type Netplan struct {
	// Mode is off, override or pin. "" means: override when /etc/netplan has DHCP interfaces, else off.
	Mode  string
	Apply bool
}

// Host configures the host's own resolver.
type Host struct {
	// RouteClusterDomainToCache is the one opt-in that lets nodedns route ~clusterDomain (routing-only,
	// never the default route) to the cache.
	RouteClusterDomainToCache bool
}

// Probes configures the live checks.
type Probes struct {
	Timeout time.Duration
	// MaxPods bounds how many pod network namespaces nodelocaldns.pods queries from; 0: none.
	MaxPods      int
	ExternalName string
	BootGrace    time.Duration
}

// Writers configures how long nodedns fights another writer of a target.
type Writers struct {
	BackoffAfter int
	Window       time.Duration
}

// Daemon configures `nodedns run`.
type Daemon struct {
	// ResyncInterval is how often the daemon compares the node with the desired state even without
	// an event (a missed inotify event, a change made over D-Bus that emits no signal).
	ResyncInterval time.Duration
}

// MinResyncInterval bounds daemon.resyncInterval from below: a resync is a full read of the node,
// and the daemon must not turn into a poller.
const MinResyncInterval = 10 * time.Second

// Default returns the built-in defaults (docs/contract.md "Config keys").
func Default() Config {
	return Config{
		NodeLocalDNS: NodeLocalDNS{Mode: CacheAuto, Interface: "nodelocaldns"},
		Kubelet:      Kubelet{Config: DefaultKubeletConfig, ResolvConf: DefaultKubeletResolvConf},
		Probes:       Probes{Timeout: 2 * time.Second, MaxPods: DefaultMaxPods, BootGrace: 120 * time.Second},
		Writers:      Writers{BackoffAfter: 10, Window: 60 * time.Second},
		Metrics:      Metrics{Textfile: DefaultMetricsTextfile},
		Daemon:       Daemon{ResyncInterval: 5 * time.Minute},
	}
}

// key describes one config key: its dotted name (as in the YAML file), its default for viper, and how
// to set it from whatever the file, env or flag gave.
type key struct {
	name string
	def  any
	set  func(c *Config, v any) error
}

// keys is the complete list of config keys, in documentation order. An unknown key is an error, so
// this list is also the documentation's source of truth (see Keys).
var keys = slices.Concat(coreKeys, metricsKeys)

// coreKeys are the keys of the resolver configuration and the daemon.
var coreKeys = []key{
	{"upstreams", []string{}, func(c *Config, v any) (err error) { c.Upstreams, err = addrList(v); return }},
	{"clusterDNS", []string{}, func(c *Config, v any) (err error) { c.ClusterDNS, err = addrList(v); return }},
	{"clusterDomain", "", func(c *Config, v any) (err error) {
		s, err := str(v)
		if err == nil && s != "" && !resolvconf.ValidDomain(s) {
			err = fmt.Errorf("%q is not a domain name", s)
		}
		c.ClusterDomain = strings.TrimSuffix(s, ".")
		return
	}},
	{"nodeLocalDNS.mode", CacheAuto, func(c *Config, v any) (err error) {
		c.NodeLocalDNS.Mode, err = mode(v, "auto, interface, lrp, none", map[string]string{
			CacheAuto: CacheAuto, CacheInterface: CacheInterface, CacheLRP: CacheLRP, CacheNone: CacheNone, "": CacheAuto})
		return
	}},
	{"nodeLocalDNS.interface", "nodelocaldns", func(c *Config, v any) (err error) {
		c.NodeLocalDNS.Interface, err = nonEmpty(v)
		return
	}},
	{"nodeLocalDNS.addresses", []string{}, func(c *Config, v any) (err error) {
		c.NodeLocalDNS.Addresses, err = addrList(v)
		for _, a := range c.NodeLocalDNS.Addresses {
			if err == nil && a.Is6() && a.IsLinkLocalUnicast() {
				// docs/contract.md "Cache addresses": the kernel gives every up interface an fe80::
				// address by itself; node-cache listens only on the addresses it was given.
				err = fmt.Errorf("%s is an IPv6 link-local address (fe80::/10), which the kernel gives every interface: never a cache address", a)
			}
		}
		return
	}},
	{"nodeLocalDNS.standby", false, func(c *Config, v any) (err error) {
		// YAML `standby: on` is a bool to the YAML reader and "on" from env: both mean true.
		if s, ok := v.(string); ok && (s == "on" || s == "off") {
			c.NodeLocalDNS.Standby = s == "on"
			return nil
		}
		c.NodeLocalDNS.Standby, err = boolean(v)
		return
	}},
	{"kubelet.config", DefaultKubeletConfig, func(c *Config, v any) (err error) {
		if s, _ := v.(string); s == KubeletConfigAuto {
			c.Kubelet.Config = s
			return nil
		}
		c.Kubelet.Config, err = absPath(v)
		return
	}},
	{"kubelet.resolvConf", DefaultKubeletResolvConf, func(c *Config, v any) (err error) { c.Kubelet.ResolvConf, err = absPath(v); return }},
	{"kubelet.manage", false, func(c *Config, v any) (err error) { c.Kubelet.Manage, err = boolean(v); return }},
	{"kubelet.restart", false, func(c *Config, v any) (err error) { c.Kubelet.Restart, err = boolean(v); return }},
	{"resolved.restartCommand", []string{}, func(c *Config, v any) (err error) { c.Resolved.RestartCommand, err = strList(v); return }},
	{"netplan.mode", "", func(c *Config, v any) error {
		// YAML `mode: false` means off (docs/contract.md); viper hands us a bool or, from env, a string.
		if b, ok := v.(bool); ok {
			if b {
				return fmt.Errorf("true is not a mode (off, override, pin)")
			}
			c.Netplan.Mode = NetplanOff
			return nil
		}
		var err error
		c.Netplan.Mode, err = mode(v, "off, override, pin", map[string]string{
			"": "", NetplanOverride: NetplanOverride, NetplanPin: NetplanPin, NetplanOff: NetplanOff, "false": NetplanOff})
		return err
	}},
	{"netplan.apply", false, func(c *Config, v any) (err error) { c.Netplan.Apply, err = boolean(v); return }},
	{"host.routeClusterDomainToCache", false, func(c *Config, v any) (err error) {
		c.Host.RouteClusterDomainToCache, err = boolean(v)
		return
	}},
	{"probes.timeout", "2s", func(c *Config, v any) (err error) { c.Probes.Timeout, err = duration(v); return }},
	{"probes.maxPods", DefaultMaxPods, func(c *Config, v any) (err error) {
		c.Probes.MaxPods, err = integer(v)
		if err == nil && c.Probes.MaxPods < 0 {
			err = fmt.Errorf("%d is negative (0 turns nodelocaldns.pods off)", c.Probes.MaxPods)
		}
		return
	}},
	{"probes.externalName", "", func(c *Config, v any) (err error) {
		s, err := str(v)
		if err == nil && s != "" && !resolvconf.ValidDomain(s) {
			err = fmt.Errorf("%q is not a domain name", s)
		}
		c.Probes.ExternalName = s
		return
	}},
	{"probes.bootGrace", "120s", func(c *Config, v any) (err error) { c.Probes.BootGrace, err = duration(v); return }},
	{"writers.backoffAfter", 10, func(c *Config, v any) (err error) {
		c.Writers.BackoffAfter, err = integer(v)
		if err == nil && c.Writers.BackoffAfter < 1 {
			err = fmt.Errorf("%d is not a positive number", c.Writers.BackoffAfter)
		}
		return
	}},
	{"writers.window", "60s", func(c *Config, v any) (err error) { c.Writers.Window, err = duration(v); return }},
	{"daemon.resyncInterval", "5m", func(c *Config, v any) (err error) {
		c.Daemon.ResyncInterval, err = duration(v)
		if err == nil && c.Daemon.ResyncInterval < MinResyncInterval {
			err = fmt.Errorf("%v is shorter than %v (a resync reads the whole node; events do the fast work)", c.Daemon.ResyncInterval, MinResyncInterval)
		}
		return
	}},
}

// Keys returns every config key with its default, in a stable order, for viper's SetDefault (so
// NODEDNS_* environment variables bind) and for docs.
func Keys() map[string]any {
	m := make(map[string]any, len(keys))
	for _, k := range keys {
		m[k.name] = k.def
	}
	return m
}

// Error is a config error naming the key and the bad value.
type Error struct {
	Key   string
	Value any
	Err   error
}

func (e *Error) Error() string {
	if e.Value == nil {
		return fmt.Sprintf("config key %s: %v", e.Key, e.Err)
	}
	return fmt.Sprintf("config key %s: value %s: %v", e.Key, show(e.Value), e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// FromSettings builds a validated Config from flat, dotted settings (what viper's AllKeys/Get give,
// keys compared case-insensitively because viper lowercases them). Unknown keys are errors: a typo in a
// fleet's config must not silently fall back to a default. managed are the files nodedns manages
// whatever the config says (path.Match patterns; the caller passes node.Writes): no path key may
// name one.
func FromSettings(settings map[string]any, managed ...string) (Config, error) {
	c := Default()
	known := make(map[string]key, len(keys))
	for _, k := range keys {
		known[strings.ToLower(k.name)] = k
	}
	names := make([]string, 0, len(settings))
	for n := range settings {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		k, ok := known[strings.ToLower(n)]
		if !ok {
			return Config{}, &Error{Key: n, Err: fmt.Errorf("unknown key (known keys: %s)", strings.Join(KeyNames(), ", "))}
		}
		v := settings[n]
		if err := k.set(&c, v); err != nil {
			return Config{}, &Error{Key: k.name, Value: v, Err: err}
		}
	}
	if err := validatePaths(c, managed); err != nil {
		return Config{}, err
	}
	if err := validateUpstreams(c); err != nil {
		return Config{}, err
	}
	if c.NodeLocalDNS.Standby && c.NodeLocalDNS.Mode != CacheAuto && c.NodeLocalDNS.Mode != CacheInterface {
		// docs/contract.md "Standby": only a cache on its own interface leaves an address to hold.
		return Config{}, &Error{Key: "nodeLocalDNS.standby", Value: true, Err: fmt.Errorf("needs nodeLocalDNS.mode interface or auto, not %s", c.NodeLocalDNS.Mode)}
	}
	if c.Kubelet.Restart && !c.Kubelet.Manage {
		// docs/contract.md "kubelet.manage": the restart is of a change nodedns made.
		return Config{}, &Error{Key: "kubelet.restart", Value: true, Err: fmt.Errorf("needs kubelet.manage: true (nodedns restarts kubelet only after it changed kubelet's config)")}
	}
	return c, nil
}

// KeyNames lists the config keys in documentation order.
func KeyNames() []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.name
	}
	return out
}

func show(v any) string {
	switch t := v.(type) {
	case string:
		return strconv.Quote(t)
	default:
		return fmt.Sprintf("%v", t)
	}
}

func str(v any) (string, error) {
	switch t := v.(type) {
	case nil:
		return "", nil
	case string:
		return strings.TrimSpace(t), nil
	default:
		return "", fmt.Errorf("want a string, got %T", v)
	}
}

// mode reads v as one of the spellings of a mode (spelling: the mode it means); the error for any
// other names the modes.
func mode(v any, modes string, spellings map[string]string) (string, error) {
	s, err := str(v)
	if err != nil {
		return "", err
	}
	m, ok := spellings[s]
	if !ok {
		return "", fmt.Errorf("%q is not a mode (%s)", s, modes)
	}
	return m, nil
}

func nonEmpty(v any) (string, error) {
	s, err := str(v)
	if err == nil && s == "" {
		err = fmt.Errorf("must not be empty")
	}
	return s, err
}

func absPath(v any) (string, error) {
	s, err := nonEmpty(v)
	if err == nil && !strings.HasPrefix(s, "/") {
		err = fmt.Errorf("%q is not an absolute path", s)
	}
	return s, err
}

// strList accepts a YAML list, or a string of whitespace/comma separated words (how an env variable
// such as NODEDNS_UPSTREAMS="1.1.1.1 9.9.9.9" arrives).
func strList(v any) ([]string, error) {
	switch t := v.(type) {
	case nil:
		return nil, nil
	case string:
		return strings.FieldsFunc(t, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }), nil
	case []string:
		return t, nil
	case []any:
		out := make([]string, 0, len(t))
		for i, e := range t {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("item %d: want a string, got %v", i, e)
			}
			out = append(out, s)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("want a list, got %T", v)
	}
}

func addrList(v any) ([]netip.Addr, error) {
	ss, err := strList(v)
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, 0, len(ss))
	for _, s := range ss {
		a, err := netip.ParseAddr(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("%q is not an IP address", s)
		}
		out = append(out, a.Unmap())
	}
	return out, nil
}

func boolean(v any) (bool, error) {
	switch t := v.(type) {
	case bool:
		return t, nil
	case string:
		b, err := strconv.ParseBool(strings.TrimSpace(t))
		if err != nil {
			return false, fmt.Errorf("%q is not true or false", t)
		}
		return b, nil
	default:
		return false, fmt.Errorf("want true or false, got %T", v)
	}
}

func integer(v any) (int, error) {
	switch t := v.(type) {
	case int:
		return t, nil
	case int64:
		return int(t), nil
	case float64:
		if t != float64(int(t)) {
			return 0, fmt.Errorf("%v is not a whole number", t)
		}
		return int(t), nil
	case string:
		n, err := strconv.Atoi(strings.TrimSpace(t))
		if err != nil {
			return 0, fmt.Errorf("%q is not a number", t)
		}
		return n, nil
	default:
		return 0, fmt.Errorf("want a number, got %T", v)
	}
}

func duration(v any) (time.Duration, error) {
	var d time.Duration
	switch t := v.(type) {
	case time.Duration:
		d = t
	case string:
		var err error
		d, err = time.ParseDuration(strings.TrimSpace(t))
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration (e.g. 2s, 500ms, 2m)", t)
		}
	default:
		return 0, fmt.Errorf("want a duration such as 2s, got %T %v", v, v)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%v is not a positive duration", d)
	}
	return d, nil
}
