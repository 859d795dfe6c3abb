package netplan

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const pathA, pathB = "/etc/netplan/a.yaml", "/etc/netplan/b.yaml"

// errorCases are files netplan 0.106 rejects at the level this package
// reads. With netplan=true, TestErrorsAgainstNetplan checks that `netplan
// generate` reports the same line, column and reason.
type errorCase struct {
	name    string
	a, b    string // contents of a.yaml and (if set) b.yaml
	want    string
	netplan bool
}

var errorCases = []errorCase{
	{name: "network scalar", a: "network: 3\n", want: pathA + ":1:10: expected mapping (check indentation)", netplan: true},
	{name: "network null", a: "network:\n", want: pathA + ":1:9: expected mapping (check indentation)", netplan: true},
	{name: "network sequence", a: "network: []\n", want: pathA + ":1:10: expected mapping (check indentation)", netplan: true},
	{name: "top sequence", a: "- a\n", want: pathA + ":1:1: expected mapping (check indentation)", netplan: true},
	{name: "empty document", a: "---\n", want: pathA + ":2:1: expected mapping (check indentation)", netplan: true},
	{name: "ethernets sequence", a: "network:\n  ethernets: []\n", want: pathA + ":2:14: expected mapping (check indentation)", netplan: true},
	{name: "ethernets null", a: "network:\n  ethernets:\n", want: pathA + ":2:13: expected mapping (check indentation)", netplan: true},
	{name: "interface null", a: "network:\n  ethernets:\n    eth0:\n", want: pathA + ":3:10: expected mapping (check indentation)", netplan: true},
	{name: "interface scalar", a: "network:\n  ethernets:\n    eth0: 3\n", want: pathA + ":3:11: expected mapping (check indentation)", netplan: true},
	{name: "dhcp4 maybe", a: "network:\n  ethernets:\n    eth0:\n      dhcp4: maybe\n", want: pathA + ":4:14: invalid boolean value 'maybe'", netplan: true},
	{name: "dhcp4 tilde", a: "network:\n  ethernets:\n    eth0:\n      dhcp4: ~\n", want: pathA + ":4:14: invalid boolean value '~'", netplan: true},
	{name: "dhcp6 empty", a: "network:\n  ethernets:\n    eth0:\n      dhcp6:\n", want: pathA + ":4:13: invalid boolean value ''", netplan: true},
	{name: "dhcp4 sequence", a: "network:\n  ethernets:\n    eth0:\n      dhcp4: [true]\n", want: pathA + ":4:14: expected scalar", netplan: true},
	{name: "mtu word", a: "network:\n  ethernets:\n    eth0:\n      mtu: abc\n", want: pathA + ":4:12: invalid unsigned int value 'abc'", netplan: true},
	{name: "mtu negative", a: "network:\n  ethernets:\n    eth0:\n      mtu: -1\n", want: pathA + ":4:12: invalid unsigned int value '-1'", netplan: true},
	{name: "mtu hex", a: "network:\n  ethernets:\n    eth0:\n      mtu: 0x10\n", want: pathA + ":4:12: invalid unsigned int value '0x10'", netplan: true},
	{name: "mtu too big", a: "network:\n  ethernets:\n    eth0:\n      mtu: 4294967296\n", want: pathA + ":4:12: invalid unsigned int value '4294967296'", netplan: true},
	{name: "nameserver word", a: "network:\n  ethernets:\n    eth0:\n      nameservers: {addresses: [foo]}\n", want: pathA + ":4:32: malformed address 'foo', must be X.X.X.X or X:X:X:X:X:X:X:X", netplan: true},
	{name: "nameserver zone", a: "network:\n  ethernets:\n    eth0:\n      nameservers: {addresses: [\"fe80::1%eth0\"]}\n", want: pathA + ":4:32: malformed address 'fe80::1%eth0', must be X.X.X.X or X:X:X:X:X:X:X:X", netplan: true},
	{name: "nameserver leading zero", a: "network:\n  ethernets:\n    eth0:\n      nameservers: {addresses: [1.2.3.04]}\n", want: pathA + ":4:32: malformed address '1.2.3.04', must be X.X.X.X or X:X:X:X:X:X:X:X", netplan: true},
	{name: "nameservers scalar", a: "network:\n  ethernets:\n    eth0:\n      nameservers: {addresses: 1.1.1.1}\n", want: pathA + ":4:32: expected sequence", netplan: true},
	{name: "nameservers sequence", a: "network:\n  ethernets:\n    eth0:\n      nameservers: []\n", want: pathA + ":4:20: expected mapping (check indentation)", netplan: true},
	{name: "search nested", a: "network:\n  ethernets:\n    eth0:\n      nameservers: {search: [a, [b]]}\n", want: pathA + ":4:33: expected scalar", netplan: true},
	{name: "search scalar", a: "network:\n  ethernets:\n    eth0:\n      nameservers: {search: a}\n", want: pathA + ":4:29: expected sequence", netplan: true},
	{name: "gateway4 word", a: "network:\n  ethernets:\n    eth0:\n      gateway4: foo\n", want: pathA + ":4:17: invalid IPv4 address 'foo'", netplan: true},
	{name: "gateway4 v6", a: "network:\n  ethernets:\n    eth0:\n      gateway4: \"::1\"\n", want: pathA + ":4:17: invalid IPv4 address '::1'", netplan: true},
	{name: "gateway6 v4", a: "network:\n  ethernets:\n    eth0:\n      gateway6: 1.1.1.1\n", want: pathA + ":4:17: invalid IPv6 address '1.1.1.1'", netplan: true},
	{name: "address no prefix", a: "network:\n  ethernets:\n    eth0:\n      addresses: [1.2.3.4]\n", want: pathA + ":4:18: address '1.2.3.4' is missing /prefixlength", netplan: true},
	{name: "address prefix 33", a: "network:\n  ethernets:\n    eth0:\n      addresses: [1.2.3.4/33]\n", want: pathA + ":4:18: invalid prefix length in address '1.2.3.4/33'", netplan: true},
	{name: "address prefix 0", a: "network:\n  ethernets:\n    eth0:\n      addresses:\n        - 1.2.3.4/0\n", want: pathA + ":5:9: invalid prefix length in address '1.2.3.4/0'", netplan: true},
	{name: "address v6 prefix 129", a: "network:\n  ethernets:\n    eth0:\n      addresses: [\"::1/129\"]\n", want: pathA + ":4:18: invalid prefix length in address '::1/129'", netplan: true},
	{name: "address word", a: "network:\n  ethernets:\n    eth0:\n      addresses: [foo/24]\n", want: pathA + ":4:18: malformed address 'foo/24', must be X.X.X.X/NN or X:X:X:X:X:X:X:X/NN", netplan: true},
	{name: "address nested", a: "network:\n  ethernets:\n    eth0: {addresses: [[a]]}\n", want: pathA + ":3:24: expected either scalar or mapping (check indentation)", netplan: true},
	{name: "address options null", a: "network:\n  ethernets:\n    eth0: {addresses: [{\"1.2.3.4/8\": }]}\n", want: pathA + ":3:38: expected mapping (check indentation)", netplan: true},
	{name: "address options no prefix", a: "network:\n  ethernets:\n    eth0: {addresses: [{\"10.0.0.1\": {lifetime: 0}}]}\n", want: pathA + ":3:23: address '10.0.0.1' is missing /prefixlength", netplan: true},
	{name: "mac", a: "network:\n  ethernets:\n    eth0:\n      match: {macaddress: zz}\n", want: pathA + ":4:27: invalid MAC address 'zz', must be XX:XX:XX:XX:XX:XX or XX:XX:XX:XX:XX:XX:XX:XX:XX:XX:XX:XX:XX:XX:XX:XX:XX:XX:XX:XX", netplan: true},
	{name: "match sequence", a: "network:\n  ethernets:\n    eth0: {match: []}\n", want: pathA + ":3:19: expected mapping (check indentation)", netplan: true},
	{name: "match name sequence", a: "network:\n  ethernets:\n    eth0: {match: {name: [a]}}\n", want: pathA + ":3:26: expected scalar", netplan: true},
	{name: "set-name sequence", a: "network:\n  ethernets:\n    eth0:\n      match: {}\n      set-name: [x]\n", want: pathA + ":5:17: expected scalar", netplan: true},
	{name: "set-name without match", a: "network:\n  ethernets:\n    eth0:\n      set-name: lan0\n", want: pathA + ":4:7: eth0: 'set-name:' requires 'match:' properties", netplan: true},
	{name: "set-name match in earlier file", a: "network: {ethernets: {eth0: {match: {name: en0}}}}\n", b: "network: {ethernets: {eth0: {set-name: lan0}, eth1: {set-name: x}}}\n", want: pathB + ":1:53: eth1: 'set-name:' requires 'match:' properties", netplan: true},
	{name: "version 3", a: "network:\n  version: 3\n", want: pathA + ":2:12: only version 2 is supported", netplan: true},
	{name: "global renderer", a: "network:\n  renderer: openvswitch\n", want: pathA + ":2:13: unknown renderer 'openvswitch'", netplan: true},
	{name: "global renderer case", a: "network:\n  renderer: networkmanager\n", want: pathA + ":2:13: unknown renderer 'networkmanager'", netplan: true},
	{name: "global renderer sequence", a: "network:\n  renderer: [a]\n", want: pathA + ":2:13: expected scalar", netplan: true},
	{name: "type renderer", a: "network:\n  ethernets:\n    renderer: foo\n", want: pathA + ":3:15: unknown renderer 'foo'", netplan: true},
	{name: "interface renderer", a: "network:\n  ethernets:\n    eth0: {renderer: foo}\n", want: pathA + ":3:22: unknown renderer 'foo'", netplan: true},
	{name: "id with space", a: "network:\n  ethernets:\n    \"eth 0\": {}\n", want: pathA + ":3:5: invalid name 'eth 0'", netplan: true},
	{name: "id empty", a: "network:\n  ethernets:\n    \"\": {}\n", want: pathA + ":3:5: invalid name ''", netplan: true},
	{name: "id glob", a: "network:\n  ethernets:\n    \"eth*\": {}\n", want: pathA + ":3:5: definition id 'eth*' must not use globbing", netplan: true},
	{name: "id sequence", a: "network:\n  ethernets:\n    [a]: {}\n", want: pathA + ":3:5: expected scalar", netplan: true},
	{name: "bond member undefined", a: "network:\n  ethernets: {eth0: {}}\n  bonds:\n    bond0:\n      interfaces: [eth9]\n", want: pathA + ":5:20: bond0: interface 'eth9' is not defined", netplan: true},
	{name: "bond member in later file", a: "network:\n  bonds:\n    bond0: {interfaces: [eth0]}\n", b: "network:\n  ethernets: {eth0: {}}\n", want: pathA + ":3:26: bond0: interface 'eth0' is not defined", netplan: true},
	{name: "vlan link undefined", a: "network:\n  vlans:\n    vlan10: {id: 10, link: eth9}\n", want: pathA + ":3:28: vlan10: interface 'eth9' is not defined", netplan: true},
	{name: "bond members scalar", a: "network:\n  ethernets: {eth0: {}}\n  bridges:\n    br0: {interfaces: eth0}\n", want: pathA + ":4:23: expected sequence", netplan: true},
	{name: "member of two bridges", a: "network:\n  ethernets:\n    eth0: {}\n  bridges:\n    br0: {interfaces: [eth0]}\n    br1: {interfaces: [eth0]}\n", want: pathA + ":6:23: br1: interface 'eth0' is already assigned to bridge br0", netplan: true},
	{name: "member of bond then bridge", a: "network:\n  ethernets:\n    eth0: {}\n  bonds:\n    bond0: {interfaces: [eth0]}\n", b: "network:\n  bridges:\n    br0: {interfaces: [eth2, eth0]}\n  ethernets:\n    eth2: {}\n", want: pathB + ":3:23: br0: interface 'eth0' is already assigned to bond bond0", netplan: true},
	{name: "type change across files", a: "network:\n  ethernets:\n    eth0: {}\n", b: "network:\n  bonds:\n    eth0: {}\n", want: pathB + ":3:5: updated definition 'eth0' changes device type", netplan: true},
	{name: "type change in one file", a: "network:\n  ethernets:\n    x0: {}\n  vlans:\n    x0: {id: 1, link: x0}\n", want: pathA + ":5:5: updated definition 'x0' changes device type", netplan: true},
	{name: "overrides sequence", a: "network:\n  ethernets:\n    eth0:\n      dhcp4-overrides: []\n", want: pathA + ":4:24: expected mapping (check indentation)", netplan: true},
	{name: "overrides bool", a: "network:\n  ethernets:\n    eth0:\n      dhcp6-overrides: {use-dns: maybe}\n", want: pathA + ":4:34: invalid boolean value 'maybe'", netplan: true},
	{name: "overrides metric", a: "network:\n  ethernets:\n    eth0: {dhcp4-overrides: {route-metric: x}}\n", want: pathA + ":3:44: invalid unsigned int value 'x'", netplan: true},
	{name: "overrides hostname sequence", a: "network:\n  ethernets:\n    eth0: {dhcp4-overrides: {hostname: [a]}}\n", want: pathA + ":3:40: expected scalar", netplan: true},
	{name: "second pass keeps first error", a: "network:\n  bonds:\n    bond0: {interfaces: [eth0]}\n  ethernets:\n    eth0: {mtu: x}\n", want: pathA + ":5:17: invalid unsigned int value 'x'", netplan: true},
	// Syntax errors: the YAML library reports a line, no column.
	{name: "tab indent", a: "network:\n\tethernets: {}\n", want: pathA + ":2: invalid yaml: found character that cannot start any token"},
	{name: "unclosed flow", a: "network: {ethernets: {}\n", want: pathA + ":1: invalid yaml: did not find expected ',' or '}'"},
	{name: "unknown anchor", a: "network: *x\n", want: pathA + ": invalid yaml: unknown anchor 'x' referenced"},
	// Aliases: netplan shares aliased nodes; we copy them, with limits.
	{name: "alias cycle", a: "network: &n {ethernets: {eth0: {x: *n}}}\n", want: pathA + ":1:36: anchor 'n' value contains itself"},
	{name: "alias bomb", a: bomb(), want: pathA + ":5:30: document too large after expanding aliases"},
}

