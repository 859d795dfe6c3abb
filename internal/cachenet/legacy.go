package cachenet

// legacy.go: node-cache's rules in iptables-legacy's x_tables. The kernel keeps them as binary blobs
// whose layout is per match and target revision; iptables-legacy-save is the one maintained decoder
// (no Go library reads them), and iptables-legacy-restore the matching encoder. A rule is replayed
// from the spec iptables-legacy-save printed for it, so the entry written is the one that iptables
// version writes for that spec: the replacement's `iptables -C` (legacy -C compares the binary
// entry) matches it when its iptables encodes the spec the same way, as the same image does.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"

	"github.com/nodedns/nodedns/internal/nodefs"
)

// SavedRule is one "-A CHAIN spec" line of iptables-save output, in its table.
type SavedRule struct {
	Table, Chain, Spec string
	// Comment is the --comment match's value, unquoted ("" when none).
	Comment string
}

// ParseSave reads iptables-save output: every appended rule with its table. Lines it does not
// understand are skipped; a rule outside a table is an error (the output is not iptables-save's).
func ParseSave(data []byte) ([]SavedRule, error) {
	var out []SavedRule
	table := ""
	for n, line := range bytes.Split(data, []byte("\n")) {
		l := strings.TrimSpace(string(line))
		switch {
		case l == "" || l[0] == '#' || l[0] == ':' || l == "COMMIT":
		case l[0] == '*':
			table = l[1:]
		case l == "-A" || strings.HasPrefix(l, "-A "):
			if table == "" {
				return out, fmt.Errorf("line %d: a rule outside a table", n+1)
			}
			rest := strings.TrimSpace(strings.TrimPrefix(l, "-A"))
			chain, spec, _ := strings.Cut(rest, " ")
			if chain == "" {
				return out, fmt.Errorf("line %d: a rule without a chain", n+1)
			}
			r := SavedRule{Table: table, Chain: chain, Spec: strings.TrimSpace(spec)}
			words, err := SplitSpec(r.Spec)
			if err != nil {
				return out, fmt.Errorf("line %d: %w", n+1, err)
			}
			for i := 0; i+1 < len(words); i++ {
				if words[i] == "--comment" {
					r.Comment = words[i+1]
					break
				}
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// SplitSpec splits a rule spec into words as iptables-restore does: spaces separate words, and a
// double-quoted word may hold spaces and \" or \\ (iptables' save_string quotes a comment so).
func SplitSpec(s string) ([]string, error) {
	var out []string
	var w strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quoted && c == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\'):
			w.WriteByte(s[i+1])
			i++
		case c == '"':
			quoted = !quoted
			inWord = true
		case !quoted && (c == ' ' || c == '\t'):
			if inWord {
				out = append(out, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if quoted {
		return nil, errors.New("an unterminated quote")
	}
	if inWord {
		out = append(out, w.String())
	}
	return out, nil
}

// legacyTools are the commands of one family.
type legacyTools struct {
	family        int
	names         string // /proc/net/ip_tables_names: the legacy tables that exist (per netns)
	save, restore string
}

var legacyFamilies = []legacyTools{
	// thread-self: the calling thread's network namespace (/proc/net is the main thread's).
	{4, "/proc/thread-self/net/ip_tables_names", "iptables-legacy-save", "iptables-legacy-restore"},
	{6, "/proc/thread-self/net/ip6_tables_names", "ip6tables-legacy-save", "ip6tables-legacy-restore"},
}

// nodeCacheTables are the tables node-cache writes (cache_app.go initIptables).
var nodeCacheTables = []string{"raw", "filter"}

// readLegacy reads node-cache's rules for addrs from the legacy tables that exist: no command runs
// and no module loads on a node without them.
func readLegacy(ctx context.Context, addrs []netip.Addr) ([]Rule, error) {
	var out []Rule
	var errs []error
	for _, v := range legacyFamilies {
		names, err := nodefs.ReadKernel(v.names, nodefs.Proc)
		if err != nil {
			continue
		}
		for _, table := range nodeCacheTables {
			if !hasLine(names, table) {
				continue
			}
			path, err := exec.LookPath(v.save)
			if err != nil {
				errs = append(errs, fmt.Errorf("a legacy %s table exists (%s) but %s is not installed to read it", table, v.names, v.save))
				continue
			}
			data, err := exec.CommandContext(ctx, path, "-t", table).Output()
			if err != nil {
				errs = append(errs, fmt.Errorf("%s -t %s: %w", v.save, table, err))
				continue
			}
			saved, err := ParseSave(data)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s -t %s: %w", v.save, table, err))
			}
			for _, s := range saved {
				r := Rule{Backend: BackendLegacy, Family: v.family, Table: s.Table, Chain: s.Chain, Comment: s.Comment, Spec: s.Spec}
				if strings.HasPrefix(s.Comment, CommentPrefix) && slices.ContainsFunc(addrs, r.matches) {
					out = append(out, r)
				}
			}
		}
	}
	return out, errors.Join(errs...)
}

func hasLine(data []byte, want string) bool {
	for _, l := range bytes.Split(data, []byte("\n")) {
		if strings.TrimSpace(string(l)) == want {
			return true
		}
	}
	return false
}

func toolsFor(family int) legacyTools {
	if family == 6 {
		return legacyFamilies[1]
	}
	return legacyFamilies[0]
}

// restoreInput is iptables-restore input applying op ("-I CHAIN 1" style, given per rule) to the
// rules of one table.
func restoreInput(table string, lines []string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "*%s\n", table)
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	b.WriteString("COMMIT\n")
	return b.Bytes()
}

// runRestore feeds input to the family's iptables-legacy-restore without flushing anything else.
func runRestore(ctx context.Context, family int, input []byte) error {
	t := toolsFor(family)
	path, err := exec.LookPath(t.restore)
	if err != nil {
		return fmt.Errorf("%s is not installed: %w", t.restore, err)
	}
	cmd := exec.CommandContext(ctx, path, "--noflush", "--wait=5")
	cmd.Stdin = bytes.NewReader(input)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w: %s", t.restore, err, strings.TrimSpace(string(out)))
	}
	return nil
}

type legacyKey struct {
	family int
	table  string
}

// putLegacy inserts the rules missing from their chains at the top, in the order they had.
func putLegacy(ctx context.Context, rules []Rule) ([]MadeRule, error) {
	var made []MadeRule
	var errs []error
	for _, group := range inGroups(rules, func(r Rule) legacyKey { return legacyKey{r.Family, r.Table} }) {
		k := legacyKey{group[0].Family, group[0].Table}
		t := toolsFor(k.family)
		path, err := exec.LookPath(t.save)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s is not installed: %w", t.save, err))
			continue
		}
		data, err := exec.CommandContext(ctx, path, "-t", k.table).Output()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s -t %s: %w", t.save, k.table, err))
			continue
		}
		now, _ := ParseSave(data)
		have := map[string]int{}
		for _, s := range now {
			have[s.Chain+" "+s.Spec]++
		}
		add := missing(group, have, func(r Rule) string { return r.Chain + " " + r.Spec })
		if len(add) == 0 {
			continue
		}
		var lines []string
		for i := len(add) - 1; i >= 0; i-- {
			lines = append(lines, fmt.Sprintf("-I %s 1 %s", add[i].Chain, add[i].Spec))
		}
		if err := runRestore(ctx, k.family, restoreInput(k.table, lines)); err != nil {
			errs = append(errs, fmt.Errorf("insert node-cache's rules into the legacy %s table: %w", k.table, err))
			continue
		}
		for _, r := range add {
			made = append(made, MadeRule{Rule: r})
		}
	}
	return made, errors.Join(errs...)
}

// removeLegacy deletes one rule per record with its spec (-D deletes the first that matches).
func removeLegacy(ctx context.Context, rules []MadeRule) (removed, kept []string, err error) {
	var errs []error
	for _, r := range rules {
		if err := runRestore(ctx, r.Family, restoreInput(r.Table, []string{fmt.Sprintf("-D %s %s", r.Chain, r.Spec)})); err != nil {
			// iptables-restore fails the whole input when the rule is not there.
			kept = append(kept, fmt.Sprintf("%s: not deleted (%v)", r.Rule, err))
			continue
		}
		removed = append(removed, r.Rule.String())
	}
	return removed, kept, errors.Join(errs...)
}
