package networkmanager

import (
	"path"
	"strings"

	"github.com/nodedns/nodedns/internal/nodefs"
)

// Watches declares every directory this package reads (LoadConfig, LoadConnections,
// LoadDeviceStates), for the daemon: NM's configuration and connection profiles change when an
// operator or kubespray edits them (NM itself reads them only on Reload or restart), and the device
// state files change on every DHCP lease NM takes (NM 1.42 rewrites /run/NetworkManager/devices/
// IFINDEX on a renewal with new options). NM writes its files with g_file_set_contents (a temp file
// "NAME.XXXXXX" renamed into place): the matches leave the temp names out.
func Watches() []nodefs.Watch {
	conf := func(n string) bool { return strings.HasSuffix(n, ".conf") }
	keyfile := func(n string) bool { return !ignoreKeyfileName(n, false) }
	ws := []nodefs.Watch{
		{Dir: path.Dir(MainConfPath), Match: nodefs.Names(path.Base(MainConfPath), path.Base(OldMainConfPath)), Complete: nodefs.NewlineTerminated},
		{Dir: path.Dir(InternConfPath), Match: nodefs.Names(path.Base(InternConfPath))},
		{Dir: DevicesDir, Match: nodefs.Numeric, Complete: completeDeviceState},
		// The run directory itself: that it exists says NM runs (or ran since boot).
		{Dir: NMRunDir, Match: nodefs.Names()},
	}
	for _, d := range []string{SystemConfDir, RunConfDir, EtcConfDir} {
		ws = append(ws, nodefs.Watch{Dir: d, Match: conf})
	}
	for _, d := range []string{LibConnectionsDir, EtcConnectionsDir, RunConnectionsDir} {
		ws = append(ws, nodefs.Watch{Dir: d, Match: keyfile})
	}
	return ws
}

// completeDeviceState: a device state file is complete once it parses as a key file.
func completeDeviceState(b []byte) error {
	_, err := ParseKeyFile("device state", b)
	return err
}
