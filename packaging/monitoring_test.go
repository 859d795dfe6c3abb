package packaging

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/nodedns/nodedns/internal/metrics"
)

// promtool finds Prometheus's promtool: on PATH, else where .ci/run unpacks it (NODEDNS_PROMTOOL).
func promtool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	if p := os.Getenv("NODEDNS_PROMTOOL"); p != "" {
		return p
	}
	t.Skip("promtool not installed (.ci/run provides it as NODEDNS_PROMTOOL)")
	return ""
}

// TestAlertRules checks the shipped rules with Prometheus's own tools: they parse, and each alert
// fires on the series that mean it and stays quiet otherwise (nodedns.rules_test.yml).
func TestAlertRules(t *testing.T) {
	pt := promtool(t)
	for _, args := range [][]string{
		{"check", "rules", "nodedns.rules.yml"},
		{"test", "rules", "nodedns.rules_test.yml"},
	} {
		cmd := exec.Command(pt, args...)
		cmd.Dir = "prometheus"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestEveryAlertHasATestCase: every alert of the shipped rules has a case in nodedns.rules_test.yml
// (promtool test rules, TestAlertRules) where it fires, with the labels and annotations it fires
// with; an alert only ever expected to stay quiet is untested. A case for an alert the rules do
// not have (a renamed one) fails too.
func TestEveryAlertHasATestCase(t *testing.T) {
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	var cases struct {
		Tests []struct {
			Name          string `yaml:"name"`
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []struct {
					ExpLabels map[string]string `yaml:"exp_labels"`
				} `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	for f, v := range map[string]any{"prometheus/nodedns.rules.yml": &rules, "prometheus/nodedns.rules_test.yml": &cases} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, v); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	fires := map[string]bool{}
	tested := map[string]bool{}
	for _, tc := range cases.Tests {
		for _, a := range tc.AlertRuleTest {
			tested[a.Alertname] = true
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			}
		}
	}
	alerts := map[string]bool{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts[r.Alert] = true
			if !fires[r.Alert] {
				t.Errorf("alert %s has no case in nodedns.rules_test.yml where it fires", r.Alert)
			}
		}
	}
	if len(alerts) == 0 {
		t.Fatal("no alert found in nodedns.rules.yml")
	}
	for a := range tested {
		if !alerts[a] {
			t.Errorf("nodedns.rules_test.yml tests alert %s, which nodedns.rules.yml does not have", a)
		}
	}
}

// exported is every metric family nodedns exports: a daemon's Recorder that has seen everything.
func exported(t *testing.T) []string {
	t.Helper()
	r := metrics.NewRecorder(metrics.SourceRun, "1.0.0")
	r.ObserveChecks([]metrics.Check{{ID: "dns.loop", Status: "ok"}})
	r.Reconciled(1, false)
	r.WriterBackoff("/etc/resolv.conf")
	r.StandbyEnabled()
	var names []string
	for _, f := range r.Families() {
		names = append(names, f.Name)
	}
	return names
}

var metricName = regexp.MustCompile(`\bnodedns_[a-z_]+\b`)

// TestMonitoringNamesExportedMetrics: the rules and the dashboard use only series nodedns exports
// (a renamed metric would leave an alert that can never fire), the dashboard shows every family,
// and docs/metrics.md documents every family.
func TestMonitoringNamesExportedMetrics(t *testing.T) {
	names := exported(t)

	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	data, err := os.ReadFile("prometheus/nodedns.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &rules); err != nil {
		t.Fatal(err)
	}
	nrules := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			nrules++
			for _, m := range metricName.FindAllString(r.Expr, -1) {
				if !slices.Contains(names, m) {
					t.Errorf("alert %s uses %s, which nodedns does not export (exported: %v)", r.Alert, m, names)
				}
			}
		}
	}
	if nrules < 5 {
		t.Errorf("only %d alert rules", nrules)
	}

	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	data, err = os.ReadFile("grafana/nodedns.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("grafana/nodedns.json: %v", err)
	}
	shown := map[string]bool{}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("dashboard panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, m := range metricName.FindAllString(tg.Expr, -1) {
				if !slices.Contains(names, m) {
					t.Errorf("dashboard panel %q uses %s, which nodedns does not export", p.Title, m)
				}
				shown[m] = true
			}
		}
	}
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if !shown[n] {
			t.Errorf("the dashboard shows no panel of %s", n)
		}
		if !strings.Contains(string(doc), "| `"+n+"` |") {
			t.Errorf("docs/metrics.md has no row for %s", n)
		}
	}
}
