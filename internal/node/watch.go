package node

import (
	"path"
	"strings"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/leases"
	"github.com/nodedns/nodedns/internal/networkmanager"
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/netplan"
	"github.com/nodedns/nodedns/resolvconf"
	"github.com/nodedns/nodedns/systemd"
	"go.yaml.in/yaml/v3"
)

// Watches declares every directory Observe reads, and with them every directory a plan writes into
// (nodedns reads each file it manages): the union of the reader packages' declarations, this
// package's own files, and what the snapshot s found (the target of a symlinked /etc/resolv.conf,
// kubelet's resolvConf, the networkd .network files that have DHCP on and their drop-in
// directories). s may be nil before the first read. The daemon watches exactly this; the test in
// this package walks Observe and a plan on the seed nodes and fails on any path outside it.
//
// Not declared, on purpose: /sys/class/net (sysfs sends no inotify events; a link that comes or
// goes shows in networkd's link and lease files, which are watched), the nodedns unit with its
// drop-ins and .wants links (read for the boot.persistence check only; no plan depends on them), and
// nodedns's own backups (BackupDir: only nodedns's own passes write them, so watching them would
// only make every first backup start another pass; the intern file NetworkManager changes after
// the backup is watched).
func Watches(cfg config.Config, s *Snapshot) []nodefs.Watch {
	var ws []nodefs.Watch
	ws = append(ws, leases.Watches()...)
	ws = append(ws, netplan.Watches()...)
	ws = append(ws, systemd.Watches()...)
	ws = append(ws, networkmanager.Watches()...)
	resolv := func(p string) nodefs.Watch {
		return nodefs.Watch{Dir: path.Dir(p), Match: nodefs.Names(path.Base(p)), Complete: completeResolv}
	}
	ws = append(ws,
		resolv(EtcResolvConf),
		nodefs.Watch{Dir: ResolvedRunDir, Match: nodefs.Names(path.Base(ResolvedResolvConf), path.Base(ResolvedStubConf)), Complete: completeResolv},
		resolv(cfg.Kubelet.ResolvConf),
		nodefs.Watch{Dir: path.Dir(DhclientConf), Match: nodefs.Names(path.Base(DhclientConf))},
		nodefs.Watch{Dir: "/etc", Match: nodefs.Names("dhclient.conf")}, // leases.DhclientConfPaths' older place
		nodefs.Watch{Dir: path.Dir(OfferedStatePath), Match: nodefs.Names(path.Base(OfferedStatePath)), Complete: func(b []byte) error {
			_, err := ParseOfferedState(OfferedStatePath, b)
			return err
		}},
		nodefs.Watch{Dir: path.Dir(DhclientHook), Match: nodefs.Names(path.Base(DhclientHook))},
	)
	ws = append(ws, kubeletWatches(cfg, s)...)
	ws = append(ws, delegateWatches(s)...)
	for _, d := range networkDirs {
		ws = append(ws, nodefs.Watch{Dir: d, Match: nodefs.Suffix(".network"), Complete: nodefs.NewlineTerminated})
	}
	if s == nil {
		return ws
	}
	for _, p := range []string{s.ResolvConf.Target, s.Kubelet.ResolvConf, s.KubeletResolv.Target, s.NodednsResolv.Target} {
		if strings.HasPrefix(p, "/") {
			ws = append(ws, resolv(p))
		}
	}
	for _, n := range s.Networkd {
		d := NetworkdDropIn(n.Path)
		ws = append(ws, nodefs.Watch{Dir: path.Dir(d), Match: nodefs.Names(path.Base(d)), Complete: nodefs.NewlineTerminated})
	}
	return ws
}

// kubeletWatches: what decides which kubelet config is read (docs/contract.md "Kubelet's config"):
// the kubelet unit and its drop-in directories in every unit directory, the places kubespray and
// kubeadm keep kubelet's config and environment files, and whatever the snapshot found (an
// environment file or config elsewhere, a --config-dir). The running kubelet's command line is in
// /proc, which sends no inotify events: the resync picks up a kubelet restarted with another --config.
func kubeletWatches(cfg config.Config, s *Snapshot) []nodefs.Watch {
	var ws []nodefs.Watch
	file := func(p string) nodefs.Watch {
		complete := nodefs.NewlineTerminated
		if strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml") {
			complete = completeYAML
		}
		match := nodefs.Names(path.Base(p))
		if base := path.Base(p); strings.ContainsAny(base, "*?[") {
			// An EnvironmentFile= glob (systemd expands it when the command starts).
			match = func(n string) bool { ok, _ := path.Match(base, n); return ok && !strings.HasPrefix(n, ".") }
		}
		return nodefs.Watch{Dir: path.Dir(p), Match: match, Complete: complete}
	}
	if cfg.Kubelet.Config != "" && cfg.Kubelet.Config != config.KubeletConfigAuto {
		ws = append(ws, file(cfg.Kubelet.Config))
	} else {
		for _, d := range unitDirs {
			ws = append(ws,
				nodefs.Watch{Dir: d, Match: nodefs.Names(KubeletUnit), Complete: nodefs.NewlineTerminated},
				nodefs.Watch{Dir: path.Join(d, KubeletUnit+".d"), Match: nodefs.Suffix(".conf"), Complete: nodefs.NewlineTerminated})
		}
		for _, p := range append(append([]string{}, KubeletConfigPaths...), "/etc/kubernetes/kubelet.env", "/var/lib/kubelet/kubeadm-flags.env") {
			ws = append(ws, file(p))
		}
	}
	if s == nil {
		return ws
	}
	paths, dirs := s.KubeletSources()
	for _, p := range paths {
		if strings.HasPrefix(p, "/") {
			ws = append(ws, file(p))
		}
	}
	for _, d := range dirs {
		ws = append(ws, nodefs.Watch{Dir: d, Match: nodefs.Suffix(".conf"), Complete: completeYAML})
	}
	return ws
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

// completeYAML: a YAML file is complete when it parses.
func completeYAML(b []byte) error {
	var v any
	return yaml.Unmarshal(b, &v)
}
