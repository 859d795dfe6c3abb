package packaging_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.yaml.in/yaml/v3"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/kubelet"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/probes"
)

// unitFile is a systemd unit as systemd 252 reads it: sections of keys, each key's values in order
// (a repeated key accumulates; an empty assignment resets it).
type unitFile map[string]map[string][]string

func parseUnit(t *testing.T, data []byte) unitFile {
	t.Helper()
	u := unitFile{}
	sec := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[' && strings.HasSuffix(line, "]"):
			sec = line[1 : len(line)-1]
			if u[sec] == nil {
				u[sec] = map[string][]string{}
			}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || sec == "" {
				t.Fatalf("unit line %d: %q is not key=value inside a section", n, line)
			}
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if v == "" {
				u[sec][k] = []string{}
				continue
			}
			u[sec][k] = append(u[sec][k], v)
		}
	}
	return u
}

// words returns every space-separated word of a key's values.
func (u unitFile) words(sec, key string) []string {
	var out []string
	for _, v := range u[sec][key] {
		out = append(out, strings.Fields(v)...)
	}
	return out
}

func (u unitFile) one(t *testing.T, sec, key string) string {
	t.Helper()
	vs := u[sec][key]
	if len(vs) != 1 {
		t.Errorf("[%s] %s: want exactly one value, got %q", sec, key, vs)
		return ""
	}
	return vs[0]
}

