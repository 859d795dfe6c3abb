package config

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// DefaultMetricsTextfile is where nodedns writes its metrics for node_exporter's textfile collector
// (--collector.textfile.directory): the directory kubespray and the common node_exporter roles use.
const DefaultMetricsTextfile = "/var/lib/node_exporter/textfile_collector/nodedns.prom"

// Metrics configures how nodedns reports its metrics.
type Metrics struct {
	// Textfile is the node_exporter textfile nodedns rewrites (atomically) after each check and
	// reconcile; "" turns it off. nodedns never creates the directory: no node_exporter, no file.
	Textfile string
	// Listen is an address for a Prometheus /metrics listener; "" (the default) means no listening
	// socket at all. A bare port ("9153" or ":9153") binds loopback only: exposing the node's DNS
	// state on every interface must be asked for with an explicit host.
	Listen string
}

// metricsKeys are the metrics section's keys, the last of keys.
var metricsKeys = []key{
	{"metrics.textfile", DefaultMetricsTextfile, func(c *Config, v any) error {
		s, err := str(v)
		if err == nil && s != "" && !strings.HasPrefix(s, "/") {
			err = fmt.Errorf("%q is not an absolute path (\"\" turns the textfile off)", s)
		}
		c.Metrics.Textfile = s
		return err
	}},
	{"metrics.listen", "", func(c *Config, v any) error {
		s, err := listenAddr(v)
		c.Metrics.Listen = s
		return err
	}},
}

// listenAddr validates a listen address and makes a bare port loopback-only. YAML may give the port
// as a number.
func listenAddr(v any) (string, error) {
	var s string
	switch t := v.(type) {
	case int, int64, float64:
		n, err := integer(t)
		if err != nil {
			return "", err
		}
		s = strconv.Itoa(n)
	default:
		var err error
		if s, err = str(v); err != nil {
			return "", err
		}
	}
	if s == "" {
		return "", nil
	}
	if !strings.Contains(s, ":") {
		s = ":" + s
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", fmt.Errorf("%q is not host:port or a port", s)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("port %q is not a number from 1 to 65535", port)
	}
	switch {
	case host == "":
		host = "127.0.0.1"
	case host == "localhost":
	default:
		if _, err := netip.ParseAddr(host); err != nil {
			return "", fmt.Errorf("host %q is not an IP address or localhost", host)
		}
	}
	return net.JoinHostPort(host, port), nil
}