// bomb is a "billion laughs" document: ten levels, each ten aliases of the
// one below.
func bomb() string {
	var b strings.Builder
	b.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 10; i++ {
		ref := fmt.Sprintf("*a%d", i-1)
		fmt.Fprintf(&b, "a%d: &a%d [%s]\n", i, i, strings.Repeat(ref+", ", 9)+ref)
	}
	b.WriteString("network: {x: *a9}\n")
	return b.String()
}

func (c *errorCase) docs() []Doc {
	d := []Doc{{Path: pathA, Data: []byte(c.a)}}
	if c.b != "" {
		d = append(d, Doc{Path: pathB, Data: []byte(c.b)})
	}
	return d
}

func TestParseErrors(t *testing.T) {
	for i := range errorCases {
		tt := &errorCases[i]
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse(tt.docs())
			if err == nil {
				t.Fatalf("Parse = %+v, want error %q", cfg, tt.want)
			}
			if cfg != nil {
				t.Errorf("Parse returned a partial config with the error")
			}
			if err.Error() != tt.want {
				t.Errorf("error:\n got %s\nwant %s", err, tt.want)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T is not an *Error", err)
			}
		})
	}
}

var netplanErrRE = regexp.MustCompile(`(?m)^(\S+?):(\d+):(\d+): Error in network definition: (.*)$`)

