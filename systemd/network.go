package systemd

// network.go reads systemd-networkd's .network files as far as nodedns fixes them: which ones turn
// DHCP on, and for which links (docs/contract.md "DHCP search domains"); nodedns's drop-in for one is
// the caller's (node).

import (
	"bufio"
	"bytes"
	"path"
	"strings"

	"github.com/nodedns/nodedns/internal/nodefs"
)

// NetworkDirs are systemd-networkd's .network directories, highest priority first
// (systemd.network(5), 252): a file shadows same-named files in later directories.
var NetworkDirs = []string{"/etc/systemd/network", "/run/systemd/network", "/usr/local/lib/systemd/network", "/lib/systemd/network", "/usr/lib/systemd/network"}

// Network is a systemd-networkd .network file that turns DHCP on.
type Network struct {
	Path         string   // node path of the .network file
	MatchNames   []string // [Match] Name= values
	DHCP4, DHCP6 bool     // [Network] DHCP=
}

// LoadNetworks reads the .network files that turn DHCP on, in networkd's order (nodefs.DropIns):
// every file in /etc and /run, and a vendor file (/lib: container host0, ...) only when one of links
// uses it. netplan's own files in /run/systemd/network are left out: those are changed through
// netplan, never with a drop-in. A directory that cannot be listed or a file that cannot be read is
// a Warning.
func LoadNetworks(r nodefs.Reader, links []LinkState) ([]Network, []Warning) {
	inUse := map[string]bool{}
	for _, l := range links {
		if l.NetworkFile != "" {
			inUse[path.Clean(l.NetworkFile)] = true
		}
	}
	var warns []Warning
	found, errs := nodefs.DropIns(r, NetworkDirs, ".network")
	for _, err := range errs {
		warns = append(warns, Warning{Msg: err.Error()})
	}
	var out []Network
	for _, d := range found {
		dir := path.Dir(d.Path)
		// netplan renders its own files into /run/systemd/network: those are changed through
		// netplan, never with a drop-in.
		if strings.HasPrefix(d.Name, "10-netplan-") && dir == "/run/systemd/network" {
			continue
		}
		// Vendor files (/lib: container host0, ...) count only when a link actually uses them.
		if !inUse[d.Path] && dir != "/etc/systemd/network" && dir != "/run/systemd/network" {
			continue
		}
		data, err := r.ReadFile(d.Path, nodefs.Config)
		if err != nil {
			warns = append(warns, Warning{Path: d.Path, Msg: err.Error()})
			continue
		}
		if n := ParseNetworkFile(d.Path, data); n.DHCP4 || n.DHCP6 {
			out = append(out, n)
		}
	}
	return out, warns
}

// NetworkWatches declares the directories LoadNetworks reads.
func NetworkWatches() []nodefs.Watch {
	ws := make([]nodefs.Watch, 0, len(NetworkDirs))
	for _, d := range NetworkDirs {
		ws = append(ws, nodefs.Watch{Dir: d, Match: nodefs.Suffix(".network"), Complete: nodefs.NewlineTerminated})
	}
	return ws
}

// ParseNetworkFile reads the keys nodedns needs from a .network file: [Match] Name= and
// [Network] DHCP=. systemd's unit-file syntax (systemd.syntax(7)): comments start with # or ;,
// a line ending in a backslash continues, later assignments win, an empty Name= resets the list.
// Anything it does not understand is ignored, as networkd ignores unknown keys with a warning.
//
// It still splits lines itself rather than through parseConf: reading it as config_parse does would
// change which files count (networkd refuses a file with a bad section header or a line that is not
// UTF-8; a comment inside a continuation is skipped), and so would reading the file's drop-ins
// (NAME.network.d/*.conf), which networkd merges and this does not; both want checking against
// networkd itself before they change what nodedns fixes.
func ParseNetworkFile(p string, data []byte) Network {
	n := Network{Path: p}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), int(nodefs.Config.Max))
	var cont strings.Builder
	for sc.Scan() {
		line := sc.Text()
		if cont.Len() > 0 {
			line = cont.String() + " " + strings.TrimSpace(line)
			cont.Reset()
		}
		t := strings.TrimSpace(line)
		if strings.HasSuffix(t, "\\") {
			cont.WriteString(strings.TrimSuffix(t, "\\"))
			continue
		}
		if t == "" || t[0] == '#' || t[0] == ';' {
			continue
		}
		if t[0] == '[' && strings.HasSuffix(t, "]") {
			section = t[1 : len(t)-1]
			continue
		}
		k, v, ok := strings.Cut(t, "=")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case section == "Match" && k == "Name":
			if v == "" {
				n.MatchNames = nil
				continue
			}
			n.MatchNames = append(n.MatchNames, strings.Fields(v)...)
		case section == "Network" && k == "DHCP":
			// systemd 252 network-util.c: yes/true/both and the booleans, ipv4, ipv6.
			switch strings.ToLower(v) {
			case "yes", "true", "on", "1", "y", "t", "both":
				n.DHCP4, n.DHCP6 = true, true
			case "ipv4":
				n.DHCP4, n.DHCP6 = true, false
			case "ipv6":
				n.DHCP4, n.DHCP6 = false, true
			default:
				n.DHCP4, n.DHCP6 = false, false
			}
		}
	}
	return n
}
