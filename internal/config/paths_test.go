package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/node"
)

// TestPathKeysMustNotCollide: a path key naming another managed file (what the mechanisms declare
// they write, node.Writes), nodedns's state, a directory
// another program reads as configuration, or another key's file is a config error naming the key.
func TestPathKeysMustNotCollide(t *testing.T) {
	tests := []struct {
		name     string
		settings map[string]any
		key      string
		want     string
	}{
		{"textfile over resolv.conf", map[string]any{"metrics.textfile": "/etc/resolv.conf"}, "metrics.textfile", "/etc/resolv.conf is also a file nodedns manages"},
		{"kubelet file over the manifest", map[string]any{"kubelet.resolvConf": "/var/lib/nodedns/backup/manifest.json"}, "kubelet.resolvConf", "is in nodedns's backup directory /var/lib/nodedns/backup"},
		{"kubelet file as the backup directory", map[string]any{"kubelet.resolvConf": "/var/lib/nodedns/backup"}, "kubelet.resolvConf", "backup directory"},
		{"kubelet file as the state directory", map[string]any{"kubelet.resolvConf": "/var/lib/nodedns"}, "kubelet.resolvConf", "state directory itself"},
		{"kubelet file above the state directory", map[string]any{"kubelet.resolvConf": "/var/lib"}, "kubelet.resolvConf", "holds nodedns's state directory"},
		{"kubelet file unclean over the manifest", map[string]any{"kubelet.resolvConf": "/var/lib/nodedns/x/../backup/manifest.json"}, "kubelet.resolvConf", "backup directory"},
		{"kubelet file in the work directory", map[string]any{"kubelet.resolvConf": "/var/lib/nodedns/tmp/resolv.conf"}, "kubelet.resolvConf", "work directory"},
		{"kubelet file over a state file", map[string]any{"kubelet.resolvConf": "/var/lib/nodedns/writers.json"}, "kubelet.resolvConf", "own state file"},
		{"kubelet file over the DHCP domains record", map[string]any{"kubelet.resolvConf": "/var/lib/nodedns/dhcp-domains.json"}, "kubelet.resolvConf", "own state file"},
		{"textfile over the kubelet restart record", map[string]any{"metrics.textfile": "/var/lib/nodedns/kubelet-restart.json"}, "metrics.textfile", "own state file"},
		{"kubelet file over the resolved drop-in", map[string]any{"kubelet.resolvConf": "/etc/systemd/resolved.conf.d/zz-nodedns.conf"}, "kubelet.resolvConf", "also a file nodedns manages"},
		{"kubelet file over a networkd drop-in", map[string]any{"kubelet.resolvConf": "/etc/systemd/network/eth0.network.d/nodedns.conf"}, "kubelet.resolvConf", "also a file nodedns manages"},
		{"kubelet file under resolv.conf", map[string]any{"kubelet.resolvConf": "/etc/resolv.conf/x"}, "kubelet.resolvConf", "also a file nodedns manages"},
		{"kubelet file over NetworkManager's intern file", map[string]any{"kubelet.resolvConf": "/var/lib/NetworkManager/NetworkManager-intern.conf"}, "kubelet.resolvConf", "also a file nodedns manages"},
		{"textfile in the dhclient hooks", map[string]any{"metrics.textfile": "/etc/dhcp/dhclient-enter-hooks.d/nodedns.prom"}, "metrics.textfile", "where every file is read as configuration"},
		{"textfile in netplan's directory", map[string]any{"metrics.textfile": "/etc/netplan/nodedns.prom"}, "metrics.textfile", "where every file is read as configuration"},
		{"textfile over the kubelet file", map[string]any{"metrics.textfile": "/var/lib/nodedns/resolv.conf"}, "kubelet.resolvConf", "is also the file of metrics.textfile"},
		{"the check's textfile over the kubelet file", map[string]any{"metrics.textfile": "/srv/dns.prom", "kubelet.resolvConf": "/srv/dns_check.prom"}, "kubelet.resolvConf", "is also the file of metrics.textfile"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.FromSettings(tt.settings, node.Writes()...)
			var ce *config.Error
			if !errors.As(err, &ce) || ce.Key != tt.key {
				t.Fatalf("FromSettings = %v, want a config error naming %s", err, tt.key)
			}
			if !strings.Contains(err.Error(), "config key "+tt.key+": ") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v\nwant it to name the key and say %q", err, tt.want)
			}
		})
	}
}

func TestPathKeysThatAreFine(t *testing.T) {
	for _, s := range []map[string]any{
		{},
		{"metrics.textfile": ""},
		{"kubelet.resolvConf": "/etc/kubernetes/resolv.conf"},
		{"kubelet.resolvConf": "/var/lib/nodedns/kubelet-resolv.conf"},
		{"metrics.textfile": "/srv/prom/dns.prom", "kubelet.resolvConf": "/srv/prom/resolv.conf"},
	} {
		if _, err := config.FromSettings(s, node.Writes()...); err != nil {
			t.Errorf("FromSettings(%v) = %v", s, err)
		}
	}
}

func TestChecksTextfile(t *testing.T) {
	for in, want := range map[string]string{
		"":                           "",
		"/var/lib/x/nodedns.prom":    "/var/lib/x/nodedns_check.prom",
		"/var/lib/x/nodedns.metrics": "/var/lib/x/nodedns.metrics_check.prom",
	} {
		if got := config.ChecksTextfile(in); got != want {
			t.Errorf("config.ChecksTextfile(%q) = %q, want %q", in, got, want)
		}
	}
}
