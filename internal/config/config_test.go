package config

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestFromSettings(t *testing.T) {
	tests := []struct {
		name     string
		settings map[string]any
		check    func(t *testing.T, c Config)
		wantErr  string // substring; "" means no error
	}{
		{
			name:     "defaults",
			settings: Keys(),
			check: func(t *testing.T, c Config) {
				if diff := cmp.Diff(Default(), c, cmpopts.EquateEmpty(), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
					t.Errorf("defaults through FromSettings differ from Default() (-want +got):\n%s", diff)
				}
			},
		},
		{
			name: "file values, viper-lowercased keys",
			settings: map[string]any{
				"upstreams":                      []any{"10.0.0.2", "2001:db8::53"},
				"clusterdns":                     []any{"10.233.0.3"},
				"nodelocaldns.addresses":         []any{"169.254.20.10"},
				"netplan.mode":                   "pin",
				"host.routeclusterdomaintocache": true,
				"probes.timeout":                 "500ms",
				"writers.backoffafter":           3,
			},
			check: func(t *testing.T, c Config) {
				want := []netip.Addr{netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("2001:db8::53")}
				if !cmp.Equal(want, c.Upstreams, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })) {
					t.Errorf("upstreams = %v", c.Upstreams)
				}
				if c.Netplan.Mode != NetplanPin || !c.Host.RouteClusterDomainToCache || c.Probes.Timeout != 500*time.Millisecond || c.Writers.BackoffAfter != 3 {
					t.Errorf("got %+v", c)
				}
				if len(c.ClusterDNS) != 1 || len(c.NodeLocalDNS.Addresses) != 1 {
					t.Errorf("clusterDNS %v, addresses %v", c.ClusterDNS, c.NodeLocalDNS.Addresses)
				}
			},
		},
		{
			name:     "standby on from YAML 1.2 (a string) and from env",
			settings: map[string]any{"nodelocaldns.standby": "on"},
			check: func(t *testing.T, c Config) {
				if !c.NodeLocalDNS.Standby {
					t.Errorf("standby: on gave %+v", c.NodeLocalDNS)
				}
			},
		},
		{
			name:     "standby true",
			settings: map[string]any{"nodelocaldns.standby": true, "nodelocaldns.mode": "interface"},
			check: func(t *testing.T, c Config) {
				if !c.NodeLocalDNS.Standby {
					t.Errorf("standby: true gave %+v", c.NodeLocalDNS)
				}
			},
		},
		{
			name:     "standby needs the interface mode",
			settings: map[string]any{"nodelocaldns.standby": "on", "nodelocaldns.mode": "lrp"},
			wantErr:  "needs nodeLocalDNS.mode interface or auto",
		},
		{
			name:     "standby rejects nonsense",
			settings: map[string]any{"nodelocaldns.standby": "sometimes"},
			wantErr:  "not true or false",
		},
		{
			name:     "kubelet.manage and kubelet.restart, from YAML and from env",
			settings: map[string]any{"kubelet.manage": true, "kubelet.restart": "true"},
			check: func(t *testing.T, c Config) {
				if !c.Kubelet.Manage || !c.Kubelet.Restart {
					t.Errorf("kubelet: %+v", c.Kubelet)
				}
			},
		},
		{
			name:     "kubelet.manage and kubelet.restart are off by default",
			settings: map[string]any{},
			check: func(t *testing.T, c Config) {
				if c.Kubelet.Manage || c.Kubelet.Restart {
					t.Errorf("kubelet: %+v", c.Kubelet)
				}
			},
		},
		{
			name:     "kubelet.restart needs kubelet.manage",
			settings: map[string]any{"kubelet.restart": true},
			wantErr:  "config key kubelet.restart: value true: needs kubelet.manage: true",
		},
		{
			name:     "kubelet.restart needs kubelet.manage, even when manage is said false",
			settings: map[string]any{"kubelet.restart": "true", "kubelet.manage": false},
			wantErr:  "config key kubelet.restart",
		},
		{
			name:     "kubelet.manage rejects nonsense",
			settings: map[string]any{"kubelet.manage": "yes please"},
			wantErr:  "config key kubelet.manage",
		},
		{
			name:     "env string lists",
			settings: map[string]any{"upstreams": "10.0.0.2, 10.0.0.3"},
			check: func(t *testing.T, c Config) {
				if len(c.Upstreams) != 2 || c.Upstreams[1] != netip.MustParseAddr("10.0.0.3") {
					t.Errorf("upstreams = %v", c.Upstreams)
				}
			},
		},
		{
			name:     "netplan mode false means off",
			settings: map[string]any{"netplan.mode": false},
			check: func(t *testing.T, c Config) {
				if c.Netplan.Mode != NetplanOff {
					t.Errorf("mode = %q", c.Netplan.Mode)
				}
			},
		},
		{
			name:     "kubelet config auto by default",
			settings: map[string]any{},
			check: func(t *testing.T, c Config) {
				if c.Kubelet.Config != KubeletConfigAuto {
					t.Errorf("kubelet.config = %q, want auto", c.Kubelet.Config)
				}
			},
		},
		{
			name:     "kubelet config as a path",
			settings: map[string]any{"kubelet.config": "/etc/kubernetes/kubelet-config.yaml"},
			check: func(t *testing.T, c Config) {
				if c.Kubelet.Config != "/etc/kubernetes/kubelet-config.yaml" {
					t.Errorf("kubelet.config = %q", c.Kubelet.Config)
				}
			},
		},
		{name: "kubelet config relative", settings: map[string]any{"kubelet.config": "kubelet.yaml"}, wantErr: `config key kubelet.config: value "kubelet.yaml": "kubelet.yaml" is not an absolute path`},
		{name: "unknown key", settings: map[string]any{"upstream": []any{"1.1.1.1"}}, wantErr: "config key upstream: unknown key"},
		{name: "unknown nested key", settings: map[string]any{"netplan.modes": "pin"}, wantErr: "config key netplan.modes: unknown key"},
		{name: "bad ip", settings: map[string]any{"upstreams": []any{"10.0.0.300"}}, wantErr: `config key upstreams: value [10.0.0.300]: "10.0.0.300" is not an IP address`},
		{name: "bad duration", settings: map[string]any{"probes.timeout": "2 seconds"}, wantErr: `config key probes.timeout: value "2 seconds": "2 seconds" is not a duration`},
		{name: "negative duration", settings: map[string]any{"writers.window": "-1s"}, wantErr: "not a positive duration"},
		{name: "bad mode", settings: map[string]any{"netplan.mode": "always"}, wantErr: `"always" is not a mode`},
		{name: "relative path", settings: map[string]any{"kubelet.resolvConf": "resolv.conf"}, wantErr: "not an absolute path"},
		{name: "bad bool", settings: map[string]any{"netplan.apply": "sometimes"}, wantErr: `"sometimes" is not true or false`},
		{name: "bad domain", settings: map[string]any{"clusterDomain": "cluster..local"}, wantErr: "not a domain name"},
		// The rule of resolvconf.ValidDomain (dhclient's): a label neither starts nor ends with '-' or
		// '_', which the dhclient hook would refuse to write.
		{name: "domain label starting with '-'", settings: map[string]any{"clusterDomain": "-cluster.local"}, wantErr: `config key clusterDomain: value "-cluster.local": "-cluster.local" is not a domain name`},
		{name: "domain label ending with '_'", settings: map[string]any{"clusterDomain": "cluster_.local"}, wantErr: "not a domain name"},
		{name: "probe name label starting with '_'", settings: map[string]any{"probes.externalName": "_probe.example.org"}, wantErr: `config key probes.externalName: value "_probe.example.org": "_probe.example.org" is not a domain name`},
		{name: "probe name with a blank", settings: map[string]any{"probes.externalName": "example.org $(x)"}, wantErr: "not a domain name"},
		{name: "zero backoff", settings: map[string]any{"writers.backoffAfter": 0}, wantErr: "not a positive number"},
		{name: "bad cache mode", settings: map[string]any{"nodeLocalDNS.mode": "bpf"}, wantErr: `config key nodeLocalDNS.mode: value "bpf": "bpf" is not a mode (auto, interface, lrp, none)`},
		{name: "negative maxPods", settings: map[string]any{"probes.maxPods": -1}, wantErr: "config key probes.maxPods: value -1: -1 is negative"},
		{name: "maxPods not a number", settings: map[string]any{"probes.maxPods": "many"}, wantErr: `"many" is not a number`},
		{name: "kernel-made link-local cache address", settings: map[string]any{"nodeLocalDNS.addresses": []any{"fd00:25::10", "fe80::1"}}, wantErr: "fe80::1 is an IPv6 link-local address"},
		{
			name:     "cache mode and maxPods from the environment",
			settings: map[string]any{"nodelocaldns.mode": "lrp", "probes.maxpods": "0", "nodelocaldns.addresses": "169.254.25.10 fd00:25::10"},
			check: func(t *testing.T, c Config) {
				if c.NodeLocalDNS.Mode != CacheLRP || c.Probes.MaxPods != 0 || len(c.NodeLocalDNS.Addresses) != 2 {
					t.Errorf("mode %q maxPods %d addresses %v", c.NodeLocalDNS.Mode, c.Probes.MaxPods, c.NodeLocalDNS.Addresses)
				}
			},
		},
		{
			name:     "an empty cache mode is auto",
			settings: map[string]any{"nodelocaldns.mode": ""},
			check: func(t *testing.T, c Config) {
				if c.NodeLocalDNS.Mode != CacheAuto {
					t.Errorf("mode %q", c.NodeLocalDNS.Mode)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := FromSettings(tc.settings)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				var ce *Error
				if !errors.As(err, &ce) || ce.Key == "" {
					t.Errorf("err %v is not a *config.Error naming the key", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

func TestKeysCoverEveryDefault(t *testing.T) {
	// Every key has a default viper can bind NODEDNS_* to, and names are unique.
	seen := map[string]bool{}
	for _, n := range KeyNames() {
		if seen[strings.ToLower(n)] {
			t.Errorf("duplicate key %s", n)
		}
		seen[strings.ToLower(n)] = true
		if _, ok := Keys()[n]; !ok {
			t.Errorf("key %s has no default", n)
		}
	}
}

// TestLoopUpstreamIsAnError: an upstream the config itself shows to be a loop address is an error
// naming the key and the value, not a value silently dropped.
func TestLoopUpstreamIsAnError(t *testing.T) {
	for _, tt := range []struct {
		settings map[string]any
		want     string
	}{
		{map[string]any{"upstreams": []any{"169.254.25.10"}}, `config key upstreams: value "169.254.25.10": the node-local cache's address`},
		{map[string]any{"upstreams": []any{"10.0.0.2", "::ffff:169.254.20.10"}}, `value "169.254.20.10": the node-local cache's address`},
		{map[string]any{"upstreams": []any{"127.0.0.53"}}, `value "127.0.0.53": a loopback address`},
		{map[string]any{"upstreams": []any{"::1"}}, `value "::1": a loopback address`},
		{map[string]any{"upstreams": []any{"169.254.7.7"}, "nodeLocalDNS.addresses": []any{"169.254.7.7"}}, `the node-local cache's address`},
		{map[string]any{"upstreams": []any{"10.233.0.3"}, "clusterDNS": []any{"10.233.0.3"}}, `value "10.233.0.3": the cluster DNS service`},
	} {
		_, err := FromSettings(tt.settings)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: err = %v, want it to contain %q", tt.settings, err, tt.want)
		}
	}
	// A real resolver, including AWS's link-local one, is fine.
	if _, err := FromSettings(map[string]any{"upstreams": []any{"10.0.0.2", "169.254.169.253", "fd00::53"}}); err != nil {
		t.Errorf("real resolvers refused: %v", err)
	}
}
