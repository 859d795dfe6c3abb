package networkmanager

import (
	"cmp"
	"errors"
	"io/fs"
	"path"
	"strings"

	"github.com/nodedns/nodedns/internal/nodefs"
)

// Files is what NetworkManager's files on a node say (Load): its configuration as NM 1.42 merges it,
// in three views, its connection profiles, and what DHCP handed its devices.
type Files struct {
	// RunDir: /run/NetworkManager exists (NM runs, or ran since boot).
	RunDir bool
	// Config is NM's configuration with every file; Others without zz-nodedns.conf (what the rest
	// of the node asks for); Persistent without /run/NetworkManager/conf.d (what the next boot
	// reads). Each is nil when NM would refuse it, with the reason in its Err (a *ParseError for a
	// file GKeyFile cannot parse).
	Config, Others, Persistent          *Config
	ConfigErr, OthersErr, PersistentErr error
	// Connections are the keyfile profiles (nil when none could be listed).
	Connections *Connections
	// Devices are the devices with a state file in /run/NetworkManager/devices, by ifindex.
	Devices []Device
}

// Device is what DHCP handed one NetworkManager device.
type Device struct {
	IfIndex int
	IfName  string
	// ConnectionUUID is the active connection's profile ("" when unknown: NM 1.42's device
	// object over D-Bus does not name it).
	ConnectionUUID string
	// Source names where it was read: the device state file, or the D-Bus device.
	Source       string
	DHCP4, DHCP6 DHCPDNS
}

// Backups gives the bytes nodedns backed up for a node path before its first change; ok is false
// when it backed up no file there.
type Backups func(nodePath string) (data []byte, ok bool)

// Load reads NetworkManager's files through r. A configuration NM refuses is a Problem (NM would
// refuse it too: a reload keeps the old one, a restart does not come up), and so is each keyfile or
// device state file that does not parse. backups gives the intern file as it was before nodedns's
// first change to it (nil: no backups).
func Load(r nodefs.Reader, backups Backups) (Files, []nodefs.Problem) {
	var (
		f  Files
		ps []nodefs.Problem
	)
	problem := func(p string, err error) { ps = append(ps, nodefs.Problem{Path: p, Msg: err.Error()}) }
	if fi, err := r.Stat(NMRunDir); err == nil && fi.IsDir() {
		f.RunDir = true
	}

	fsys := ReaderFS(r)
	f.Config, f.ConfigErr = LoadConfig(fsys)
	// What the rest of the node asks for: without nodedns's file, and with the intern file as it was
	// before nodedns's override made NM drop a global DNS set over D-Bus (NM 1.42.4 drops it for
	// good at the reload; the backup is what `restore` puts back). Without that, the D-Bus
	// configuration's searches would vanish from the override after its first reload.
	others := map[string][]byte{NodeDNSConfPath: nil}
	if backups != nil {
		if data, ok := backups(InternConfPath); ok {
			others[InternConfPath] = data
		}
	}
	f.Others, f.OthersErr = LoadConfig(Overlay(fsys, others))
	gone := map[string][]byte{}
	if names, err := fsys.ReadDir(RunConfDir); err == nil {
		for _, name := range names {
			gone[path.Join(RunConfDir, name)] = nil
		}
	}
	f.Persistent, f.PersistentErr = LoadConfig(Overlay(fsys, gone))
	// One problem per bad file: the configuration without nodedns's file fails the same way, unless
	// nodedns's own file is the bad one.
	if err := cmp.Or(f.OthersErr, f.ConfigErr); err != nil {
		problem(errPath(err), err)
	}
	if f.Config != nil && f.Config.InternError != nil && !errors.Is(f.Config.InternError, fs.ErrNotExist) {
		problem(InternConfPath, f.Config.InternError)
	}

	cs, err := LoadConnections(fsys)
	if err != nil {
		problem("", err)
	} else {
		f.Connections = cs
		for _, err := range cs.Errors {
			problem(errPath(err), err)
		}
	}

	states, errs := LoadDeviceStates(fsys)
	for _, err := range errs {
		problem(errPath(err), err)
	}
	if len(states) == 0 {
		return f, ps
	}
	names, _ := nodefs.IfNames(r) // a name is for people: a device without one still counts
	for _, st := range states {
		d := Device{IfIndex: st.IfIndex, IfName: names[st.IfIndex], ConnectionUUID: st.ConnectionUUID, Source: st.Path}
		if st.DHCP4 != nil {
			d.DHCP4 = DHCP4DNS(st.DHCP4)
		}
		if st.DHCP6 != nil {
			d.DHCP6 = DHCP6DNS(st.DHCP6)
		}
		f.Devices = append(f.Devices, d)
	}
	return f, ps
}

// errPath is the file an error of this package is about ("" when it names none).
func errPath(err error) string {
	var pe *ParseError
	if errors.As(err, &pe) {
		return pe.Path
	}
	var pathErr *fs.PathError
	if errors.As(err, &pathErr) && strings.HasPrefix(pathErr.Path, "/") {
		return pathErr.Path
	}
	return ""
}
