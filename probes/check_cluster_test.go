package probes

import (
	"context"
	"strings"
	"testing"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/policy"
	"github.com/nodedns/nodedns/resolvconf"
)

// TestClusterSearchOnHost: kubespray's cluster search domains on the host are a problem once the
// cache is no longer among the host's resolvers, and while it still is, since they go with it: the
// plan removes both together (docs/contract.md "Cluster search domains on the host", "Check and plan
// agree").
func TestClusterSearchOnHost(t *testing.T) {
	tests := []struct {
		name  string
		file  string
		route bool
		want  Status
		say   string
	}{
		{"cache gone, cluster domains stay", "domain cluster.local\nsearch default.svc.cluster.local svc.cluster.local.\nnameserver 10.66.0.53\n", false, Problem, "cluster search domain default.svc.cluster.local, svc.cluster.local. on the host search list"},
		{"the cache still serves the host: they go with it", "search default.svc.cluster.local svc.cluster.local\nnameserver 169.254.25.10\nnameserver 10.66.0.53\n", false, Problem, "it goes with the cache (resolvconf.loop)"},
		{"routeClusterDomainToCache keeps them", "search svc.cluster.local\nnameserver 10.66.0.53\n", true, OK, ""},
		{"no cluster domain", "search corp.example\nnameserver 10.66.0.53\n", false, OK, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := resolvconf.Parse([]byte(tc.file))
			if err != nil {
				t.Fatal(err)
			}
			cfg := config.Default()
			cfg.Host.RouteClusterDomainToCache = tc.route
			s := &node.Snapshot{ResolvConf: node.ResolvFile{Path: node.EtcResolvConf, Target: node.EtcResolvConf, Exists: true, File: f, Data: []byte(tc.file)}}
			env := &Env{Snapshot: s, Config: cfg, Plan: policy.Compute(s, cfg)}
			r := resolvConfSearch{}.Run(context.Background(), env)
			if r.Status != tc.want || !strings.Contains(r.Message, tc.say) {
				t.Errorf("%s %q (hint %q)", r.Status, r.Message, r.Hint)
			}
			// Agreement: a problem here is one the plan fixes.
			if r.Status == Problem && len(env.Plan.Changes) == 0 {
				t.Errorf("check reports %q but the plan changes nothing", r.Message)
			}
		})
	}
}