func readRepo(t *testing.T, p string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", p))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestShippedConfigs parses every file the packages and the role ship, the way the program that
// reads it will (node-problem-detector's TestShippedConfigs idea).
func TestShippedConfigs(t *testing.T) {
	t.Run("systemd unit", testUnit)
	t.Run("default config", testDefaultConfig)
	t.Run("node-problem-detector plugin", testNPD)
	t.Run("nfpm.yaml", testNfpm)
	t.Run("ansible role", testAnsibleSyntax)
}

func testUnit(t *testing.T) {
	u := parseUnit(t, readRepo(t, "packaging/systemd/nodedns.service"))
	// What the issue and docs/contract.md fix.
	for _, want := range []struct{ sec, key, val string }{
		{"Service", "Type", "notify"},
		{"Service", "ExecStart", "/usr/bin/nodedns run"},
		// `systemctl reload nodedns` (run --help) sends the SIGHUP that re-reads the config.
		{"Service", "ExecReload", "/bin/kill -HUP $MAINPID"},
		{"Service", "Restart", "on-failure"},
		{"Service", "NotifyAccess", "main"},
		{"Service", "ProtectSystem", "strict"},
		{"Service", "ProtectHome", "yes"},
		{"Service", "PrivateTmp", "yes"},
		{"Service", "NoNewPrivileges", "yes"},
		{"Install", "WantedBy", "multi-user.target"},
	} {
		if got := u.one(t, want.sec, want.key); got != want.val {
			t.Errorf("[%s] %s=%q, want %q", want.sec, want.key, got, want.val)
		}
	}
	if !slices.Contains(u.words("Unit", "Before"), "kubelet.service") {
		t.Errorf("Before=%v lacks kubelet.service (boot.persistence checks it)", u.words("Unit", "Before"))
	}
	for _, after := range []string{"systemd-resolved.service", "systemd-networkd.service"} {
		if !slices.Contains(u.words("Unit", "After"), after) {
			t.Errorf("After=%v lacks %s", u.words("Unit", "After"), after)
		}
	}
	wd, err := time.ParseDuration(u.one(t, "Service", "WatchdogSec"))
	if err != nil || wd < 10*time.Second {
		t.Errorf("WatchdogSec=%q: want a duration of at least 10s (%v)", u.one(t, "Service", "WatchdogSec"), err)
	}
	if diff := cmp.Diff([]string{"AF_UNIX", "AF_NETLINK", "AF_INET", "AF_INET6"}, u.words("Service", "RestrictAddressFamilies"), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("RestrictAddressFamilies (-want +got):\n%s", diff)
	}
	allowedCaps := []string{"CAP_NET_ADMIN", "CAP_CHOWN"}
	caps := u.words("Service", "CapabilityBoundingSet")
	if len(caps) == 0 {
		t.Error("no CapabilityBoundingSet: the daemon would keep every capability")
	}
	for _, c := range caps {
		if !slices.Contains(allowedCaps, c) {
			t.Errorf("CapabilityBoundingSet has %s, which nodedns does not use", c)
		}
	}
	filters := u.words("Service", "SystemCallFilter")
	if len(filters) == 0 {
		t.Error("no SystemCallFilter")
	}
	// CAP_CHOWN is there for chown(2): ~@privileged alone would take the system call away again.
	if slices.Contains(caps, "CAP_CHOWN") && slices.Contains(filters, "~@privileged") && !slices.Contains(filters, "@chown") {
		t.Error("SystemCallFilter denies @privileged without allowing @chown back: CAP_CHOWN would be useless")
	}

	// ProtectSystem=strict makes everything read-only: every file nodedns writes must be under a
	// ReadWritePaths= entry or its StateDirectory=, or the daemon fails with EROFS on a real node.
	writable := []string{}
	for _, p := range u.words("Service", "ReadWritePaths") {
		writable = append(writable, strings.TrimLeft(p, "-+"))
	}
	for _, d := range u.words("Service", "StateDirectory") {
		writable = append(writable, "/var/lib/"+d)
	}
	def := config.Default()
	targets := []string{
		node.EtcResolvConf, node.ResolvedDropIn, node.DhclientHook, "/etc/netplan/90-nodedns.yaml",
		def.Kubelet.ResolvConf, config.StateDir + "/backup/manifest.json", def.Metrics.Textfile,
		config.StateDir + "/tmp/nodedns-netplan-1-1/etc/netplan/90-nodedns.yaml",
	}
	targets = append(targets, node.Writes()...)
	for _, target := range targets {
		if slices.Contains(kubelet.Writes(), target) {
			continue // kubelet.manage's: writable with its drop-in (TestKubeletManageDropIn)
		}
		// The atomic write renames a temp file in the target's directory: the directory must be writable.
		dir := path.Dir(target)
		if !slices.ContainsFunc(writable, func(w string) bool { return dir == w || strings.HasPrefix(dir, w+"/") }) {
			t.Errorf("nodedns writes %s, but its directory %s is not under ReadWritePaths/StateDirectory %v", target, dir, writable)
		}
	}
}

// uncomment turns the shipped config's commented keys into live ones: "#key:" at the top level and
// "#  key:" nested. Explanatory comments ("# text", "#  # text") stay comments.
var commentedKey = regexp.MustCompile(`^#( {2})*[A-Za-z]`)

func uncomment(data []byte) []byte {
	var b bytes.Buffer
	for _, line := range strings.SplitAfter(string(data), "\n") {
		if commentedKey.MatchString(line) {
			line = line[1:]
		}
		b.WriteString(line)
	}
	return b.Bytes()
}

// flatten turns nested YAML maps into dotted keys, as viper hands them to config.FromSettings.
func flatten(prefix string, m map[string]any, out map[string]any) {
	for k, v := range m {
		key := k
		if prefix != "" {
			key = prefix + "." + k
		}
		if sub, ok := v.(map[string]any); ok {
			flatten(key, sub, out)
			continue
		}
		out[key] = v
	}
}

func settingsOf(t *testing.T, data []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatalf("YAML: %v\n%s", err, data)
	}
	out := map[string]any{}
	flatten("", m, out)
	return out
}

func testDefaultConfig(t *testing.T) {
	data := readRepo(t, "packaging/etc/config.yaml")
	// As shipped: everything commented out, so the built-in defaults apply.
	asShipped := settingsOf(t, data)
	if len(asShipped) != 0 {
		t.Errorf("the shipped config sets %v; every key must be commented out", asShipped)
	}
	c, err := config.FromSettings(asShipped)
	if err != nil {
		t.Fatalf("config.FromSettings(shipped): %v", err)
	}
	if diff := cmp.Diff(config.Default(), c, cmpopts.EquateEmpty(), cmpopts.EquateComparable()); diff != "" {
		t.Errorf("shipped config differs from the defaults (-want +got):\n%s", diff)
	}

	// Uncommented: every documented value must be the default, and every key must be known.
	live := settingsOf(t, uncomment(data))
	c, err = config.FromSettings(live)
	if err != nil {
		t.Fatalf("the shipped config's commented values are not valid once uncommented: %v", err)
	}
	if diff := cmp.Diff(config.Default(), c, cmpopts.EquateEmpty(), cmpopts.EquateComparable()); diff != "" {
		t.Errorf("a commented value in the shipped config is not the default (-default +documented):\n%s", diff)
	}
	// And every key nodedns knows is documented there.
	documented := map[string]bool{}
	for k := range live {
		documented[strings.ToLower(k)] = true
	}
	for _, k := range config.KeyNames() {
		if !documented[strings.ToLower(k)] {
			t.Errorf("config key %s is not documented in packaging/etc/config.yaml", k)
		}
	}
}

