package kubelet

// edit.go changes one value in a file another program owns, for kubelet.manage (manage.go): a
// scalar of a YAML document (kubelet's config, RKE2's and k3s's config.yaml) and a variable or a
// --resolv-conf flag of an environment file. Every edit splices the new text into the original
// bytes, so every other key, comment, blank line and the order stay byte for byte, and is checked
// by parsing the result again: what the owner's parser reads must differ from before in exactly
// the one value, or the edit is refused (an error), never guessed.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/nodedns/nodedns/systemd"
	"go.yaml.in/yaml/v3"
)

// safeValue: the characters a value nodedns writes may have, so that it is the same text plain,
// quoted, in YAML and in an environment file (no quoting, escaping, '$' or space to get wrong).
func safeValue(v string) bool {
	if v == "" {
		return false
	}
	for _, r := range v {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+@:,", r)) {
			return false
		}
	}
	return true
}

// yamlTop parses a one-document YAML file whose top level is a block mapping.
func yamlTop(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return nil, nil // no document: a mapping with no key
	} else if err != nil {
		return nil, fmt.Errorf("not YAML: %w", err)
	}
	var more yaml.Node
	if err := dec.Decode(&more); err == nil {
		return nil, errors.New("holds more than one YAML document")
	}
	if len(doc.Content) == 0 {
		return nil, nil // empty: a mapping with no key
	}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode || top.Style&yaml.FlowStyle != 0 {
		return nil, errors.New("its top level is not a block mapping")
	}
	return top, nil
}

// decodeAny is what a YAML reader gets from data (its first document), for the checks.
func decodeAny(data []byte) (map[string]any, error) {
	var v map[string]any
	if err := yaml.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	if v == nil {
		v = map[string]any{}
	}
	return v, nil
}

// SetYAMLKey sets the top-level key of a YAML block mapping to the string value: the value's text
// is replaced where the key is set (the last time, when it is set twice), else "key: value" is
// appended after a comment line (comment, "" for none). A value that is not a one-line scalar, or
// a file whose result would read differently anywhere else, is an error.
func SetYAMLKey(data []byte, key, value, comment string) ([]byte, error) {
	if !safeValue(value) {
		return nil, fmt.Errorf("%q cannot be written as a plain value", value)
	}
	top, err := yamlTop(data)
	if err != nil {
		return nil, err
	}
	want, err := decodeAny(data)
	if err != nil {
		return nil, err
	}
	want[key] = value
	var out []byte
	var at *yaml.Node
	if top != nil {
		for i := 0; i+1 < len(top.Content); i += 2 {
			if top.Content[i].Value == key && top.Content[i].Kind == yaml.ScalarNode {
				at = top.Content[i+1]
			}
		}
	}
	if at != nil {
		out, err = spliceScalar(data, at, value, false)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
	} else {
		out = appendLines(data, comment, key+": "+value)
	}
	return out, checkYAML(out, want)
}

// SetYAMLListItem replaces the item of the top-level list key that is on line (1-based) with the
// string item: RKE2's and k3s's `kubelet-arg: ["resolv-conf=..."]`. A key whose value is one string
// (k3s reads it as a one-item list) is replaced the same way.
func SetYAMLListItem(data []byte, key string, line int, item string) ([]byte, error) {
	name, val, _ := strings.Cut(item, "=")
	if !safeValue(name) || !safeValue(val) {
		return nil, fmt.Errorf("%q cannot be written as a plain value", item)
	}
	top, err := yamlTop(data)
	if err != nil {
		return nil, err
	}
	if top == nil {
		return nil, fmt.Errorf("no %s", key)
	}
	want, err := decodeAny(data)
	if err != nil {
		return nil, err
	}
	var at *yaml.Node
	inFlow := false
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		if strings.TrimSuffix(k.Value, "+") != key {
			continue
		}
		switch v.Kind {
		case yaml.ScalarNode:
			if v.Line == line {
				at, inFlow = v, false
				want[k.Value] = item
			}
		case yaml.SequenceNode:
			// On the line, the item that sets the same flag (a flow list holds several).
			var hit *yaml.Node
			hitAt := -1
			for j, it := range v.Content {
				if it.Kind == yaml.ScalarNode && it.Line == line && (hit == nil || strings.HasPrefix(strings.TrimLeft(it.Value, "-"), name+"=")) {
					hit, hitAt = it, j
				}
			}
			if hit != nil {
				at, inFlow = hit, v.Style&yaml.FlowStyle != 0
				if list, _ := want[k.Value].([]any); hitAt < len(list) {
					list[hitAt] = item
				}
			}
		}
	}
	if at == nil {
		return nil, fmt.Errorf("no %s item on line %d", key, line)
	}
	out, err := spliceScalar(data, at, item, inFlow)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return out, checkYAML(out, want)
}

