package systemd

// lex.go is the one lexer of systemd's file formats that nodedns reads: read_line's physical lines
// (fileio.c); config_parse's logical lines, sections and KEY=VALUE (conf-parser.c), which unit
// files, resolved.conf and DNS delegates share; extract_first_word (extract-word.c) with C
// unescaping (escape.c), which splits their values; and the env-file grammar (env-file.c) of
// EnvironmentFile= and of networkd's and resolved's state files. Every rule follows systemd 252
// (Debian 12's 252.39); the parsers of each format sit on top of it.

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/nodedns/nodedns/internal/ascii"
)

const (
	whitespace = " \t\n\r" // WHITESPACE in systemd's string-util.h
	comments   = "#;"      // COMMENTS
)

// utf8BOM is UTF8_BYTE_ORDER_MARK, which config_parse drops.
const utf8BOM = "\xef\xbb\xbf"

// physLine is one physical line of a file, without its line end, and the line end that followed
// it ("" for a last line that has none).
type physLine struct{ text, eol string }

// physLines splits data like systemd's read_line (read_line_full, fileio.c 252): a line ends at
// '\n', '\r' or NUL, and the line end takes in the line-end bytes right after it as long as none
// repeats and none follows a NUL ("\r\n", "\n\r", "\n\0", "\r\n\0" are each one line end; "\n\n"
// and "\0\n" are two). Joining every text and eol gives data back.
func physLines(data []byte) []physLine {
	const nl, cr, nul = 1, 2, 4
	kind := func(c byte) int {
		switch c {
		case '\n':
			return nl
		case '\r':
			return cr
		case 0:
			return nul
		}
		return 0
	}
	var lines []physLine
	s := string(data)
	for s != "" {
		end := 0
		for end < len(s) && kind(s[end]) == 0 {
			end++
		}
		term, seen := end, 0
		for term < len(s) {
			k := kind(s[term])
			if k == 0 || seen&k != 0 || seen&nul != 0 {
				break
			}
			seen |= k
			term++
		}
		lines = append(lines, physLine{text: s[:end], eol: s[end:term]})
		s = s[term:]
	}
	return lines
}

// logicalLines feeds parse the logical lines of a systemd configuration file as config_parse
// (systemd 252 to 262) makes them: comment lines dropped before continuations, a UTF-8 BOM dropped
// from the first line that starts with one, a trailing backslash joining the next line with a space. first and last are
// the physical lines a logical line spans (systemd names the last in its messages). parse returns
// false to stop reading (a section header systemd rejects).
func logicalLines(data []byte, parse func(first, last int, l string) bool) {
	var (
		line, first  int
		continuation []byte // nil: none pending
		bomSeen      bool
	)
	for _, pl := range physLines(data) {
		raw := pl.text
		line++
		if continuation == nil {
			first = line
		}
		// Comment lines are dropped before continuation handling, so a
		// comment inside a continued value is skipped and the value goes on
		// (config_parse 252; measured).
		if isComment(raw) {
			continue
		}
		l := raw
		if !bomSeen && strings.HasPrefix(l, utf8BOM) {
			l = l[len(utf8BOM):]
			bomSeen = true
		}
		// A line ending in an odd number of backslashes continues on the
		// next line; the last backslash becomes a space. systemd rescans the
		// whole joined line, but a pending continuation always ends in that
		// space, so scanning the new physical line alone is the same.
		if endsEscaped(l) {
			if continuation == nil {
				continuation = []byte{}
			}
			continuation = append(continuation, l[:len(l)-1]...)
			continuation = append(continuation, ' ')
			continue
		}
		logical := l
		if continuation != nil {
			logical = string(continuation) + l
			continuation = nil
		}
		if !parse(first, line, logical) {
			return
		}
	}
	if continuation != nil {
		// config_parse parses a pending continuation at EOF as line+1.
		parse(first, line+1, string(continuation))
	}
}

// confAssignment is one KEY=VALUE line of a section its parser reads, key and value stripped of
// blanks. first and last are the physical lines it spans.
type confAssignment struct {
	first, last         int
	section, key, value string
}