// npdConfig mirrors node-problem-detector's custom plugin monitor config
// (pkg/custompluginmonitor/types/config.go); unknown fields are rejected.
type npdConfig struct {
	Plugin       string `json:"plugin"`
	PluginConfig struct {
		InvokeInterval string `json:"invoke_interval"`
		Timeout        string `json:"timeout"`
		MaxOutputLen   *int   `json:"max_output_length"`
		Concurrency    *int   `json:"concurrency"`
		MessageChange  *bool  `json:"enable_message_change_based_condition_update"`
		SkipInitial    *bool  `json:"skip_initial_status"`
	} `json:"pluginConfig"`
	Source           string `json:"source"`
	MetricsReporting *bool  `json:"metricsReporting"`
	Conditions       []struct {
		Type    string `json:"type"`
		Reason  string `json:"reason"`
		Message string `json:"message"`
	} `json:"conditions"`
	Rules []struct {
		Type      string   `json:"type"`
		Condition string   `json:"condition"`
		Reason    string   `json:"reason"`
		Path      string   `json:"path"`
		Args      []string `json:"args"`
		Timeout   string   `json:"timeout"`
	} `json:"rules"`
}

func testNPD(t *testing.T) {
	data := readRepo(t, "packaging/npd/nodedns-monitor.json")
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var c npdConfig
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("NPD config: %v", err)
	}
	// NPD's own validation (ApplyConfiguration + Validate).
	if c.Plugin != "custom" {
		t.Errorf("plugin %q: NPD supports only \"custom\"", c.Plugin)
	}
	interval, err := time.ParseDuration(c.PluginConfig.InvokeInterval)
	if err != nil {
		t.Errorf("invoke_interval: %v", err)
	}
	global, err := time.ParseDuration(c.PluginConfig.Timeout)
	if err != nil {
		t.Errorf("timeout: %v", err)
	}
	if c.Source == "" {
		t.Error("no source")
	}
	if len(c.Rules) == 0 {
		t.Fatal("no rules")
	}
	conds := map[string]bool{}
	for _, cd := range c.Conditions {
		if cd.Type == "" || cd.Reason == "" || cd.Message == "" {
			t.Errorf("condition %+v: type, reason and message are all needed", cd)
		}
		conds[cd.Type] = true
	}
	for _, r := range c.Rules {
		rt, err := time.ParseDuration(r.Timeout)
		if err != nil {
			t.Errorf("rule %s timeout: %v", r.Reason, err)
		} else if rt > global {
			t.Errorf("rule %s timeout %v is over the global timeout %v (NPD rejects the config)", r.Reason, rt, global)
		} else if worst := probes.ProbeRounds*config.Default().Probes.Timeout + 2*time.Second; rt < worst {
			// A node where every probe times out (the cache down, pods cut off) must still get its
			// message through, not NPD's timeout.
			t.Errorf("rule %s timeout %v is below a check's worst case of %v (%d DNS rounds of probes.timeout)", r.Reason, rt, worst, probes.ProbeRounds)
		}
		if r.Type != "permanent" && r.Type != "temporary" {
			t.Errorf("rule %s type %q: permanent or temporary", r.Reason, r.Type)
		}
		if r.Type == "permanent" && !conds[r.Condition] {
			t.Errorf("permanent rule %s: condition %q has no default condition (NPD rejects the config)", r.Reason, r.Condition)
		}
		// NPD checks the path exists on the node: it must be where the packages put the binary.
		if r.Path != "/usr/bin/nodedns" {
			t.Errorf("rule %s path %q: the packages install /usr/bin/nodedns", r.Reason, r.Path)
		}
		if !slices.Contains(r.Args, "--npd") || r.Args[0] != "check" {
			t.Errorf("rule %s args %q: want check --npd (one line, NPD's exit codes)", r.Reason, r.Args)
		}
	}
	// Sane scheduling: one check at a time, finished well before the next, message not cut.
	if global >= interval {
		t.Errorf("timeout %v is not below invoke_interval %v", global, interval)
	}
	if c.PluginConfig.Concurrency == nil || *c.PluginConfig.Concurrency != 1 {
		t.Error("concurrency: want 1 (one nodedns check at a time)")
	}
	if c.PluginConfig.MaxOutputLen == nil || *c.PluginConfig.MaxOutputLen < probes.NPDMaxLen {
		t.Errorf("max_output_length must be at least %d, the length of `check --npd`", probes.NPDMaxLen)
	}
	if !slices.ContainsFunc(c.Rules, func(r struct {
		Type      string   `json:"type"`
		Condition string   `json:"condition"`
		Reason    string   `json:"reason"`
		Path      string   `json:"path"`
		Args      []string `json:"args"`
		Timeout   string   `json:"timeout"`
	}) bool {
		return r.Type == "permanent" && r.Condition == "NodeDNSMisconfigured"
	}) {
		t.Error("no permanent rule sets the NodeDNSMisconfigured condition")
	}
}