// checkYAML: out must read as want (one document, a block mapping).
func checkYAML(out []byte, want map[string]any) error {
	if _, err := yamlTop(out); err != nil {
		return fmt.Errorf("the edited file would not read back: %w", err)
	}
	got, err := decodeAny(out)
	if err != nil {
		return fmt.Errorf("the edited file would not read back: %w", err)
	}
	if !reflect.DeepEqual(got, want) {
		return errors.New("the edited file would read differently elsewhere: left as it is")
	}
	return nil
}

// appendLines adds lines at the end of data, after a newline of its own when the last line has none.
func appendLines(data []byte, comment, line string) []byte {
	out := bytes.Clone(data)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	if comment != "" {
		out = append(out, "# "+comment+"\n"...)
	}
	return append(out, line+"\n"...)
}

// spliceScalar replaces the text of the one-line scalar n in data with value, in n's own quoting
// style (plain stays plain, "..." and '...' stay quoted). inFlow: n is an item of a flow
// collection, where a plain scalar also ends at ',', ']' and '}'.
func spliceScalar(data []byte, n *yaml.Node, value string, inFlow bool) ([]byte, error) {
	if n.Kind != yaml.ScalarNode || n.Line < 1 || n.Column < 1 {
		return nil, errors.New("the value is not a scalar")
	}
	start := lineStart(data, n.Line)
	if start < 0 {
		return nil, errors.New("the value's line is not in the file")
	}
	end := bytes.IndexByte(data[start:], '\n')
	if end < 0 {
		end = len(data)
	} else {
		end += start
	}
	line := data[start:end]
	// yaml.v3 counts columns in characters.
	off := 0
	for c := 1; c < n.Column; c++ {
		if off >= len(line) {
			return nil, errors.New("the value's column is past its line")
		}
		_, size := utf8.DecodeRune(line[off:])
		off += size
	}
	rest := line[off:]
	var length int
	var text string
	switch n.Style {
	case yaml.DoubleQuotedStyle:
		length = quotedEnd(rest, '"')
		text = `"` + value + `"`
	case yaml.SingleQuotedStyle:
		length = quotedEnd(rest, '\'')
		text = "'" + value + "'"
	case 0, yaml.TaggedStyle:
		if n.Tag != "" && n.Tag != "!!str" && n.Tag != "!!null" {
			return nil, fmt.Errorf("the value is tagged %s", n.Tag)
		}
		if bytes.HasPrefix(rest, []byte("!")) {
			return nil, errors.New("the value carries a tag")
		}
		length = plainEnd(rest, inFlow)
		text = value
	default:
		return nil, errors.New("the value is a block scalar")
	}
	if length <= 0 {
		return nil, errors.New("the value does not end on its line")
	}
	out := make([]byte, 0, len(data)+len(text))
	out = append(out, data[:start+off]...)
	out = append(out, text...)
	return append(out, data[start+off+length:]...), nil
}

// lineStart is the byte offset of the 1-based line, -1 when data is shorter.
func lineStart(data []byte, line int) int {
	off := 0
	for l := 1; l < line; l++ {
		i := bytes.IndexByte(data[off:], '\n')
		if i < 0 {
			return -1
		}
		off += i + 1
	}
	return off
}

// quotedEnd is the length of the quoted scalar that starts rest, its quotes included; 0 when it
// does not end on this line. In '...' a quote is written twice; in "..." a backslash escapes.
func quotedEnd(rest []byte, q byte) int {
	if len(rest) == 0 || rest[0] != q {
		return 0
	}
	for i := 1; i < len(rest); i++ {
		switch {
		case q == '"' && rest[i] == '\\':
			i++
		case rest[i] == q && q == '\'' && i+1 < len(rest) && rest[i+1] == '\'':
			i++
		case rest[i] == q:
			return i + 1
		}
	}
	return 0
}

// plainEnd is the length of the plain scalar that starts rest: up to " #" (a comment) or the end
// of the line (in a flow collection, also ',' ']' '}'), trailing blanks excluded.
func plainEnd(rest []byte, inFlow bool) int {
	end := len(rest)
	for i := 0; i < len(rest); i++ {
		if rest[i] == '#' && i > 0 && (rest[i-1] == ' ' || rest[i-1] == '\t') {
			end = i
			break
		}
		if inFlow && (rest[i] == ',' || rest[i] == ']' || rest[i] == '}') {
			end = i
			break
		}
	}
	for end > 0 && (rest[end-1] == ' ' || rest[end-1] == '\t' || rest[end-1] == '\r') {
		end--
	}
	return end
}

// envVars is what systemd reads of an environment file, by name (the last assignment wins).
func envVars(p string, data []byte) (map[string]string, []systemd.EnvVar, error) {
	vars, _, err := systemd.ParseEnvFile(p, data)
	if err != nil {
		return nil, nil, err
	}
	m := map[string]string{}
	for _, v := range vars {
		m[v.Name] = v.Value
	}
	return m, vars, nil
}

