package main

import (
	"os"
	"strings"
	"testing"
)

// TestREADMEOutputIsReal runs every `$ nodedns ...` command of README's "Real output on the example
// node" block and checks that each line the README shows (a "..." line stands for lines left out)
// is a line of the real output, so the README cannot drift from what nodedns prints.
func TestREADMEOutputIsReal(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	must(t, err)
	text := string(data)
	start := strings.Index(text, "Real output on the example node")
	if start < 0 {
		t.Fatal("README has no \"Real output on the example node\" block")
	}
	block := text[start:]
	block = block[strings.Index(block, "```\n")+4:]
	block = block[:strings.Index(block, "```")]
	type run struct {
		args  []string
		shown []string
	}
	var runs []run
	for _, line := range strings.Split(strings.TrimRight(block, "\n"), "\n") {
		if cmd, ok := strings.CutPrefix(line, "$ nodedns "); ok {
			runs = append(runs, run{args: strings.Fields(cmd)})
			continue
		}
		if len(runs) == 0 {
			t.Fatalf("README output before any command: %q", line)
		}
		if line != "" && line != "..." {
			runs[len(runs)-1].shown = append(runs[len(runs)-1].shown, line)
		}
	}
	if len(runs) < 3 {
		t.Fatalf("found %d commands in README's block, want check, check --npd and plan", len(runs))
	}
	for _, r := range runs {
		for i, a := range r.args {
			if a == "examples/kubespray-host-resolvconf" {
				r.args[i] = "../../examples/kubespray-host-resolvconf"
			}
		}
		res := nodedns(t, r.args...)
		real := map[string]bool{}
		for _, l := range strings.Split(res.stdout, "\n") {
			real[l] = true
		}
		for _, l := range r.shown {
			if !real[l] {
				t.Errorf("README shows, for nodedns %s, a line the real output lacks:\n%s\nreal output:\n%s", strings.Join(r.args, " "), l, res.stdout)
			}
		}
	}
}