// nfpmConfig is the part of nfpm.yaml the tests check.
type nfpmConfig struct {
	Name     string `yaml:"name"`
	Contents []struct {
		Src      string `yaml:"src"`
		Dst      string `yaml:"dst"`
		Type     string `yaml:"type"`
		Packager string `yaml:"packager"`
		FileInfo struct {
			Mode int `yaml:"mode"`
		} `yaml:"file_info"`
	} `yaml:"contents"`
	Overrides map[string]struct {
		Scripts map[string]string `yaml:"scripts"`
	} `yaml:"overrides"`
}

func loadNfpm(t *testing.T) nfpmConfig {
	t.Helper()
	var c nfpmConfig
	if err := yaml.Unmarshal(readRepo(t, "nfpm.yaml"), &c); err != nil {
		t.Fatalf("nfpm.yaml: %v", err)
	}
	return c
}

func testNfpm(t *testing.T) {
	c := loadNfpm(t)
	dst := map[string]map[string]string{"deb": {}, "rpm": {}} // packager -> dst -> type
	for _, f := range c.Contents {
		if !strings.HasPrefix(f.Src, "dist/") && !strings.HasPrefix(f.Src, "bin/") {
			if _, err := os.Stat(filepath.Join("..", f.Src)); err != nil {
				t.Errorf("content %s: %v", f.Src, err)
			}
		}
		for _, p := range []string{"deb", "rpm"} {
			if f.Packager == "" || f.Packager == p {
				dst[p][f.Dst] = f.Type
			}
		}
	}
	for _, p := range []string{"deb", "rpm"} {
		for _, want := range []string{"/usr/bin/nodedns", "/etc/nodedns/config.yaml", "/usr/share/man/man1/nodedns.1.gz"} {
			if _, ok := dst[p][want]; !ok {
				t.Errorf("%s package lacks %s", p, want)
			}
		}
		if typ := dst[p]["/etc/nodedns/config.yaml"]; !strings.HasPrefix(typ, "config") {
			t.Errorf("%s: /etc/nodedns/config.yaml has type %q, want a config file (kept on upgrade)", p, typ)
		}
	}
	// The unit goes where node.readUnit (boot.persistence) and systemd look first on each family.
	if _, ok := dst["deb"]["/lib/systemd/system/nodedns.service"]; !ok {
		t.Error("deb: the unit is not in /lib/systemd/system")
	}
	if _, ok := dst["rpm"]["/usr/lib/systemd/system/nodedns.service"]; !ok {
		t.Error("rpm: the unit is not in /usr/lib/systemd/system")
	}
	for p, o := range c.Overrides {
		for kind, script := range o.Scripts {
			fi, err := os.Stat(filepath.Join("..", script))
			if err != nil {
				t.Errorf("%s %s script: %v", p, kind, err)
				continue
			}
			if fi.Mode().Perm()&0o111 == 0 {
				t.Errorf("%s %s script %s is not executable", p, kind, script)
			}
			if out, err := exec.Command("sh", "-n", filepath.Join("..", script)).CombinedOutput(); err != nil {
				t.Errorf("%s %s script %s: sh -n: %v\n%s", p, kind, script, err, out)
			}
		}
	}
	// Purge (deb) and erase (rpm) run `nodedns restore`.
	for script, why := range map[string]string{
		c.Overrides["deb"].Scripts["postremove"]: "deb postrm (purge)",
		c.Overrides["rpm"].Scripts["preremove"]:  "rpm %preun (erase)",
	} {
		if !strings.Contains(string(readRepo(t, script)), " restore") {
			t.Errorf("%s (%s) does not run nodedns restore", script, why)
		}
	}
}