// TestErrorsAgainstNetplan runs `netplan generate --root-dir` (never apply)
// on each rejected file and checks that it fails at the same place for the
// same reason.
func TestErrorsAgainstNetplan(t *testing.T) {
	bin := netplanBinary(t)
	if testing.Short() {
		t.Skip("runs netplan once per case (about a second each)")
	}
	for i := range errorCases {
		tt := &errorCases[i]
		if !tt.netplan {
			continue
		}
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			for _, d := range tt.docs() {
				writeNodeFile(t, root, d.Path, d.Data)
			}
			out, err := exec.Command(bin, "generate", "--root-dir", root).CombinedOutput()
			if err == nil {
				t.Fatalf("netplan generate accepted the files; output:\n%s", out)
			}
			m := netplanErrRE.FindStringSubmatch(string(out))
			if m == nil {
				t.Fatalf("no position in netplan's output:\n%s", out)
			}
			reason := m[4]
			theirs := strings.TrimPrefix(m[1], root) + ":" + m[2] + ":" + m[3] + ": " + strings.ToLower(reason[:1]) + reason[1:]
			if !strings.EqualFold(theirs, tt.want) {
				t.Errorf("netplan says %q, we say %q", theirs, tt.want)
			}
		})
	}
}

func netplanBinary(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("netplan")
	if err != nil {
		t.Skip("netplan is not installed (apt-get install --no-install-recommends netplan.io)")
	}
	return bin
}

// writeNodeFile writes a netplan file under root with mode 0600, as netplan
// wants them (it warns on anything readable by others).
func writeNodeFile(t *testing.T, root, nodePath string, data []byte) {
	t.Helper()
	full := filepath.Join(root, nodePath)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
