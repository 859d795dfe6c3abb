package systemd

// unit.go reads how a service unit starts its program, from files only: the
// unit file and its drop-ins ([Service] ExecStart=, Environment=,
// EnvironmentFile=, Type=), the environment files they name, the expansion
// of $VAR and ${VAR} in the command line. internal/kubelet uses it to find
// the configuration file kubelet really reads (its --config): kubespray
// writes it into /etc/kubernetes/kubelet.env, kubeadm into 10-kubeadm.conf.
// It also reads a unit's dependencies ([Unit] Before= and the like), which
// internal/node checks for the nodedns unit. Every rule follows systemd 252
// (src/core/load-fragment.c, src/basic/env-util.c of v252), over the lexer of
// lex.go (conf-parser.c, env-file.c, extract-word.c, escape.c); nothing here
// reads a file or talks to D-Bus.

import (
	"fmt"
	"path"
	"strings"

	"github.com/nodedns/nodedns/internal/ascii"
)

// UnitFile is one unit file or drop-in, as read from the node.
type UnitFile struct {
	Path string // node path, for file:line
	Data []byte
}

// ExecCommand is one command of ExecStart= as systemd parsed it, before the
// environment is expanded (that happens when the command starts: ExpandArgv).
type ExecCommand struct {
	// Path is the executable, prefixes taken off and the path simplified.
	Path string
	// Argv is the argument vector as written ($VAR references kept).
	Argv []string
	// IgnoreFailure is the '-' prefix; NoEnvExpand the ':' prefix (no
	// $VAR expansion at all).
	IgnoreFailure, NoEnvExpand bool
	// Source is the ExecStart= line (its first line when continued).
	Source Setting
}

// EnvVar is one environment assignment with where it was written.
type EnvVar struct {
	Name, Value string
	Source      Setting
}

// EnvFile is one EnvironmentFile= entry.
type EnvFile struct {
	// Path is absolute and simplified. systemd expands glob patterns in it
	// when the command starts: a caller that reads the files must too.
	Path string
	// Optional is the '-' prefix: a missing or unreadable file is skipped.
	// Without it, systemd refuses to start the command.
	Optional bool
	Source   Setting
}

// ServiceUnit is what a service's unit file and drop-ins set for how its
// program starts.
type ServiceUnit struct {
	// Name is the unit name (kubelet.service); it resolves %n, %N, %p, %i.
	Name string
	// envIdx indexes Environment by name while the unit is parsed (setEnv).
	envIdx map[string]int
	// Type is [Service] Type= ("" when unset: simple).
	Type string
	// ExecStart are the commands after every reset (an empty ExecStart=
	// drops the ones before it, as kubeadm's 10-kubeadm.conf does).
	ExecStart []ExecCommand
	// Environment are Environment= assignments; a later one of the same name
	// replaces an earlier one in place.
	Environment []EnvVar
	// EnvironmentFiles are EnvironmentFile= entries in order (later files win).
	EnvironmentFiles []EnvFile
	// Warnings are lines systemd would log and skip.
	Warnings []Warning
	// Err is set when systemd 252 would refuse to load the unit (an invalid
	// section header, a line that is not UTF-8, an ExecStart= it cannot
	// parse, more than one ExecStart= outside Type=oneshot). The other fields
	// hold what was read.
	Err error
}