func testAnsibleSyntax(t *testing.T) {
	ap, err := exec.LookPath("ansible-playbook")
	if err != nil {
		t.Skip("ansible-playbook not installed (.ci/run installs Debian's ansible)")
	}
	cmd := exec.Command(ap, "-i", "localhost,", "--syntax-check", "playbook.yml")
	cmd.Dir = "ansible"
	cmd.Env = append(os.Environ(), "ANSIBLE_ROLES_PATH=roles", "ANSIBLE_LOCAL_TEMP="+t.TempDir(), "HOME="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("ansible-playbook --syntax-check: %v\n%s", err, out)
	}
}

// TestSecurityScore is the hardening gate: systemd-analyze's offline exposure score of the shipped
// unit must stay at most 2.0. systemd 252 takes --threshold as an integer in tenths (2.0 -> 20;
// "2.0" fails to parse), and exits 1 above it.
func TestSecurityScore(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "nodedns.service"), readRepo(t, "packaging/systemd/nodedns.service"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sa, "security", "--offline=true", "--threshold=20", filepath.Join(dir, "nodedns.service")).CombinedOutput()
	score := regexp.MustCompile(`Overall exposure level for nodedns.service: ([0-9.]+)`).FindSubmatch(out)
	if score == nil {
		t.Fatalf("systemd-analyze printed no score (%v):\n%s", err, out)
	}
	t.Logf("exposure %s (threshold 2.0)", score[1])
	if err != nil {
		t.Errorf("exposure %s is over 2.0 (%v):\n%s", score[1], err, out)
	}
}

// TestStandbyDropIn: the standby's drop-in grants exactly what the standby needs (the capability to
// bind port 53, a raw socket and iptables' lock for iptables-legacy-restore, and IP traffic to and
// from pods and upstreams) and nothing else; the base unit keeps
// its 2.0 (TestSecurityScore). The exposure with the drop-in is logged: it is the price of the
// opt-in, shown to whoever turns it on.
func TestStandbyDropIn(t *testing.T) {
	data := readRepo(t, "packaging/systemd/standby.conf")
	var keys []string
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || line == "[Service]" {
			continue
		}
		keys = append(keys, line)
	}
	want := []string{"CapabilityBoundingSet=CAP_NET_BIND_SERVICE CAP_NET_RAW", "ReadWritePaths=-/run/xtables.lock", "IPAddressAllow=any"}
	if strings.Join(keys, "\n") != strings.Join(want, "\n") {
		t.Errorf("standby.conf sets %q, want exactly %q", keys, want)
	}
	nfpm := string(readRepo(t, "nfpm.yaml"))
	if !strings.Contains(nfpm, "src: packaging/systemd/standby.conf\n    dst: /usr/share/nodedns/systemd/standby.conf") {
		t.Errorf("nfpm.yaml does not ship standby.conf inactive under /usr/share/nodedns/systemd")
	}
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed")
	}
	dir := t.TempDir()
	unit := append(readRepo(t, "packaging/systemd/nodedns.service"), append([]byte("\n"), data...)...)
	if err := os.WriteFile(filepath.Join(dir, "nodedns.service"), unit, 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command(sa, "security", "--offline=true", "--threshold=100", filepath.Join(dir, "nodedns.service")).CombinedOutput()
	score := regexp.MustCompile(`Overall exposure level for nodedns.service: ([0-9.]+)`).FindSubmatch(out)
	if score == nil {
		t.Fatalf("systemd-analyze printed no score:\n%s", out)
	}
	t.Logf("exposure with the standby drop-in: %s (the base unit's is at most 2.0)", score[1])
}

