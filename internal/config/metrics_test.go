package config

import (
	"net"
	"strings"
	"testing"
)

func TestMetricsKeys(t *testing.T) {
	tests := []struct {
		name     string
		settings map[string]any
		textfile string
		listen   string
		wantErr  string
	}{
		{name: "defaults: textfile on, no listener", settings: map[string]any{}, textfile: DefaultMetricsTextfile},
		{name: "textfile off", settings: map[string]any{"metrics.textfile": ""}},
		{name: "textfile elsewhere", settings: map[string]any{"metrics.textfile": "/srv/prom/dns.prom"}, textfile: "/srv/prom/dns.prom"},
		{name: "relative textfile", settings: map[string]any{"metrics.textfile": "nodedns.prom"}, wantErr: "config key metrics.textfile: value \"nodedns.prom\": \"nodedns.prom\" is not an absolute path"},
		{name: "bare port binds loopback", settings: map[string]any{"metrics.listen": "9153"}, textfile: DefaultMetricsTextfile, listen: "127.0.0.1:9153"},
		{name: "YAML number port", settings: map[string]any{"metrics.listen": 9153}, textfile: DefaultMetricsTextfile, listen: "127.0.0.1:9153"},
		{name: "colon port binds loopback", settings: map[string]any{"metrics.listen": ":9153"}, textfile: DefaultMetricsTextfile, listen: "127.0.0.1:9153"},
		{name: "explicit host", settings: map[string]any{"metrics.listen": "0.0.0.0:9153"}, textfile: DefaultMetricsTextfile, listen: "0.0.0.0:9153"},
		{name: "IPv6 loopback", settings: map[string]any{"metrics.listen": "[::1]:9153"}, textfile: DefaultMetricsTextfile, listen: "[::1]:9153"},
		{name: "localhost", settings: map[string]any{"metrics.listen": "localhost:9153"}, textfile: DefaultMetricsTextfile, listen: "localhost:9153"},
		{name: "port out of range", settings: map[string]any{"metrics.listen": "70000"}, wantErr: "config key metrics.listen: value \"70000\": port \"70000\" is not a number from 1 to 65535"},
		{name: "host name", settings: map[string]any{"metrics.listen": "metrics.example:9153"}, wantErr: "host \"metrics.example\" is not an IP address or localhost"},
		{name: "garbage", settings: map[string]any{"metrics.listen": "a:b:c"}, wantErr: "is not host:port or a port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := FromSettings(tt.settings)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Metrics.Textfile != tt.textfile || c.Metrics.Listen != tt.listen {
				t.Errorf("Metrics = %+v, want textfile %q listen %q", c.Metrics, tt.textfile, tt.listen)
			}
		})
	}
}

// FuzzListenAddr: whatever metrics.listen holds, the result is an error or an address that
// net.Listen accepts syntactically, has a host (never the implicit "all interfaces"), and is
// stable when validated again.
func FuzzListenAddr(f *testing.F) {
	for _, s := range []string{"", "9153", ":9153", "0.0.0.0:1", "[::1]:80", "localhost:9", "a:b:c", "[::1", "1.2.3.4:0", ":65536"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := listenAddr(s)
		if err != nil || got == "" {
			return
		}
		host, _, err := net.SplitHostPort(got)
		if err != nil {
			t.Fatalf("listenAddr(%q) = %q, which does not split: %v", s, got, err)
		}
		if host == "" {
			t.Fatalf("listenAddr(%q) = %q: no host means every interface", s, got)
		}
		again, err := listenAddr(got)
		if err != nil || again != got {
			t.Fatalf("listenAddr(%q) = %q, but again: %q, %v", s, got, again, err)
		}
	})
}
