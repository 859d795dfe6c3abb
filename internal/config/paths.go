package config

import (
	"fmt"
	"path"
	"strings"

	"github.com/nodedns/nodedns/internal/nodefs"
)

// nodedns's own state files directly in StateDir (docs/contract.md, "Where things live"), declared
// here once: their owners name them by these constants, and StateFiles lists them all.
const (
	// BaselineFile is the reboot baseline of boot.persistence (probes).
	BaselineFile = StateDir + "/state.json"
	// WritersFile is the daemon's record of the targets it stopped fighting over (node, reconcile).
	WritersFile = StateDir + "/writers.json"
	// LinkRecordFile holds the resolved link settings nodedns changed over D-Bus (edges).
	LinkRecordFile = StateDir + "/resolved-links.json"
	// KubeletRestartFile records that kubelet must restart after kubelet.manage changed its config
	// (node, policy).
	KubeletRestartFile = StateDir + "/kubelet-restart.json"
	// DHCPDomainsFile remembers networkd links' DHCP search domains across a lease gap (node,
	// policy).
	DHCPDomainsFile = StateDir + "/dhcp-domains.json"
	// PutBackFile records what the standby put back after node-cache's teardown and node-cache has
	// not yet taken over: `restore` removes it (cachenet).
	PutBackFile = StateDir + "/nodelocaldns-putback.json"
)

// StateFiles are the state files above; with the backup and temp directories they are never a path
// a config key may name.
var StateFiles = []string{BaselineFile, WritersFile, LinkRecordFile, KubeletRestartFile, DHCPDomainsFile, PutBackFile}

// configDirs are directories in which another program reads every file as its configuration (or runs
// it): a file a config key names there would be taken for one of theirs.
var configDirs = []string{
	"/etc/netplan", "/lib/netplan", "/run/netplan",
	"/etc/systemd/resolved.conf.d", "/run/systemd/resolved.conf.d", "/usr/lib/systemd/resolved.conf.d",
	"/etc/systemd/network", "/run/systemd/network", "/usr/lib/systemd/network", "/lib/systemd/network",
	"/etc/dhcp/dhclient-enter-hooks.d", "/etc/dhcp/dhclient-exit-hooks.d",
	"/etc/NetworkManager/conf.d", "/run/NetworkManager/conf.d", "/usr/lib/NetworkManager/conf.d",
}

// ChecksTextfile is the textfile the one-shot `nodedns check` writes next to metrics.textfile
// (nodedns.prom -> nodedns_check.prom), so that the daemon and check never rewrite each other's file.
func ChecksTextfile(textfile string) string {
	if textfile == "" {
		return ""
	}
	dir, base := path.Split(textfile)
	return dir + strings.TrimSuffix(base, ".prom") + "_check.prom"
}

// WrittenPaths are the files the config makes nodedns write, by key: kubelet.resolvConf, and
// metrics.textfile with the check's textfile next to it (when on).
func (c Config) WrittenPaths() map[string][]string {
	m := map[string][]string{"kubelet.resolvConf": {path.Clean(c.Kubelet.ResolvConf)}}
	if c.Metrics.Textfile != "" {
		m["metrics.textfile"] = []string{path.Clean(c.Metrics.Textfile), path.Clean(ChecksTextfile(c.Metrics.Textfile))}
	}
	return m
}

// pathKeys are the keys that name a file nodedns writes, in documentation order.
var pathKeys = []string{"kubelet.resolvConf", "metrics.textfile"}

// validatePaths refuses a config whose path keys name what nodedns must never overwrite with that
// content: another managed file (managed: node.Writes, the union of what each mechanism declares it
// writes, which this package cannot import; `metrics.textfile: /etc/resolv.conf` would turn the
// node's resolv.conf into Prometheus text with no nameserver), nodedns's state (`kubelet.resolvConf:
// /var/lib/nodedns/backup/manifest.json` would overwrite the manifest, and restore would then fail),
// a file of a directory another program reads as configuration, or the file of another key.
func validatePaths(c Config, managed []string) error {
	written := c.WrittenPaths()
	for _, k := range pathKeys {
		for i, p := range written[k] {
			value := p
			if i > 0 {
				value = written[k][0]
			}
			if err := pathConflict(p, k, written, managed); err != nil {
				return &Error{Key: k, Value: value, Err: err}
			}
		}
	}
	return nil
}

func pathConflict(p, key string, written map[string][]string, managed []string) error {
	backup := path.Join(StateDir, "backup")
	tmp := path.Join(StateDir, nodefs.TempDirName)
	switch {
	case p == StateDir:
		return fmt.Errorf("%s is nodedns's state directory itself", p)
	case p == "/" || under(StateDir, p):
		return fmt.Errorf("%s is a directory that holds nodedns's state directory", p)
	case p == backup || under(p, backup):
		return fmt.Errorf("%s is in nodedns's backup directory %s: writing it would destroy the backups restore needs", p, backup)
	case p == tmp || under(p, tmp):
		return fmt.Errorf("%s is in nodedns's work directory %s, which nodedns empties", p, tmp)
	}
	for _, sf := range StateFiles {
		if p == sf || under(p, sf) {
			return fmt.Errorf("%s is nodedns's own state file", p)
		}
	}
	for _, pat := range managed {
		for q := p; q != "/"; q = path.Dir(q) {
			if ok, _ := path.Match(pat, q); ok {
				return fmt.Errorf("%s is also a file nodedns manages (%s): one file cannot hold both", p, pat)
			}
		}
	}
	for _, d := range configDirs {
		if under(p, d) {
			return fmt.Errorf("%s is in %s, where every file is read as configuration by another program", p, d)
		}
	}
	for k, ps := range written {
		if k == key {
			continue
		}
		for _, q := range ps {
			if p == q || under(p, q) || under(q, p) {
				return fmt.Errorf("%s is also the file of %s", p, k)
			}
		}
	}
	return nil
}

// under reports whether p lies strictly inside the directory dir.
func under(p, dir string) bool {
	return strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}