// ParseServiceUnit reads a service unit from its files in the order systemd
// applies them: the unit file first, then its drop-ins (the caller orders
// them: systemd sorts the *.conf of every kubelet.service.d directory by file
// name, a name in a higher-priority directory shadowing the same name in a
// lower one).
func ParseServiceUnit(name string, files []UnitFile) *ServiceUnit {
	u := &ServiceUnit{Name: name}
	for _, f := range files {
		if u.Err != nil {
			break
		}
		u.parseFile(f)
	}
	if u.Err == nil && len(u.ExecStart) > 1 && u.Type != "oneshot" {
		// service_verify in 252: "Service has more than one ExecStart=
		// setting, which is only allowed for Type=oneshot services."
		src := u.ExecStart[1].Source
		u.Err = fmt.Errorf("%s: more than one ExecStart= in a Type=%s service: systemd refuses to load %s", src, orDefault(u.Type, "simple"), name)
	}
	u.envIdx = nil // parsing is done: the unit is plain data again
	return u
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (u *ServiceUnit) warn(p string, line int, format string, args ...any) {
	u.Warnings = append(u.Warnings, Warning{Path: p, Line: line, Msg: fmt.Sprintf(format, args...)})
}

func (u *ServiceUnit) fail(p string, line int, format string, args ...any) {
	u.Err = fmt.Errorf("%s:%d: %s", p, line, fmt.Sprintf(format, args...))
}

// serviceSections are the sections of a service unit (service_vtable's .sections, service.c 252):
// systemd warns about any other and skips its lines.
var serviceSections = []string{"Unit", "Service", "Install"}

// parseFile is config_parse of conf-parser.c (252) over one file (parseConf). A setting's line is
// the first physical line of a continued one (systemd itself names the last; the first is where a
// reader finds the key).
func (u *ServiceUnit) parseFile(f UnitFile) {
	parseConf(f.Data, serviceSections, func(a confAssignment) bool {
		if a.section != "Service" {
			return true // [Unit] and [Install] say nothing about how the program starts
		}
		return u.assign(Setting{Path: f.Path, Line: a.first}, a.key, a.value)
	}, func(i confIssue) {
		switch {
		case i.kind == issueNotUTF8:
			u.fail(f.Path, i.first, "line is not valid UTF-8: systemd refuses to load the unit")
		case i.fatal():
			u.fail(f.Path, i.first, "%s", i)
		default:
			u.warn(f.Path, i.first, "%s", i)
		}
	})
}

// assign applies one [Service] setting. It returns false when the unit fails to load.
func (u *ServiceUnit) assign(src Setting, key, value string) bool {
	switch key { // keys are case-sensitive, as systemd's gperf table is
	case "ExecStart":
		return u.execStart(src, value)
	case "Environment":
		u.environment(src, value)
	case "EnvironmentFile":
		u.environmentFile(src, value)
	case "Type":
		u.Type = value
	}
	return true
}

// UnitDependencies returns the units that the dependency setting key of [Unit] (Before=, After=,
// Wants=, Requires=, ...) names in a service unit's files, applied in the order ParseServiceUnit
// takes them, as config_parse_unit_deps (load-fragment.c, 252) reads them: words split at blanks
// with quotes and backslashes kept (EXTRACT_RETAIN_ESCAPE), the specifiers that depend on the unit's
// name resolved (a word with an unknown one is skipped, as systemd skips it), and an empty
// assignment adding nothing: a dependency cannot be reset (systemd.unit(5)). Names are not checked
// as unit_add_dependency_by_name checks them: a word systemd drops names no unit. fatal is set where
// systemd refuses to load the unit (a bad section header, a line that is not UTF-8); deps then hold
// what was read before it.
func UnitDependencies(name, key string, files []UnitFile) (deps []string, fatal *Warning) {
	for _, f := range files {
		parseConf(f.Data, serviceSections, func(a confAssignment) bool {
			if a.section != "Unit" || a.key != key {
				return true
			}
			words, _ := splitWords(a.value, exRetainEscape) // no quotes or escapes: nothing can fail
			for _, w := range words {
				if d, err := unitSpecifiers(name, w); err == nil {
					deps = append(deps, d)
				}
			}
			return true
		}, func(i confIssue) {
			if i.fatal() {
				fatal = &Warning{Path: f.Path, Line: i.first, Msg: i.String() + ": systemd refuses to load the unit"}
			}
		})
		if fatal != nil {
			return deps, fatal
		}
	}
	return deps, nil
}

// execStart is config_parse_exec (load-fragment.c, 252). It returns false when
// the unit fails to load.
func (u *ServiceUnit) execStart(src Setting, value string) bool {
	if value == "" {
		u.ExecStart = nil // an empty assignment resets the list
		return true
	}
	p := value
	for semicolon := true; semicolon; {
		semicolon = false
		first, rest, ok, err := extractWordAndWarn(p, exUnquote|exCUnescape)
		if err != nil {
			u.fail(src.Path, src.Line, "ExecStart=: unbalanced quoting in %q", value)
			return false
		}
		if !ok {
			return true
		}
		p = rest
		if first == ";" {
			semicolon = true
			continue
		}
		c := ExecCommand{Source: src}
		argv0 := false
		// The privilege prefixes change nothing nodedns reads, but which
		// combinations are prefixes decides where the path starts: "+",
		// "!" or "!!", once.
		priv := ""
		f := first
	prefixes:
		for f != "" {
			switch {
			case f[0] == '-' && !c.IgnoreFailure:
				c.IgnoreFailure = true
			case f[0] == '@' && !argv0:
				argv0 = true
			case f[0] == ':' && !c.NoEnvExpand:
				c.NoEnvExpand = true
			case f[0] == '+' && priv == "":
				priv = "+"
			case f[0] == '!' && (priv == "" || priv == "!"):
				priv += "!"
			default:
				break prefixes
			}
			f = f[1:]
		}
		bad := func(format string, args ...any) bool {
			if c.IgnoreFailure {
				u.warn(src.Path, src.Line, "ExecStart=: "+format+", ignoring", args...)
				return true
			}
			u.fail(src.Path, src.Line, "ExecStart=: "+format, args...)
			return false
		}
		exe, err := u.specifiers(f)
		if err != nil {
			return bad("%v", err)
		}
		switch {
		case exe == "":
			return bad("empty executable path in %q", value)
		case !stringIsSafe(exe):
			return bad("executable name contains special characters: %q", exe)
		case strings.HasSuffix(exe, "/"):
			return bad("executable path is a directory: %q", exe)
		case !strings.HasPrefix(exe, "/") && (strings.Contains(exe, "/") || exe == "." || exe == ".." || len(exe) > 255),
			strings.HasPrefix(exe, "/") && !pathValid(exe):
			return bad("neither a valid executable name nor an absolute path: %q", exe)
		}
		if !argv0 {
			c.Argv = append(c.Argv, exe)
		}
		c.Path = simplifyPath(exe)
		for p != "" {
			if p[0] == ';' && (len(p) == 1 || strings.IndexByte(whitespace, p[1]) >= 0) {
				p = strings.TrimLeft(p[1:], whitespace)
				semicolon = true
				break
			}
			if strings.HasPrefix(p, `\;`) && (len(p) == 2 || strings.IndexByte(whitespace, p[2]) >= 0) {
				p = strings.TrimLeft(p[2:], whitespace)
				c.Argv = append(c.Argv, ";")
				continue
			}
			w, rest, ok, err := extractWordAndWarn(p, exUnquote|exCUnescape)
			if err != nil {
				return bad("unbalanced quoting in %q", value)
			}
			if !ok {
				break
			}
			p = rest
			w, err = u.specifiers(w)
			if err != nil {
				return bad("%v", err)
			}
			c.Argv = append(c.Argv, w)
		}
		if len(c.Argv) == 0 {
			return bad("empty executable name or zeroeth argument in %q", value)
		}
		u.ExecStart = append(u.ExecStart, c)
	}
	return true
}

// environment is config_parse_environ (load-fragment.c, 252).
func (u *ServiceUnit) environment(src Setting, value string) {
	if value == "" {
		u.Environment = nil
		return
	}
	for p := value; ; {
		w, rest, ok, err := extractWord(p, exCUnescape|exUnquote)
		if err != nil {
			u.warn(src.Path, src.Line, "Environment=: invalid syntax, ignoring: %s", value)
			return
		}
		if !ok {
			return
		}
		p = rest
		w, err = u.specifiers(w)
		if err != nil {
			u.warn(src.Path, src.Line, "Environment=: %v, ignoring", err)
			continue
		}
		name, val, found := strings.Cut(w, "=")
		if !found || !envNameValid(name) || !validUTF8(val) {
			u.warn(src.Path, src.Line, "Environment=: invalid environment assignment, ignoring: %s", w)
			continue
		}
		u.setEnv(EnvVar{Name: name, Value: val, Source: src})
	}
}

// setEnv is envReplace over u.Environment with an index of its names (unique, as envReplace keeps
// them), so thousands of drop-ins each setting a variable stay linear. The index is rebuilt when
// the list was changed without it (a reset).
func (u *ServiceUnit) setEnv(v EnvVar) {
	if u.envIdx == nil || len(u.envIdx) != len(u.Environment) {
		u.envIdx = make(map[string]int, len(u.Environment))
		for i, e := range u.Environment {
			u.envIdx[e.Name] = i
		}
	}
	if i, ok := u.envIdx[v.Name]; ok {
		u.Environment[i] = v
		return
	}
	u.envIdx[v.Name] = len(u.Environment)
	u.Environment = append(u.Environment, v)
}

// environmentFile is config_parse_unit_env_file (load-fragment.c, 252).
func (u *ServiceUnit) environmentFile(src Setting, value string) {
	if value == "" {
		u.EnvironmentFiles = nil
		return
	}
	n, err := u.specifiers(value)
	if err != nil {
		u.warn(src.Path, src.Line, "EnvironmentFile=: %v, ignoring", err)
		return
	}
	f := EnvFile{Source: src}
	if strings.HasPrefix(n, "-") {
		f.Optional, n = true, n[1:]
	}
	if !strings.HasPrefix(n, "/") {
		u.warn(src.Path, src.Line, "EnvironmentFile=: path %q is not absolute, ignoring", n)
		return
	}
	n = simplifyPath(n)
	for _, c := range strings.Split(n, "/") {
		if c == ".." {
			u.warn(src.Path, src.Line, "EnvironmentFile=: path %q is not normalized, ignoring", n)
			return
		}
	}
	f.Path = n
	u.EnvironmentFiles = append(u.EnvironmentFiles, f)
}

// pathValid is path_is_valid (path-util.c, 252): at most PATH_MAX bytes and
// no component longer than NAME_MAX.
func pathValid(p string) bool {
	if p == "" || len(p) >= 4096 {
		return false
	}
	for _, c := range strings.Split(p, "/") {
		if len(c) > 255 {
			return false
		}
	}
	return true
}

// simplifyPath is path_simplify (path-util.c): repeated slashes and "."
// components go, and so does a trailing slash; ".." stays.
func simplifyPath(p string) string {
	abs := strings.HasPrefix(p, "/")
	var parts []string
	for _, c := range strings.Split(p, "/") {
		if c == "" || c == "." {
			continue
		}
		parts = append(parts, c)
	}
	out := strings.Join(parts, "/")
	if abs {
		return "/" + out
	}
	if out == "" {
		return "."
	}
	return out
}

// hostSpecifiers are the specifiers of unit_full_printf (unit-printf.c, 252)
// whose value depends on the running host or manager (file paths, cgroups,
// directories, user, host name, machine and boot ids, OS release): they are
// kept as written.
const hostSpecifiers = "fyYcrRCdELSthsaAbBHlqmMovwWgGuUTV"

// specifiers is unitSpecifiers for this unit.
func (u *ServiceUnit) specifiers(s string) (string, error) { return unitSpecifiers(u.Name, s) }

// unitSpecifiers resolves the % specifiers of a setting of unit name that
// depend on the unit's name alone (%n %N %p %P %i %I %j %J, and %% for a
// literal %). One that depends on the host is kept as written; an unknown one
// is an error, as in systemd.
func unitSpecifiers(name, s string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	base := strings.TrimSuffix(name, path.Ext(name))
	prefix, instance, _ := strings.Cut(base, "@")
	lastPart := prefix
	if i := strings.LastIndexByte(prefix, '-'); i >= 0 {
		lastPart = prefix[i+1:]
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 >= len(s) {
			return "", fmt.Errorf("failed to resolve unit specifiers in %q: a lone %% at the end", s)
		}
		i++
		switch c := s[i]; c {
		case '%':
			b.WriteByte('%')
		case 'n':
			b.WriteString(name)
		case 'N':
			b.WriteString(base)
		case 'p':
			b.WriteString(prefix)
		case 'P':
			b.WriteString(unitNameUnescape(prefix))
		case 'i':
			b.WriteString(instance)
		case 'I':
			b.WriteString(unitNameUnescape(instance))
		case 'j':
			b.WriteString(lastPart)
		case 'J':
			b.WriteString(unitNameUnescape(lastPart))
		default:
			if strings.IndexByte(hostSpecifiers, c) < 0 {
				return "", fmt.Errorf("failed to resolve unit specifiers in %q: unknown specifier %%%c", s, c)
			}
			b.WriteByte('%')
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// unitNameUnescape is unit_name_unescape: "-" is "/", "\xNN" a byte.
func unitNameUnescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '-':
			b.WriteByte('/')
		case s[i] == '\\' && i+3 < len(s) && s[i+1] == 'x' && ascii.IsHex(s[i+2]) && ascii.IsHex(s[i+3]):
			b.WriteByte(byte(ascii.HexVal(s[i+2])<<4 | ascii.HexVal(s[i+3])))
			i += 3
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// envNameValid is env_name_is_valid (env-util.c, 252): letters, digits and
// '_', not starting with a digit.
func envNameValid(n string) bool {
	if n == "" || n[0] >= '0' && n[0] <= '9' {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// envReplace is strv_env_replace_consume: the assignment replaces the first
// one of the same name in place (dropping any later ones), or is appended.
func envReplace(list []EnvVar, v EnvVar) []EnvVar {
	for i := range list {
		if list[i].Name == v.Name {
			list[i] = v
			out := list[:i+1]
			for _, w := range list[i+1:] {
				if w.Name != v.Name {
					out = append(out, w)
				}
			}
			return out
		}
	}
	return append(list, v)
}

// ParseEnvFile parses an environment file as systemd 252 reads
// EnvironmentFile= (load_env_file, env-file.c) in the grammar of envAssignments.
// A later assignment of the same name replaces an earlier one. An assignment
// whose name is not a valid variable name is skipped with a warning
// (strv_env_clean). A file that is not UTF-8 is an error: systemd then refuses
// to start the command unless the EnvironmentFile= entry is optional ('-').
func ParseEnvFile(p string, data []byte) ([]EnvVar, []Warning, error) {
	var (
		vars  []EnvVar
		warns []Warning
	)
	bad := envAssignments(data, func(name, val string, line int) {
		if !envNameValid(name) {
			warns = append(warns, Warning{Path: p, Line: line, Msg: fmt.Sprintf("invalid environment assignment %q, ignoring", name+"="+val)})
			return
		}
		vars = envReplace(vars, EnvVar{Name: name, Value: val, Source: Setting{Path: p, Line: line}})
	})
	if bad > 0 {
		return nil, nil, fmt.Errorf("%s:%d: invalid UTF-8: systemd does not load this environment file", p, bad)
	}
	return vars, warns, nil
}

// MergeEnv merges environment lists as exec_child does (strv_env_merge): a
// later list's assignment replaces an earlier one of the same name, in place.
// For a unit's command: Environment= first, then each EnvironmentFile= in
// order (systemd 252 lets the files win).
func MergeEnv(lists ...[]EnvVar) []EnvVar {
	var out []EnvVar
	idx := map[string]int{} // names in out are unique: a later assignment replaces in place
	for _, l := range lists {
		for _, v := range l {
			if i, ok := idx[v.Name]; ok {
				out[i] = v
				continue
			}
			idx[v.Name] = len(out)
			out = append(out, v)
		}
	}
	return out
}

// ExpandedArg is one argument after expansion, with the variable it came from.
type ExpandedArg struct {
	Value string
	// Var names the variable whose value this argument is (a whole-word
	// $VAR) or contains (${VAR}); "" for an argument as written.
	Var string
}

// ExpandArgv expands the environment in a command's argv as systemd 252 does
// when it starts the command (replace_env_argv, env-util.c):
//
//   - a word that is $NAME as a whole (not ${ or $$) becomes the value of
//     NAME split at whitespace, with quotes removed and a backslash taking the
//     next character literally; an unset NAME gives no argument at all;
//   - inside any other word, ${NAME} is replaced by the value as it is (an
//     unset NAME by nothing) and $$ by $; a bare $NAME inside a word, or
//     ${NAME:...}, stays as written.
//
// env is looked up by name (the last assignment of a name counts).
func ExpandArgv(argv []string, env []EnvVar) []ExpandedArg {
	get := func(name string) (string, bool) {
		for i := len(env) - 1; i >= 0; i-- {
			if env[i].Name == name {
				return env[i].Value, true
			}
		}
		return "", false
	}
	var out []ExpandedArg
	for _, a := range argv {
		if len(a) >= 1 && a[0] == '$' && (len(a) == 1 || (a[1] != '{' && a[1] != '$')) {
			name := a[1:]
			val, ok := get(name)
			if !ok {
				continue
			}
			for _, w := range SplitWords(val) {
				out = append(out, ExpandedArg{Value: w, Var: name})
			}
			continue
		}
		v, used := replaceEnv(a, get)
		out = append(out, ExpandedArg{Value: v, Var: used})
	}
	return out
}

// replaceEnv is replace_env with no flags: ${NAME} and $$ only. It returns the
// last variable it substituted.
func replaceEnv(s string, get func(string) (string, bool)) (string, string) {
	var b strings.Builder
	used := ""
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '{':
			end := -1
			for j := i + 2; j < len(s); j++ {
				if s[j] == '}' {
					end = j
					break
				}
				if s[j] == ':' {
					break // ${NAME:-x} is not expanded without REPLACE_ENV_ALLOW_EXTENDED
				}
			}
			if end < 0 {
				b.WriteByte('$')
				continue
			}
			name := s[i+2 : end]
			if name != "" {
				if v, ok := get(name); ok {
					b.WriteString(v)
				}
				used = name
			}
			i = end
		default:
			b.WriteByte('$')
		}
	}
	return b.String(), used
}

// SplitWords splits a variable's value into words as systemd does when a
// command uses it as $VAR (extract_first_word with EXTRACT_RELAX and
// EXTRACT_UNQUOTE): quotes group and are removed, unbalanced quotes end the
// last word.
func SplitWords(v string) []string {
	words, _ := splitWords(v, exRelax|exUnquote) // EXTRACT_RELAX: no error is left to return
	return words
}