// confIssue is a line parse_line does not hand on: one it skips with a warning, or one that makes
// config_parse fail (fatal), after which systemd reads no further.
type confIssue struct {
	first, last int
	kind        confIssueKind
	line        string // the logical line, stripped
}

type confIssueKind int

// What parse_line (conf-parser.c, 252) says of a line, the fatal ones first.
const (
	issueNotUTF8        confIssueKind = iota // log_syntax_invalid_utf8: -EINVAL
	issueBadHeader                           // "Invalid section header": -EBADMSG
	issueBadHeaderChars                      // "Bad characters in section header": -EBADMSG
	issueUnknownSection                      // "Unknown section '%s'. Ignoring."
	issueOutsideSection                      // "Assignment outside of section. Ignoring."
	issueMissingEquals                       // "Missing '=', ignoring line."
	issueMissingKey                          // "Missing key name before '=', ignoring line."
)

// fatal reports whether config_parse fails at the line.
func (i confIssue) fatal() bool { return i.kind <= issueBadHeaderChars }

// String is what systemd logs, in nodedns's words.
func (i confIssue) String() string {
	switch i.kind {
	case issueNotUTF8:
		return "string is not UTF-8 clean"
	case issueBadHeader:
		return fmt.Sprintf("invalid section header %q", i.line)
	case issueBadHeaderChars:
		return fmt.Sprintf("bad characters in section header %q", i.line)
	case issueUnknownSection:
		return fmt.Sprintf("unknown section %q, ignoring", i.line[1:len(i.line)-1])
	case issueOutsideSection:
		return "assignment outside of section, ignoring"
	case issueMissingEquals:
		return "missing '=', ignoring line"
	default:
		return "missing key name before '=', ignoring line"
	}
}

// parseConf is config_parse with parse_line (conf-parser.c, 252) over one file's bytes: its
// logical lines (logicalLines), stripped of blanks; section headers, where a section that is not
// one of sections is skipped with all its lines (with a warning unless its name starts with "X-");
// KEY=VALUE lines of a section in sections, handed to assign. Section names are case-sensitive.
// issue gets each line parse_line skips with a warning, and the one that makes the file fail
// (confIssue.fatal), after which parseConf reads no further, as systemd does. assign returns false
// to stop reading too.
func parseConf(data []byte, sections []string, assign func(confAssignment) bool, issue func(confIssue)) {
	section, ignored := "", false // ignored: in a section that is not one of sections
	logicalLines(data, func(first, last int, l string) bool {
		l = strings.Trim(l, whitespace)
		if l == "" {
			return true
		}
		report := func(kind confIssueKind) bool {
			i := confIssue{first: first, last: last, kind: kind, line: l}
			issue(i)
			return !i.fatal()
		}
		if !validUTF8(l) {
			// 252 logs "ignoring assignment" but returns -EINVAL: the unit or configuration
			// fails to load (measured with systemd-analyze verify and resolved 252).
			return report(issueNotUTF8)
		}
		if l[0] == '[' {
			if len(l) < 2 || l[len(l)-1] != ']' {
				return report(issueBadHeader)
			}
			name := l[1 : len(l)-1]
			if !stringIsSafe(name) {
				return report(issueBadHeaderChars)
			}
			// Section names are case-sensitive: [resolve] is unknown (measured).
			if !slices.Contains(sections, name) {
				if !strings.HasPrefix(name, "X-") {
					report(issueUnknownSection)
				}
				section, ignored = "", true
				return true
			}
			section, ignored = name, false
			return true
		}
		if section == "" {
			if !ignored {
				report(issueOutsideSection)
			}
			return true
		}
		eq := strings.IndexByte(l, '=')
		if eq < 0 {
			// Not fatal in 252 (measured), unlike older releases.
			return report(issueMissingEquals)
		}
		if eq == 0 {
			return report(issueMissingKey)
		}
		return assign(confAssignment{first: first, last: last, section: section,
			key: strings.Trim(l[:eq], whitespace), value: strings.Trim(l[eq+1:], whitespace)})
	})
}

