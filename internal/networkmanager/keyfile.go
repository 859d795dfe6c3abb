package networkmanager

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// NetworkManager reads every file of its own (NetworkManager.conf, conf.d, NetworkManager-intern.conf,
// the keyfile connections, /run/NetworkManager/devices/IFINDEX) with GLib's GKeyFile. This file
// parses as GKeyFile does in GLib 2.74 (Debian 12's libglib2.0-0 2.74.6; RHEL 9 ships 2.68, whose
// parser is the same in every rule below), so a file NM rejects is rejected here with the same
// reason, and one it accepts yields the same groups, keys and values.

// KeyFile is one file as GKeyFile parses it.
type KeyFile struct {
	// Path is the node path the file was read from (for messages).
	Path string
	// Groups in the order they first appear. A group written twice is one group (GKeyFile merges
	// them).
	Groups []*Group
}

// Group is one [section] of a KeyFile.
type Group struct {
	Name string
	// Line is where the group first appears.
	Line int
	// Entries in the order their keys first appear; a key written twice keeps its first place and
	// its last value and line (GKeyFile's lookup replaces it).
	Entries []Entry
}

// Entry is one key=value line. Value is raw: as written after the '=' with leading whitespace
// dropped and trailing whitespace kept (GKeyFile does that), escapes not decoded. Use
// UnescapeValue or SplitList to decode it as NM does.
type Entry struct {
	Key, Value string
	Line       int
}

// ParseError is a file NetworkManager refuses to read: GKeyFile's reason (its own wording, as NM
// logs it and `NetworkManager --print-config` prints it) with the file and the line (GLib names no
// line; nodedns adds it). NM 1.42 refuses its whole configuration for one such file: it does not
// start, `--print-config` exits 7, and Reload keeps the old configuration.
type ParseError struct {
	Path   string
	Line   int // 0: about the whole file
	Reason string
	// bare: NM prints Reason without the path in front (its "file PATH not found").
	bare bool
}

func (e *ParseError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: %s", e.Path, e.Reason)
	}
	return fmt.Sprintf("%s:%d: %s", e.Path, e.Line, e.Reason)
}

// NMMessage is the message NM 1.42 prints for this error ("Failed to read configuration: " is
// put before it), e.g. "/etc/NetworkManager/conf.d/x.conf: Key file does not start with a group".
func (e *ParseError) NMMessage() string {
	if e.bare {
		return e.Reason
	}
	return e.Path + ": " + e.Reason
}

// Group returns the group named name, nil when there is none.
func (kf *KeyFile) Group(name string) *Group {
	for _, g := range kf.Groups {
		if g.Name == name {
			return g
		}
	}
	return nil
}

// Get returns the entry for key in group.
func (kf *KeyFile) Get(group, key string) (Entry, bool) {
	if g := kf.Group(group); g != nil {
		return g.Get(key)
	}
	return Entry{}, false
}

// Get returns the entry for key.
func (g *Group) Get(key string) (Entry, bool) {
	for _, e := range g.Entries {
		if e.Key == key {
			return e, true
		}
	}
	return Entry{}, false
}

func (g *Group) set(e Entry) {
	for i := range g.Entries {
		if g.Entries[i].Key == e.Key {
			g.Entries[i].Value, g.Entries[i].Line = e.Value, e.Line
			return
		}
	}
	g.Entries = append(g.Entries, e)
}

// ParseKeyFile parses data as GKeyFile (g_key_file_load_from_data, GLib 2.74) does: lines end at
// '\n' (a '\r' just before it is dropped); leading ASCII whitespace is skipped; '#' starts a
// comment (';' does NOT: "; x" is a parse error, measured with NM 1.42.4); "[name]" with only
// spaces or tabs after it is a group; "key=value" needs a group before it. The first bad line
// ends parsing with a *ParseError.
func ParseKeyFile(path string, data []byte) (*KeyFile, error) {
	kf := &KeyFile{Path: path}
	var cur *Group
	line := 0
	for len(data) > 0 {
		line++
		var l []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			l, data = data[:i], data[i+1:]
			l = bytes.TrimSuffix(l, []byte{'\r'})
		} else {
			// The last line, without '\n': GLib flushes it as it is, '\r' included.
			l, data = data, nil
		}
		// GLib scans the line as a C string: nothing after a NUL byte counts.
		if i := bytes.IndexByte(l, 0); i >= 0 {
			l = l[:i]
		}
		full := string(l)
		s := strings.TrimLeft(full, asciiSpace)
		switch {
		case s == "" || s[0] == '#':
			continue
		case lineIsGroup(s):
			name := s[1:strings.IndexByte(s, ']')]
			if !isGroupName(name) {
				return nil, &ParseError{Path: path, Line: line, Reason: "Invalid group name: " + name}
			}
			cur = kf.Group(name)
			if cur == nil {
				cur = &Group{Name: name, Line: line}
				kf.Groups = append(kf.Groups, cur)
			}
		case strings.IndexByte(s, '=') > 0:
			if cur == nil {
				return nil, &ParseError{Path: path, Line: line, Reason: "Key file does not start with a group"}
			}
			eq := strings.IndexByte(s, '=')
			key := strings.TrimRight(s[:eq], asciiSpace)
			if !isKeyName(key) {
				return nil, &ParseError{Path: path, Line: line, Reason: "Invalid key name: " + key}
			}
			value := strings.TrimLeft(s[eq+1:], asciiSpace)
			if key == "Encoding" && cur == kf.Groups[0] && !strings.EqualFold(value, "UTF-8") {
				return nil, &ParseError{Path: path, Line: line, Reason: fmt.Sprintf("Key file contains unsupported encoding “%s”", strings.ToValidUTF8(value, "\uFFFD"))}
			}
			cur.set(Entry{Key: key, Value: value, Line: line})
		default:
			return nil, &ParseError{Path: path, Line: line,
				Reason: fmt.Sprintf("Key file contains line “%s” which is not a key-value pair, group, or comment", strings.ToValidUTF8(full, "\uFFFD"))}
		}
	}
	return kf, nil
}

