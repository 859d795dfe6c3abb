package main

import (
	"encoding/json"
	"os"
	"testing"
	"time"
)

// TestCheckJSONEnvelope: `check -o json` says which schema, which machine and when, so a fleet
// collector can file reports from many nodes (docs/contract.md "Check JSON").
func TestCheckJSONEnvelope(t *testing.T) {
	before := time.Now().Add(-time.Second)
	r := nodedns(t, "--root", "../../examples/kubespray-host-resolvconf", "check", "-o", "json")
	var got struct {
		SchemaVersion *int            `json:"schemaVersion"`
		Hostname      *string         `json:"hostname"`
		Time          string          `json:"time"`
		Status        string          `json:"status"`
		Checks        json.RawMessage `json:"checks"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("check -o json: %v\n%s", err, r.stdout)
	}
	if got.SchemaVersion == nil || *got.SchemaVersion != 1 {
		t.Errorf("schemaVersion = %v, want 1", got.SchemaVersion)
	}
	host, _ := os.Hostname()
	if got.Hostname == nil || *got.Hostname != host {
		t.Errorf("hostname = %v, want %q", got.Hostname, host)
	}
	at, err := time.Parse(time.RFC3339, got.Time)
	if err != nil || at.Before(before.Truncate(time.Second)) || at.After(time.Now().Add(time.Second)) {
		t.Errorf("time = %q (%v), want RFC 3339 UTC of now", got.Time, err)
	}
	if got.Status != "problem" || len(got.Checks) < 10 {
		t.Errorf("status %q with checks %s: the report is no longer at the top level", got.Status, got.Checks)
	}
}
