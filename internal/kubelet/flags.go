package kubelet

import "strings"

// ParseCmdline splits /proc/PID/cmdline: arguments each ended by a NUL. A
// process that rewrote its arguments into one string with spaces (as
// setproctitle does) comes out as that one string; kubelet does not do that.
func ParseCmdline(data []byte) []string {
	if len(data) == 0 {
		return nil
	}
	s := string(data)
	s = strings.TrimSuffix(s, "\x00")
	return strings.Split(s, "\x00")
}

// Flags are kubelet's own configuration flags as it parses them.
type Flags struct {
	// Config is --config: the KubeletConfiguration file (resolvConf,
	// clusterDNS, clusterDomain). A relative path is relative to kubelet's
	// working directory (/ under systemd unless WorkingDirectory= says
	// otherwise).
	Config    string
	HasConfig bool
	// ConfigDir is --config-dir (kubelet 1.28+): drop-ins merged over Config,
	// which can set resolvConf and clusterDNS too.
	ConfigDir    string
	HasConfigDir bool
	// ResolvConf is --resolv-conf: kubelet applies its flags over the config
	// and its drop-ins, so this one decides the file pods get whatever
	// resolvConf the config says.
	ResolvConf    string
	HasResolvConf bool
	// ConfigIndex, ConfigDirIndex and ResolvConfIndex are the positions in
	// the argument list of the arguments that set them (-1 when unset).
	ConfigIndex, ConfigDirIndex, ResolvConfIndex int
}

// FlagsFromArgs finds --config, --config-dir and --resolv-conf in kubelet's arguments
// (argv without argv[0]) as its pflag flag set parses them: --config=PATH or
// --config PATH (the next argument, whatever it looks like), the last one
// winning; `--` ends the flags; '_' and '-' are the same in flag names
// (kubelet's WordSepNormalizeFunc). Other flags are not interpreted, so the
// value of another flag written as "--flag --config" would be misread; no
// kubelet flag takes such a value.
func FlagsFromArgs(args []string) Flags {
	f := Flags{ConfigIndex: -1, ConfigDirIndex: -1, ResolvConfIndex: -1}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if !strings.HasPrefix(a, "--") {
			continue
		}
		name, val, hasVal := strings.Cut(a[2:], "=")
		name = strings.ReplaceAll(name, "_", "-")
		if name != "config" && name != "config-dir" && name != "resolv-conf" {
			continue
		}
		idx := i
		if !hasVal {
			if i+1 >= len(args) {
				break // kubelet exits: "flag needs an argument"
			}
			i++
			val = args[i]
		}
		switch name {
		case "config":
			f.Config, f.HasConfig, f.ConfigIndex = val, true, idx
		case "config-dir":
			f.ConfigDir, f.HasConfigDir, f.ConfigDirIndex = val, true, idx
		default:
			f.ResolvConf, f.HasResolvConf, f.ResolvConfIndex = val, true, idx
		}
	}
	return f
}
