package main

import (
	"strings"
	"testing"

	"github.com/nodedns/nodedns/internal/testutil/golden"
)

// TestPlanTextAtAGlance: plan on the example node reads at a glance: the resolv.conf diff, the hook
// nodedns generates as one line with its size, and the summary as the last line; --full shows the
// hook's body.
func TestPlanTextAtAGlance(t *testing.T) {
	r := nodedns(t, "--root", "../../examples/kubespray-host-resolvconf", "plan")
	golden.Check(t, "testdata/example.plan.golden", []byte(r.stdout))
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if last := lines[len(lines)-1]; last != "Plan: 2 to create, 1 to change, 0 to remove, 0 actions." {
		t.Errorf("last line %q", last)
	}
	if len(lines) > 25 {
		t.Errorf("plan prints %d lines on the example node; the generated hook should be one", len(lines))
	}
	full := nodedns(t, "--root", "../../examples/kubespray-host-resolvconf", "plan", "--full")
	if !strings.Contains(full.stdout, "+++ b/etc/dhcp/dhclient-enter-hooks.d/nodedns") || strings.Contains(full.stdout, "plan --full shows them") {
		t.Errorf("plan --full does not show the hook:\n%s", full.stdout)
	}
	js := nodedns(t, "--root", "../../examples/kubespray-host-resolvconf", "plan", "-o", "json")
	if !strings.Contains(js.stdout, `"summary": {
    "create": 2,
    "change": 1,
    "remove": 0,
    "actions": 0
  }`) {
		t.Errorf("plan -o json has no summary with the text's counts:\n%s", js.stdout)
	}
}