// TestKubeletManageDropIn: kubelet.manage's drop-in (docs/contract.md "kubelet.manage") makes every
// file kubelet.manage may change writable under the unit's ProtectSystem=strict, grants no
// capability (the running kubelet is verified without CAP_SYS_PTRACE: TestKubeletVerifiedUnderUnit),
// adds nothing else, and is needed (the base unit alone cannot write /var/lib/kubelet); systemd 252's `systemd-analyze verify` loads the
// unit with it without a complaint about it. The exposure with it is logged, the price of the
// opt-in (the base unit keeps its 2.0: TestSecurityScore).
func TestKubeletManageDropIn(t *testing.T) {
	data := readRepo(t, "packaging/systemd/kubelet-manage.conf")
	drop := parseUnit(t, data)
	if len(drop) != 1 || len(drop["Service"]) != 1 || strings.Join(drop.words("Service", "ReadWritePaths"), " ") != "-/var/lib/kubelet" {
		t.Errorf("kubelet-manage.conf sets %v, want exactly ReadWritePaths=-/var/lib/kubelet", drop)
	}
	nfpm := string(readRepo(t, "nfpm.yaml"))
	if !strings.Contains(nfpm, "src: packaging/systemd/kubelet-manage.conf\n    dst: /usr/share/nodedns/systemd/kubelet-manage.conf") {
		t.Errorf("nfpm.yaml does not ship kubelet-manage.conf inactive under /usr/share/nodedns/systemd")
	}
	base := parseUnit(t, readRepo(t, "packaging/systemd/nodedns.service"))
	if base.one(t, "Service", "ProtectSystem") != "strict" {
		t.Fatal("the unit is no longer ProtectSystem=strict: this test's premise is gone")
	}
	writable := func(u []unitFile, p string) bool {
		for _, f := range u {
			for _, w := range f.words("Service", "ReadWritePaths") {
				w = strings.TrimPrefix(w, "-")
				if p == w || strings.HasPrefix(p, w+"/") {
					return true
				}
			}
		}
		return false
	}
	needed := false
	for _, pat := range kubelet.Writes() {
		// The directory an atomic write renames in: the pattern's part before its first wildcard.
		dir := path.Dir(pat)
		if i := strings.IndexAny(dir, "*?["); i >= 0 {
			dir = path.Dir(dir[:i] + "x")
		}
		if !writable([]unitFile{base, drop}, dir) {
			t.Errorf("kubelet.manage may change %s, but %s is read-only under the unit and its drop-in", pat, dir)
		}
		if !writable([]unitFile{base}, dir) {
			needed = true
		}
	}
	if !needed {
		t.Error("every file kubelet.manage changes is writable without the drop-in: it grants what is not needed")
	}
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed")
	}
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "nodedns.service.d"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "nodedns.service"), readRepo(t, "packaging/systemd/nodedns.service"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "nodedns.service.d", "kubelet-manage.conf"), data, 0o644))
	// The binary is not installed here: the test's own drop-in names one that exists.
	must(t, os.WriteFile(filepath.Join(dir, "nodedns.service.d", "zz-test.conf"), []byte("[Service]\nExecStart=\nExecStart=/bin/true\nExecReload=\n"), 0o644))
	cmd := exec.Command(sa, "verify", "--man=no", "nodedns.service")
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "SYSTEMD_UNIT_PATH="+dir+":")
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Contains(string(out), "kubelet-manage.conf") {
		t.Errorf("systemd-analyze verify with the drop-in: %v\n%s", err, out)
	}
	unit := append(readRepo(t, "packaging/systemd/nodedns.service"), append([]byte("\n"), data...)...)
	must(t, os.WriteFile(filepath.Join(dir, "merged.service"), unit, 0o644))
	out, _ = exec.Command(sa, "security", "--offline=true", "--threshold=100", filepath.Join(dir, "merged.service")).CombinedOutput()
	score := regexp.MustCompile(`Overall exposure level for merged.service: ([0-9.]+)`).FindSubmatch(out)
	if score == nil {
		t.Fatalf("systemd-analyze printed no score:\n%s", out)
	}
	t.Logf("exposure with the kubelet-manage drop-in: %s (the base unit's is at most 2.0)", score[1])
}