// isComment reports whether config_parse takes a physical line for a comment: its first
// non-blank character is # or ;.
func isComment(line string) bool {
	l := strings.TrimLeft(line, whitespace)
	return l != "" && strings.IndexByte(comments, l[0]) >= 0
}

// endsEscaped reports whether s ends in an unescaped backslash.
func endsEscaped(s string) bool {
	escaped := false
	for i := 0; i < len(s); i++ {
		if escaped {
			escaped = false
		} else if s[i] == '\\' {
			escaped = true
		}
	}
	return escaped
}

// validUTF8 is systemd's utf8_is_valid: valid UTF-8 without Unicode
// noncharacters (unichar_is_valid rejects U+FDD0..U+FDEF and U+xxFFFE/F).
func validUTF8(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if (r >= 0xFDD0 && r <= 0xFDEF) || r&0xFFFE == 0xFFFE {
			return false
		}
	}
	return true
}

// stringIsSafe is systemd's string_is_safe: no control characters, quotes or
// backslashes.
func stringIsSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c > 0 && c < ' ') || c == 0x7f || c == '"' || c == '\'' || c == '\\' {
			return false
		}
	}
	return true
}

// Extract flags of extract_first_word (extract-word.h, 252) that nodedns's parsers use.
const (
	exUnquote       = 1 << iota // EXTRACT_UNQUOTE: quotes group and are removed
	exCUnescape                 // EXTRACT_CUNESCAPE: C escapes are undone
	exRelax                     // EXTRACT_RELAX: unbalanced quotes or a trailing backslash end the word
	exUnescapeRelax             // EXTRACT_UNESCAPE_RELAX: an unknown escape keeps its backslash
	exRetainEscape              // EXTRACT_RETAIN_ESCAPE: a backslash is a character like any other
)

// The errors of extractWord, each one of extract_first_word's -EINVAL.
var (
	errTrailingBackslash = errors.New("trailing backslash")
	errEscape            = errors.New("invalid escape sequence")
	errUnbalanced        = errors.New("unbalanced quotes")
)

// extractWord is extract_first_word with WHITESPACE separators. It returns
// the word, the rest of the input, and ok false when no word is left.
func extractWord(s string, flags int) (word, rest string, ok bool, err error) {
	i := 0
	for i < len(s) && strings.IndexByte(whitespace, s[i]) >= 0 {
		i++
	}
	if i >= len(s) {
		return "", "", false, nil
	}
	var b strings.Builder
	var quote byte
	for i < len(s) {
		c := s[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
			i++
		case c == '\\' && flags&exRetainEscape == 0:
			if i+1 >= len(s) {
				if flags&exUnescapeRelax != 0 && (quote == 0 || flags&exRelax != 0) {
					b.WriteByte('\\')
					return b.String(), "", true, nil
				}
				if flags&exRelax != 0 {
					return b.String(), "", true, nil
				}
				return "", s, false, errTrailingBackslash
			}
			if flags&exCUnescape != 0 {
				r, n, eightBit, ok := cunescapeOne(s[i+1:])
				switch {
				case ok && eightBit:
					b.WriteByte(byte(r))
					i += 1 + n
				case ok:
					b.WriteRune(r)
					i += 1 + n
				case flags&exUnescapeRelax != 0:
					b.WriteByte('\\')
					b.WriteByte(s[i+1])
					i += 2
				default:
					return "", s, false, errEscape
				}
			} else {
				b.WriteByte(s[i+1])
				i += 2
			}
		case quote != 0:
			b.WriteByte(c)
			i++
		case (c == '\'' || c == '"') && flags&exUnquote != 0:
			quote = c
			i++
		case strings.IndexByte(whitespace, c) >= 0:
			for i < len(s) && strings.IndexByte(whitespace, s[i]) >= 0 {
				i++
			}
			return b.String(), s[i:], true, nil
		default:
			b.WriteByte(c)
			i++
		}
	}
	if quote != 0 && flags&exRelax == 0 {
		return "", s, false, errUnbalanced
	}
	return b.String(), "", true, nil
}

