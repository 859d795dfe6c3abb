package cachenet

import (
	"strings"
	"testing"
)

// FuzzParseSave: whatever iptables-legacy-save prints, parsing never panics, and a rule's spec
// splits into words again (quotes balanced) with its comment among them.
func FuzzParseSave(f *testing.F) {
	f.Add([]byte(saveOutput))
	f.Add([]byte("*filter\n-A INPUT -m comment --comment \"x\\\" y\" -j ACCEPT\nCOMMIT\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rs, err := ParseSave(data)
		if err != nil {
			return
		}
		for _, r := range rs {
			words, err := SplitSpec(r.Spec)
			if err != nil {
				t.Fatalf("spec %q of a parsed rule does not split: %v", r.Spec, err)
			}
			if r.Comment != "" && !strings.Contains(strings.Join(words, "\x00"), r.Comment) {
				t.Fatalf("comment %q not among the words of %q", r.Comment, r.Spec)
			}
		}
	})
}

// FuzzParseRecord: whatever the record file holds, parsing never panics, and every rule it accepts
// is one of node-cache's that Remove can find again.
func FuzzParseRecord(f *testing.F) {
	f.Add([]byte(`[{"at":"2026-11-29T01:45:33Z","link":{"name":"nodelocaldns","kind":"dummy","index":7},"rules":[{"backend":"nf_tables","family":4,"table":"raw","chain":"OUTPUT","comment":"NodeLocal DNS Cache: skip conntrack","handle":9}]}]`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ms, err := ParseRecord("r", data)
		if err != nil {
			return
		}
		for _, m := range ms {
			_ = m.Describe()
			for _, r := range m.Rules {
				if !strings.HasPrefix(r.Comment, CommentPrefix) || r.Backend == BackendNFT && r.Handle == 0 || r.Backend == BackendLegacy && r.Spec == "" {
					t.Fatalf("accepted a rule Remove cannot find: %+v", r)
				}
			}
		}
	})
}
