package networkmanager

import (
	"path"
	"strings"

	"github.com/nodedns/nodedns/files"
)

// Watches declares every directory this package reads (LoadConfig, LoadConnections,
// LoadDeviceStates), for the daemon: NM's configuration and connection profiles change when an
// operator or kubespray edits them (NM itself reads them only on Reload or restart), and the device
// state files change on every DHCP lease NM takes (NM 1.42 rewrites /run/NetworkManager/devices/
// IFINDEX on a renewal with new options). NM writes its files with g_file_set_contents (a temp file
// "NAME.XXXXXX" renamed into place): the matches leave the temp names out.
func Watches() []files.Watch {
	conf := func(n string) bool { return strings.HasSuffix(n, ".conf") }
	keyfile := func(n string) bool { return !ignoreKeyfileName(n, false) }
	ws := []files.Watch{
		{Dir: path.Dir(MainConfPath), Match: files.Names(path.Base(MainConfPath), path.Base(OldMainConfPath)), Complete: files.NewlineTerminated},
		{Dir: path.Dir(InternConfPath), Match: files.Names(path.Base(InternConfPath))},
		{Dir: DevicesDir, Match: files.Numeric, Complete: completeDeviceState},
		// The run directory itself: that it exists says NM runs (or ran since boot).
		{Dir: NMRunDir, Match: files.Names()},
	}
	for _, d := range []string{SystemConfDir, RunConfDir, EtcConfDir} {
		ws = append(ws, files.Watch{Dir: d, Match: conf})
	}
	for _, d := range []string{LibConnectionsDir, EtcConnectionsDir, RunConnectionsDir} {
		ws = append(ws, files.Watch{Dir: d, Match: keyfile})
	}
	return ws
}

// completeDeviceState: a device state file is complete once it parses as a key file.
func completeDeviceState(b []byte) error {
	_, err := ParseKeyFile("device state", b)
	return err
}
