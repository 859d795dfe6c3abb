package reconcile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/fsnotify/fsnotify"
	"go.yaml.in/yaml/v3"

	"github.com/nodedns/nodedns/files"
	"github.com/nodedns/nodedns/leases"
	"github.com/nodedns/nodedns/node"
	"github.com/nodedns/nodedns/resolvconf"
	"github.com/nodedns/nodedns/systemd"
)

// kind says how the daemon judges whether a file's new content is complete: a complete file is
// reconciled at once, an incomplete one (missing, empty, half-written) only once it settles.
type kind int

const (
	kindAny      kind = iota // complete when present and non-empty
	kindResolv               // resolv.conf(5): non-empty, ends in a newline, parses
	kindDhclient             // dhclient.leases(5): every block closed
	kindNetworkd             // networkd KEY=VALUE lease
	kindYAML                 // netplan or kubelet YAML: parses
	kindConf                 // an INI file (resolved.conf): ends in a newline
	kindDir                  // a directory that did not exist yet: rewatch, then reconcile
)

// watchSpec is one directory the daemon watches and the names in it that matter.
type watchSpec struct {
	dir   string // node path, with every symlink on the way resolved inside the root
	match func(name string) bool
	kind  func(name string) kind
}

func exactly(names ...string) func(string) bool {
	return func(n string) bool {
		for _, x := range names {
			if n == x {
				return true
			}
		}
		return false
	}
}

func suffix(s string) func(string) bool {
	// A leading dot is a temp file (ours are .NAME.nodedns-*.tmp; editors and netplan's own writers
	// use dot files too): only the final rename into place matters.
	return func(n string) bool { return strings.HasSuffix(n, s) && !strings.HasPrefix(n, ".") }
}

func numeric(n string) bool {
	i, err := strconv.Atoi(n)
	return err == nil && i > 0 && strconv.Itoa(i) == n
}

func always(k kind) func(string) kind { return func(string) kind { return k } }

// wantedFiles lists the directories (node paths, not yet resolved) and the names in them the daemon
// reacts to: every input of node.Observe and every file nodedns writes. Directories, never files:
// an atomic rename replaces the inode, and a watch on the old file would see nothing after it.
func (n *Node) wantedFiles(etcResolvTarget, kubeletResolv string) []watchSpec {
	specs := []watchSpec{
		{dir: path.Dir(node.EtcResolvConf), match: exactly(path.Base(node.EtcResolvConf)), kind: always(kindResolv)},
		{dir: node.ResolvedRunDir, match: exactly(path.Base(node.ResolvedResolvConf), path.Base(node.ResolvedStubConf)), kind: always(kindResolv)},
		{dir: systemd.NetworkdLinkDir, match: numeric, kind: always(kindAny)},
		{dir: leases.NetworkdLeaseDir, match: numeric, kind: always(kindNetworkd)},
		{dir: leases.NetworkManagerLeaseDir, match: suffix(".lease"), kind: always(kindAny)},
		{dir: path.Dir(systemd.ResolvedConfPath), match: exactly(path.Base(systemd.ResolvedConfPath)), kind: always(kindConf)},
		{dir: path.Dir(node.DhclientConf), match: exactly(path.Base(node.DhclientConf)), kind: always(kindAny)},
		{dir: path.Dir(node.DhclientHook), match: exactly(path.Base(node.DhclientHook)), kind: always(kindAny)},
		{dir: path.Dir(n.Config.Kubelet.Config), match: exactly(path.Base(n.Config.Kubelet.Config)), kind: always(kindYAML)},
		{dir: path.Dir(n.Config.Kubelet.ResolvConf), match: exactly(path.Base(n.Config.Kubelet.ResolvConf)), kind: always(kindResolv)},
	}
	for _, d := range leases.Dirs() {
		if d != leases.NetworkdLeaseDir && d != leases.NetworkManagerLeaseDir {
			specs = append(specs, watchSpec{dir: d, match: suffix(".leases"), kind: always(kindDhclient)})
		}
	}
	for _, d := range []string{"/lib/netplan", "/etc/netplan", "/run/netplan"} {
		specs = append(specs, watchSpec{dir: d, match: suffix(".yaml"), kind: always(kindYAML)})
	}
	for _, d := range systemd.ResolvedDropinDirs {
		specs = append(specs, watchSpec{dir: d, match: suffix(".conf"), kind: always(kindConf)})
	}
	for _, p := range []string{etcResolvTarget, kubeletResolv} {
		if p != "" && strings.HasPrefix(p, "/") {
			specs = append(specs, watchSpec{dir: path.Dir(p), match: exactly(path.Base(p)), kind: always(kindResolv)})
		}
	}
	return specs
}

