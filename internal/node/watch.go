package node

import (
	"path"
	"strings"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/kubelet"
	"github.com/nodedns/nodedns/internal/networkmanager"
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/netplan"
	"github.com/nodedns/nodedns/resolvconf"
)

// Watches declares every directory Observe reads, and with them every directory a plan writes into
// (nodedns reads each file it manages): the union of what each source's row declares (the reader
// packages' Watches, this package's own files, and what the snapshot s found: the target of a
// symlinked /etc/resolv.conf, kubelet's resolvConf, the networkd .network files that have DHCP on and
// their drop-in directories), in the table's order. s may be nil before the first read. The daemon
// watches exactly this; the test in this package walks Observe and a plan on the seed nodes and
// fails on any path outside it.
//
// Not declared, on purpose: /sys/class/net (sysfs sends no inotify events; a link that comes or
// goes shows in networkd's link and lease files, which are watched), the nodedns unit with its
// drop-ins and .wants links (read for the boot.persistence check only; no plan depends on them), and
// nodedns's own backups (BackupDir: only nodedns's own passes write them, so watching them would
// only make every first backup start another pass; the intern file NetworkManager changes after
// the backup is watched).
func Watches(cfg config.Config, s *Snapshot) []nodefs.Watch {
	var ws []nodefs.Watch
	for _, p := range parts {
		if p.watches != nil {
			ws = append(ws, p.watches(cfg, s)...)
		}
	}
	return ws
}

// kubeletWatches declares what the kubelet part reads: what decides which config is read
// (kubelet.Watches, with the files and directories the last search found) and, with
// kubelet.manage, nodedns's restart record (docs/contract.md "kubelet.manage").
func kubeletWatches(cfg config.Config, s *Snapshot) []nodefs.Watch {
	var ws []nodefs.Watch
	if cfg.Kubelet.Manage {
		ws = append(ws, stateWatch(KubeletRestartFile, func(b []byte) error {
			_, err := ParseKubeletRestart(b)
			return err
		}))
	}
	var kpaths, kdirs []string
	if s != nil {
		kpaths, kdirs = s.KubeletSources()
	}
	return append(ws, kubelet.Watches(cfg, kpaths, kdirs)...)
}

// resolvWatch declares one resolv.conf-format file.
func resolvWatch(p string) nodefs.Watch {
	return nodefs.Watch{Dir: path.Dir(p), Match: nodefs.Names(path.Base(p)), Complete: completeResolv}
}

// resolvWatches declares the resolv.conf-format files of paths that are node paths ("" and a
// relative path, which no reader follows, are left out).
func resolvWatches(paths ...string) []nodefs.Watch {
	var ws []nodefs.Watch
	for _, p := range paths {
		if strings.HasPrefix(p, "/") {
			ws = append(ws, resolvWatch(p))
		}
	}
	return ws
}

// target is f(s), or "" before the first read.
func target(s *Snapshot, f func(*Snapshot) string) string {
	if s == nil {
		return ""
	}
	return f(s)
}

// stateWatch declares one of nodedns's records: complete when it parses.
func stateWatch(p string, parse func([]byte) error) nodefs.Watch {
	return nodefs.Watch{Dir: path.Dir(p), Match: nodefs.Names(path.Base(p)), Complete: parse}
}

// completeResolv: resolv.conf is complete when its last line is finished and it parses (dhclient's
// make_resolv_conf writes it line by line).
func completeResolv(b []byte) error {
	if err := nodefs.NewlineTerminated(b); err != nil {
		return err
	}
	_, err := resolvconf.Parse(b)
	return err
}

// Writes declares every node path nodedns writes whatever its config says (docs/contract.md, "What
// nodedns manages"), as path.Match patterns: the union of each mechanism's declaration (netplan's,
// NetworkManager's) and this package's own files. It is what restore may change besides the state
// directory and the files the config names (store.Targets), and what no config key may name. The
// test in this package fails when a plan over the test node trees writes a path outside it.
func Writes() []string {
	ws := []string{
		EtcResolvConf,
		ResolvedDropIn,
		NetworkdDropIn("*.network"),
		DhclientHook,
		// resolved 258+'s DNS delegates: an /etc file edited, or a same-named copy masking one in
		// /run or /usr/lib (docs/contract.md "DNS delegates").
		"/etc/systemd/dns-delegate.d/*.dns-delegate",
		"/etc/systemd/dns-delegate.d/*.dns-delegate.d/*.conf",
	}
	ws = append(ws, netplan.Writes()...)
	// kubelet.manage's edit of kubelet's config (docs/contract.md "kubelet.manage"): declared
	// whatever the config says, so that restore gives it back after kubelet.manage is turned off.
	ws = append(ws, kubelet.Writes()...)
	return append(ws, networkmanager.Writes()...)
}

// LinkedWrites are the paths of Writes that may be symlinks whose target nodedns edits instead (a
// symlinked /etc/resolv.conf stays a symlink: docs/contract.md, invariant 3).
func LinkedWrites() []string { return []string{EtcResolvConf} }