// extractWordAndWarn is extract_first_word_and_warn: on an invalid escape it
// retries keeping the unknown escapes verbatim.
func extractWordAndWarn(s string, flags int) (string, string, bool, error) {
	w, rest, ok, err := extractWord(s, flags)
	if err == nil || flags&exUnescapeRelax != 0 {
		return w, rest, ok, err
	}
	return extractWord(s, flags|exUnescapeRelax)
}

// cunescapeOne is cunescape_one of escape.c (252) without NUL: the escape
// after a backslash, its length, and whether it is a raw byte.
func cunescapeOne(s string) (r rune, n int, eightBit, ok bool) {
	if s == "" {
		return 0, 0, false, false
	}
	switch s[0] {
	case 'a':
		return '\a', 1, false, true
	case 'b':
		return '\b', 1, false, true
	case 'f':
		return '\f', 1, false, true
	case 'n':
		return '\n', 1, false, true
	case 'r':
		return '\r', 1, false, true
	case 't':
		return '\t', 1, false, true
	case 'v':
		return '\v', 1, false, true
	case '\\', '"', '\'':
		return rune(s[0]), 1, false, true
	case 's':
		return ' ', 1, false, true
	case 'x':
		if len(s) < 3 || !ascii.IsHex(s[1]) || !ascii.IsHex(s[2]) {
			return 0, 0, false, false
		}
		v := ascii.HexVal(s[1])<<4 | ascii.HexVal(s[2])
		if v == 0 {
			return 0, 0, false, false
		}
		return rune(v), 3, true, true
	case 'u', 'U':
		n := 4
		if s[0] == 'U' {
			n = 8
		}
		if len(s) < 1+n {
			return 0, 0, false, false
		}
		var v uint32
		for i := 1; i <= n; i++ {
			if !ascii.IsHex(s[i]) {
				return 0, 0, false, false
			}
			v = v<<4 | uint32(ascii.HexVal(s[i]))
		}
		if v == 0 || (s[0] == 'U' && !unicharValid(v)) {
			return 0, 0, false, false
		}
		return rune(v), 1 + n, false, true
	case '0', '1', '2', '3', '4', '5', '6', '7':
		if len(s) < 3 {
			return 0, 0, false, false
		}
		v := 0
		for i := 0; i < 3; i++ {
			if s[i] < '0' || s[i] > '7' {
				return 0, 0, false, false
			}
			v = v<<3 | int(s[i]-'0')
		}
		if v == 0 || v > 255 {
			return 0, 0, false, false
		}
		return rune(v), 3, true, true
	}
	return 0, 0, false, false
}

// unicharValid is unichar_is_valid (utf8.c): a Unicode scalar value that is
// not a noncharacter.
func unicharValid(v uint32) bool {
	return v < 0x110000 && v&0xFFFFF800 != 0xD800 && !(v >= 0xFDD0 && v <= 0xFDEF) && v&0xFFFE != 0xFFFE
}

// splitWords splits s into words with extractWord and flags, as systemd's parsers loop over a
// value. On an error it returns the words before the bad one, with the error.
func splitWords(s string, flags int) ([]string, error) {
	var words []string
	for {
		w, rest, ok, err := extractWord(s, flags)
		if err != nil {
			return words, err
		}
		if !ok {
			return words, nil
		}
		words, s = append(words, w), rest
	}
}