// watchSet is the resolved form of the wanted files: host directory -> matchers. A directory that
// does not exist yet is replaced by its nearest existing ancestor, watched for the next component
// (kindDir), so /run/systemd/resolve appearing when resolved starts is noticed.
type watchSet map[string][]watchSpec

func (n *Node) buildWatchSet(st *files.Store, specs []watchSpec) watchSet {
	ws := watchSet{}
	for _, sp := range specs {
		dir, err := st.ResolveLink(sp.dir)
		if err != nil {
			n.log().Warn("not watched", "dir", sp.dir, "err", err)
			continue
		}
		sp.dir = dir
		// Walk up to the nearest existing directory.
		for {
			if fi, err := os.Stat(hostDir(st.Root, sp.dir)); (err == nil && fi.IsDir()) || sp.dir == "/" {
				break
			}
			child := path.Base(sp.dir)
			sp = watchSpec{dir: path.Dir(sp.dir), match: exactly(child), kind: always(kindDir)}
		}
		ws[hostDir(st.Root, sp.dir)] = append(ws[hostDir(st.Root, sp.dir)], sp)
	}
	return ws
}

func hostDir(root, nodeDir string) string {
	if root == "" || root == "/" {
		return filepath.FromSlash(nodeDir)
	}
	return filepath.Join(root, filepath.FromSlash(nodeDir))
}

// classify finds what an event on hostDir/name means: not relevant at all (ok false), or relevant
// with the node path and kind of the file.
func (ws watchSet) classify(hostDirPath, name string) (nodeDir string, k kind, ok bool) {
	for _, sp := range ws[hostDirPath] {
		if sp.match(name) {
			return sp.dir, sp.kind(name), true
		}
	}
	return "", 0, false
}

// dirs lists the watched host directories, sorted (for logs and tests).
func (ws watchSet) dirs() []string {
	out := make([]string, 0, len(ws))
	for d := range ws {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// sync makes the watcher watch exactly the directories of ws. A directory that cannot be watched
// (it vanished between the stat and the watch, or the inotify watch limit is reached) is logged and
// retried at the next pass.
func (ws watchSet) sync(w *fsnotify.Watcher, old watchSet, log func(msg string, args ...any)) {
	for d := range old {
		if _, keep := ws[d]; !keep {
			_ = w.Remove(d)
		}
	}
	for d := range ws {
		if _, had := old[d]; had {
			continue
		}
		if err := w.Add(d); err != nil {
			log("cannot watch directory", "dir", d, "err", err)
			delete(ws, d)
		}
	}
}

// complete reports whether a file's content (data and the error reading it) is something a reader
// can use now. Missing, empty and half-written files are not complete: dhclient-script removes
// /etc/resolv.conf and writes a new one, and an editor or `echo >` truncates before it writes.
func complete(data []byte, err error, k kind) (bool, string) {
	if k == kindDir {
		return true, "directory appeared"
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, "missing"
	case err != nil:
		return false, err.Error()
	case len(data) == 0:
		return false, "empty"
	}
	switch k {
	case kindResolv:
		if !bytes.HasSuffix(data, []byte("\n")) {
			return false, "no final newline (half-written?)"
		}
		if _, err := resolvconf.Parse(data); err != nil {
			return false, err.Error()
		}
	case kindConf:
		if !bytes.HasSuffix(data, []byte("\n")) {
			return false, "no final newline (half-written?)"
		}
	case kindDhclient:
		if _, err := leases.ParseDhclient(data, "lease"); err != nil {
			return false, err.Error()
		}
	case kindNetworkd:
		if _, err := leases.ParseNetworkd(data, "lease"); err != nil {
			return false, err.Error()
		}
	case kindYAML:
		var v any
		if err := yaml.Unmarshal(data, &v); err != nil {
			return false, err.Error()
		}
	}
	return true, "complete"
}

// maxWatchedFile bounds what the daemon reads to judge an event: no input of nodedns is larger.
const maxWatchedFile = 1 << 20

func readSmall(hostPath string) ([]byte, error) {
	f, err := os.Open(hostPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, maxWatchedFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxWatchedFile {
		return nil, fmt.Errorf("over %d bytes", maxWatchedFile)
	}
	return data, nil
}
