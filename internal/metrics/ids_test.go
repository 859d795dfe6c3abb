package metrics

import (
	"bytes"
	"testing"

	"github.com/nodedns/nodedns/probes"
)

// TestEveryCheckIDIsExported: a full report (every id of docs/contract.md "Check ids", the pod probes
// nodelocaldns.pods included) becomes one one-hot nodedns_check_status series set per id.
func TestEveryCheckIDIsExported(t *testing.T) {
	r := NewRecorder(SourceCheck, "1.2.3")
	var cs []Check
	for i, id := range probes.IDs {
		cs = append(cs, Check{ID: id, Status: Statuses[i%len(Statuses)]})
	}
	r.ObserveChecks(cs)
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	set := map[string]string{}
	n := map[string]int{}
	for _, m := range parseText(t, text.Bytes())["nodedns_check_status"].GetMetric() {
		var id, st string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "check":
				id = l.GetValue()
			case "status":
				st = l.GetValue()
			}
		}
		n[id]++
		if m.GetGauge().GetValue() == 1 {
			set[id] = st
		}
	}
	for i, id := range probes.IDs {
		if n[id] != len(Statuses) || set[id] != Statuses[i%len(Statuses)] {
			t.Errorf("%s: %d series, status %q; want %d series and %q", id, n[id], set[id], len(Statuses), Statuses[i%len(Statuses)])
		}
	}
	if _, ok := set["nodelocaldns.pods"]; !ok {
		t.Error("nodelocaldns.pods is not exported")
	}
}
