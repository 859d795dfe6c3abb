package main

import (
	"testing"
)

// FuzzParseConfig feeds arbitrary bytes as /etc/nodedns/config.yaml: no panic, and an accepted config
// is a valid one (what FromSettings promises), whatever YAML viper was given.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("upstreams: [10.0.0.2]\nnetplan:\n  mode: false\nprobes:\n  timeout: 500ms\n"))
	f.Add([]byte("nodeLocalDNS:\n  addresses: [169.254.20.10]\nclusterDNS: 10.233.0.3\nlog-level: debug\n"))
	f.Add([]byte("upstreams: {a: b}\n"))
	f.Add([]byte("a: &x [*x]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, _, err := parseConfig(data)
		if err != nil {
			return
		}
		for _, a := range append(append(cfg.Upstreams, cfg.ClusterDNS...), cfg.NodeLocalDNS.Addresses...) {
			if !a.IsValid() {
				t.Fatalf("accepted an invalid address from %q", data)
			}
		}
		if cfg.Probes.Timeout <= 0 || cfg.Writers.Window <= 0 || cfg.Writers.BackoffAfter < 1 {
			t.Fatalf("accepted non-positive limits from %q: %+v", data, cfg)
		}
		switch cfg.Netplan.Mode {
		case "", "off", "override", "pin":
		default:
			t.Fatalf("accepted netplan mode %q", cfg.Netplan.Mode)
		}
	})
}