// envAssignments is parse_env_file_internal (env-file.c, 252), the grammar of environment files
// (EnvironmentFile=) and of the state files networkd and resolved write: KEY=VALUE assignments,
// blank lines and # or ; comments (a comment ending in a backslash goes on to the next line); a
// value in single quotes is literal; in double quotes a backslash escapes " \ ` $ and a newline (a
// continuation line, eaten whole) and is kept before anything else; unquoted, a backslash escapes
// the next character (a newline is eaten) and trailing blanks are dropped. Quoted and unquoted
// parts join: A="x"'y'z is xyz. A line ends at '\n' or '\r'. The data is read up to its first NUL.
// push gets each assignment in order, the key stripped of blanks, with the line its key is on. An
// assignment that is not UTF-8 clean makes the whole read fail (check_utf8ness_and_warn): it
// returns that assignment's line, after pushing the ones before it, or 0.
func envAssignments(data []byte, push func(key, value string, line int)) (badLine int) {
	const (
		preKey = iota
		key
		preValue
		value
		valueEscape
		singleQuote
		doubleQuote
		doubleQuoteEscape
		comment
		commentEscape
	)
	var (
		state    = preKey
		line     = 1
		keyLine  int
		k, v     []byte
		hasValue bool
		lastKeyW = -1 // index where trailing whitespace of the key starts
		lastValW = -1
	)
	// The data is read up to its first NUL, as read_full_stream hands a C string.
	if i := strings.IndexByte(string(data), 0); i >= 0 {
		data = data[:i]
	}
	// emit is the push of env-file.c: check_utf8ness_and_warn, then the caller's push. It reports
	// false when the assignment is not UTF-8 clean, which ends the read.
	emit := func() bool {
		if lastKeyW >= 0 {
			k = k[:lastKeyW]
		}
		name, val := string(k), string(v)
		if !validUTF8(name) || (hasValue && !validUTF8(val)) {
			return false
		}
		push(name, val, keyLine)
		k, v, hasValue, lastKeyW, lastValW = k[:0], nil, false, -1, -1
		return true
	}
	isNL := func(c byte) bool { return c == '\n' || c == '\r' }
	isWS := func(c byte) bool { return strings.IndexByte(whitespace, c) >= 0 }
	// appendTracking appends c to b and keeps *lastW at the start of the blanks that end b (-1:
	// none), which are dropped when the key or the unquoted value ends.
	appendTracking := func(b []byte, c byte, lastW *int) []byte {
		if !isWS(c) {
			*lastW = -1
		} else if *lastW < 0 {
			*lastW = len(b)
		}
		return append(b, c)
	}
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch state {
		case preKey:
			switch {
			case strings.IndexByte(comments, c) >= 0:
				state = comment
			case !isWS(c):
				state, keyLine, lastKeyW = key, line, -1
				k = append(k[:0], c)
			}
		case key:
			switch {
			case isNL(c):
				state, k = preKey, k[:0]
			case c == '=':
				state, lastValW = preValue, -1
			default:
				k = appendTracking(k, c, &lastKeyW)
			}
		case preValue:
			switch {
			case isNL(c):
				if !emit() {
					return keyLine
				}
				state = preKey
			case c == '\'':
				state, hasValue = singleQuote, true
			case c == '"':
				state, hasValue = doubleQuote, true
			case c == '\\':
				state, hasValue = valueEscape, true
			case !isWS(c):
				state, hasValue = value, true
				v = append(v, c)
			}
		case value:
			switch {
			case isNL(c):
				if lastValW >= 0 {
					v = v[:lastValW]
				}
				if !emit() {
					return keyLine
				}
				state = preKey
			case c == '\\':
				state, lastValW = valueEscape, -1
			default:
				v = appendTracking(v, c, &lastValW)
			}
		case valueEscape:
			state = value
			if !isNL(c) {
				v = append(v, c)
			}
		case singleQuote:
			if c == '\'' {
				state = preValue
			} else {
				v = append(v, c)
			}
		case doubleQuote:
			switch c {
			case '"':
				state = preValue
			case '\\':
				state = doubleQuoteEscape
			default:
				v = append(v, c)
			}
		case doubleQuoteEscape:
			state = doubleQuote
			switch {
			case strings.IndexByte("\"\\`$", c) >= 0:
				v = append(v, c)
			case c != '\n':
				v = append(v, '\\', c)
			}
		case comment:
			switch {
			case c == '\\':
				state = commentEscape
			case isNL(c):
				state = preKey
			}
		case commentEscape:
			state = comment
		}
		if c == '\n' {
			line++
		}
	}
	switch state {
	case preValue, value, valueEscape, singleQuote, doubleQuote, doubleQuoteEscape:
		if state == value && lastValW >= 0 {
			v = v[:lastValW]
		}
		if !emit() {
			return keyLine
		}
	}
	return 0
}