// SetEnvVar sets the variable assigned on line (1-based) of an environment file to value: the
// assignment's value is replaced on that line (`NAME=value`, an `export ` prefix and a trailing
// comment kept out of it). The result must read, as systemd reads it, exactly as before with only
// that variable changed.
func SetEnvVar(p string, data []byte, name string, line int, value string) ([]byte, error) {
	if !safeValue(value) {
		return nil, fmt.Errorf("%q cannot be written as a plain value", value)
	}
	before, _, err := envVars(p, data)
	if err != nil {
		return nil, err
	}
	start := lineStart(data, line)
	if start < 0 {
		return nil, fmt.Errorf("line %d is not in the file", line)
	}
	end := bytes.IndexByte(data[start:], '\n')
	if end < 0 {
		end = len(data)
	} else {
		end += start
	}
	text := data[start:end]
	i := bytes.Index(text, []byte(name+"="))
	if i < 0 || strings.TrimSpace(string(text[:i])) != "" {
		return nil, fmt.Errorf("line %d does not assign %s", line, name)
	}
	// The whole rest of the line must be the value, bare or quoted: anything else (a value that
	// goes on, an escape, a comment) is not edited.
	old, ok := before[name]
	rest := strings.TrimRight(string(text[i+len(name)+1:]), " \t\r")
	quote := ""
	switch {
	case !ok:
		return nil, fmt.Errorf("no %s", name)
	case rest == old && !strings.ContainsAny(old, "\"'\\#"):
	case rest == `"`+old+`"` && !strings.ContainsAny(old, "\"\\$`"):
		quote = `"`
	case rest == "'"+old+"'" && !strings.Contains(old, "'"):
		quote = "'"
	default:
		return nil, fmt.Errorf("%s's value on line %d is not one plain or quoted word: left as it is", name, line)
	}
	valStart := start + i + len(name) + 1
	out := make([]byte, 0, len(data)+len(value))
	out = append(out, data[:valStart]...)
	out = append(out, quote+value+quote...)
	out = append(out, data[valStart+len(rest):]...)
	before[name] = value
	after, _, err := envVars(p, out)
	if err != nil {
		return nil, fmt.Errorf("the edited file would not read back: %w", err)
	}
	if !reflect.DeepEqual(before, after) {
		return nil, fmt.Errorf("%s's value does not end on line %d: left as it is", name, line)
	}
	return out, nil
}

// SetEnvFlag sets the value of kubelet's --resolv-conf flag inside the variable name of an
// environment file (`KUBELET_EXTRA_ARGS=--resolv-conf=/etc/resolv.conf`, or a quoted list of
// flags over several lines, as kubespray's KUBELET_ARGS): the flag's old value is replaced where it
// is written. The result must read, as systemd and kubelet read it, with --resolv-conf value and
// every other word and variable as before.
func SetEnvFlag(p string, data []byte, name, value string) ([]byte, error) {
	if !safeValue(value) {
		return nil, fmt.Errorf("%q cannot be written as a plain value", value)
	}
	before, vars, err := envVars(p, data)
	if err != nil {
		return nil, err
	}
	cur, ok := before[name]
	if !ok {
		return nil, fmt.Errorf("no %s", name)
	}
	words := systemd.SplitWords(cur)
	fl := FlagsFromArgs(words)
	if !fl.HasResolvConf {
		return nil, fmt.Errorf("%s has no --resolv-conf", name)
	}
	old := fl.ResolvConf
	// The last assignment's text: from its line to the end of the file, the first place the old
	// value is written after the flag's name.
	line := 0
	for _, v := range vars {
		if v.Name == name {
			line = v.Source.Line
		}
	}
	start := lineStart(data, line)
	if start < 0 || old == "" {
		return nil, fmt.Errorf("cannot find %s's --resolv-conf in the file", name)
	}
	rest := data[start:]
	flag := bytes.Index(rest, []byte("-resolv"))
	if flag < 0 {
		return nil, fmt.Errorf("--resolv-conf of %s is not written out (it comes from another variable)", name)
	}
	at := bytes.Index(rest[flag:], []byte(old))
	if at < 0 {
		return nil, fmt.Errorf("--resolv-conf of %s is not written out (it comes from another variable)", name)
	}
	at += start + flag
	out := make([]byte, 0, len(data)+len(value))
	out = append(out, data[:at]...)
	out = append(out, value...)
	out = append(out, data[at+len(old):]...)
	after, _, err := envVars(p, out)
	if err != nil {
		return nil, fmt.Errorf("the edited file would not read back: %w", err)
	}
	wantWords := append([]string{}, words...)
	i := fl.ResolvConfIndex
	if strings.Contains(wantWords[i], "=") {
		n, _, _ := strings.Cut(wantWords[i], "=")
		wantWords[i] = n + "=" + value
	} else {
		wantWords[i+1] = value
	}
	gotWords := systemd.SplitWords(after[name])
	delete(after, name)
	delete(before, name)
	if !reflect.DeepEqual(before, after) || !reflect.DeepEqual(gotWords, wantWords) {
		return nil, fmt.Errorf("the edit of --resolv-conf in %s would change more than its value: left as it is", name)
	}
	return out, nil
}