// asciiSpace is g_ascii_isspace's set.
const asciiSpace = " \t\n\v\f\r"

// lineIsGroup is g_key_file_line_is_group: '[', anything but ']', ']', then only spaces and tabs.
func lineIsGroup(s string) bool {
	if s == "" || s[0] != '[' {
		return false
	}
	end := strings.IndexByte(s, ']')
	return end > 0 && strings.Trim(s[end+1:], " \t") == ""
}

// isGroupName is g_key_file_is_group_name: not empty, no '[', ']' or ASCII control character.
func isGroupName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c == '[' || c == ']' || c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

// isKeyName is g_key_file_is_key_name: not empty, no '=', '[' or ']' except one trailing
// "[locale]" of letters, digits and "-_.@", and no space at either end.
func isKeyName(key string) bool {
	q := strings.IndexAny(key, "=[]")
	if q < 0 {
		q = len(key)
	}
	if q == 0 || key[0] == ' ' || key[q-1] == ' ' {
		return false
	}
	if q == len(key) {
		return true
	}
	if key[q] != '[' {
		return false
	}
	rest := key[q+1:]
	end := strings.IndexByte(rest, ']')
	if end < 0 || end != len(rest)-1 {
		return false
	}
	for _, r := range rest[:end] {
		if !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_' || r == '.' || r == '@') || r == utf8.RuneError {
			return false
		}
	}
	return true
}

// valueError is a value GKeyFile cannot decode; NM then treats the key as absent.
type valueError struct{ reason string }

func (e *valueError) Error() string { return e.reason }

// UnescapeValue decodes a raw value as g_key_file_get_string does: "\s" "\n" "\t" "\r" "\\" are
// escapes, any other is an error, and the value must be UTF-8. NM treats a key whose value fails
// here as absent.
func UnescapeValue(raw string) (string, error) {
	parts, err := decode(raw, 0)
	if err != nil {
		return "", err
	}
	return parts[0], nil
}

// SplitList decodes a raw value as g_key_file_get_string_list does with separator sep (',' in NM's
// configuration files, ';' in keyfile connections): "\<sep>" is a literal separator, an empty
// piece between two separators is kept, a trailing separator adds nothing. NM then drops empty
// and repeated pieces where it says so (see cleanList).
func SplitList(raw string, sep byte) ([]string, error) {
	if sep == 0 {
		return nil, fmt.Errorf("split list: no separator")
	}
	return decode(raw, sep)
}

// decode is g_key_file_parse_value_as_string; sep 0 means "not a list".
func decode(raw string, sep byte) ([]string, error) {
	if !utf8.ValidString(raw) {
		return nil, &valueError{reason: "value is not UTF-8"}
	}
	var out []string
	var b strings.Builder
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c == '\\' {
			i++
			if i == len(raw) {
				return nil, &valueError{reason: "Key file contains escape character at end of line"}
			}
			switch e := raw[i]; e {
			case 's':
				b.WriteByte(' ')
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case '\\':
				b.WriteByte('\\')
			default:
				if sep != 0 && e == sep {
					b.WriteByte(sep)
					continue
				}
				return nil, &valueError{reason: fmt.Sprintf("Key file contains invalid escape sequence “\\%c”", e)}
			}
			continue
		}
		if sep != 0 && c == sep {
			out = append(out, b.String())
			b.Reset()
			continue
		}
		b.WriteByte(c)
	}
	if sep == 0 || b.Len() > 0 {
		out = append(out, b.String())
	}
	return out, nil
}

// cleanList is nm_strv_cleanup(strv, strip, skip_empty, skip_repeated) as NM 1.42 applies it to
// global DNS lists: ASCII whitespace stripped from both ends, empty items dropped, an item equal
// to an earlier one dropped.
func cleanList(items []string) []string {
	var out []string
	for _, it := range items {
		it = strings.Trim(it, asciiSpace)
		if it == "" || slices.Contains(out, it) {
			continue
		}
		out = append(out, it)
	}
	return out
}

// ParseBool is NM's _nm_utils_ascii_str_to_bool, which NM 1.42 uses for its configuration's and
// keyfiles' booleans: "true", "yes", "on", "1", "false", "no", "off", "0", any case, surrounding
// whitespace ignored.
func ParseBool(v string) (value, ok bool) {
	switch strings.ToLower(strings.Trim(v, asciiSpace)) {
	case "true", "yes", "on", "1":
		return true, true
	case "false", "no", "off", "0":
		return false, true
	}
	return false, false
}

// escapeValue encodes s for a key file as g_key_file_set_string does (leading space as "\s",
// newline, tab, CR and backslash escaped), and, for list items, the separator.
func escapeValue(s string, sep byte) string {
	var b strings.Builder
	leading := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' && leading:
			b.WriteString(`\s`)
			continue
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\t':
			b.WriteString(`\t`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\\':
			b.WriteString(`\\`)
		case sep != 0 && c == sep:
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
		leading = false
	}
	return b.String()
}
