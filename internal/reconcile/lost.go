package reconcile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/internal/policy"
	"github.com/nodedns/nodedns/internal/store"
)

// Lost backups are loud: a restore that finds files nodedns changed (they carry its mark: the header
// every file it creates starts with, the header line it puts on a file it edits) but no backup to
// put them back from must not say "nothing to restore" and exit 0 while /etc/resolv.conf still
// promises that `nodedns restore` undoes the edit.

// Restore actions of `restore --forget`.
const (
	// ActionUnmarked is a file nodedns edited whose header line was dropped; the rest stays as
	// nodedns left it, since the original is lost.
	ActionUnmarked = "unmarked"
)

// marks are how nodedns's files say who wrote them: the words before the colon of every header.
var marks = markWords(policy.KubeletHeader, policy.EditedHeader, policy.DropInHeader, policy.HookHeader, policy.NetworkdDropInHeader)

func markWords(headers ...string) []string {
	var out []string
	for _, h := range headers {
		w, _, _ := strings.Cut(h, ":")
		if !strings.Contains(w, "nodedns") {
			continue
		}
		dup := false
		for _, o := range out {
			dup = dup || o == w
		}
		if !dup {
			out = append(out, w)
		}
	}
	return out
}

// editedMark is the mark of a file nodedns edited rather than created.
var editedMark, _, _ = strings.Cut(policy.EditedHeader, ":")

// markLines is how many lines from the top a mark may be on (a shebang or a JSON brace first).
const markLines = 5

// mark returns the mark data carries near its top, "" when none.
func mark(data []byte) string {
	for i, line := range bytes.SplitN(data, []byte("\n"), markLines+1) {
		if i == markLines {
			break
		}
		for _, m := range marks {
			if bytes.Contains(line, []byte(m)) {
				return m
			}
		}
	}
	return ""
}

// LostBackupsError is a restore that found files nodedns changed with no backup of them.
type LostBackupsError struct {
	// Paths are the node paths that carry nodedns's mark but have no backup.
	Paths []string
}

func (e *LostBackupsError) Error() string {
	return fmt.Sprintf("no backup of %d file(s) nodedns changed, so their originals cannot be put back: %s (was %s/backup removed?). "+
		"`nodedns restore --forget` removes the files nodedns created and the header line of those it edited, knowingly; "+
		"or reinstall them from their packages' defaults, then run `nodedns restore --forget` to clear what is left",
		len(e.Paths), strings.Join(e.Paths, ", "), config.StateDir)
}

// unbacked lists the managed files that carry nodedns's mark and have no entry in the manifest.
func (n *Node) unbacked(st *store.Store) ([]string, error) {
	entries, err := st.Backups()
	if err != nil {
		return nil, err
	}
	backed := map[string]bool{}
	for _, e := range entries {
		backed[e.Path] = true
	}
	cands, lerr := st.ManagedFiles()
	var out []string
	for _, p := range cands {
		if backed[p] {
			continue
		}
		data, err := st.ReadFile(p, nodefs.Config)
		switch {
		case errors.Is(err, nodefs.ErrTooLarge), errors.Is(err, nodefs.ErrNotRegular), errors.Is(err, fs.ErrNotExist):
			continue // not one of nodedns's files (a copy of the binary the packages keep for purge)
		case err != nil:
			lerr = errors.Join(lerr, err)
			continue
		}
		if mark(data) != "" {
			out = append(out, p)
		}
	}
	return out, lerr
}

// forget drops what nodedns left in the files listed: a file it created is removed, the header line
// of a file it edited is dropped. keep may veto a path (the kubelet file kubelet still uses).
func (n *Node) forget(st *store.Store, paths []string, keep func(string) (bool, string)) ([]store.RestoreResult, error) {
	var res []store.RestoreResult
	var errs []error
	for _, p := range paths {
		if kept, reason := keep(p); kept {
			res = append(res, store.RestoreResult{Path: p, Action: store.ActionKept, Reason: reason})
			continue
		}
		data, err := st.ReadFile(p, nodefs.Config)
		if err != nil {
			errs = append(errs, fmt.Errorf("forget %s: %w", p, err))
			continue
		}
		if mark(data) != editedMark {
			if err := st.Forget(p, nil); err != nil {
				errs = append(errs, err)
				continue
			}
			res = append(res, store.RestoreResult{Path: p, Action: store.ActionRemoved, Reason: "no backup: nodedns created it (forgotten knowingly)"})
			continue
		}
		out := dropMarkLine(data)
		if len(bytes.TrimSpace(out)) == 0 {
			errs = append(errs, fmt.Errorf("forget %s: nothing but nodedns's header would be left: left as it is", p))
			continue
		}
		if err := st.Forget(p, out); err != nil {
			errs = append(errs, err)
			continue
		}
		res = append(res, store.RestoreResult{Path: p, Action: ActionUnmarked, Reason: "no backup: nodedns's header line dropped, the rest left as nodedns edited it"})
	}
	return res, errors.Join(errs...)
}

// dropMarkLine removes the first line near the top that carries nodedns's edited mark.
func dropMarkLine(data []byte) []byte {
	lines := bytes.SplitAfter(data, []byte("\n"))
	for i, l := range lines {
		if i == markLines {
			break
		}
		if bytes.Contains(l, []byte(editedMark)) {
			return bytes.Join(append(lines[:i:i], lines[i+1:]...), nil)
		}
	}
	return data
}

// kubeletKeep is restore's veto: the kubelet resolv.conf stays while kubelet's config (the one
// kubelet really reads, found as check finds it) still points at it, or cannot be read: removing a
// file kubelet uses would stop it starting pods.
func (n *Node) kubeletKeep(ctx context.Context) func(p string) (bool, string) {
	s := n.snapshot(ctx, &node.Observer{}, nil)
	backups, _ := n.store().Backups()
	return func(p string) (bool, string) {
		if path.Clean(p) != path.Clean(n.Config.Kubelet.ResolvConf) {
			return false, ""
		}
		if s.Kubelet.Err != nil {
			return true, fmt.Sprintf("kubelet's config %s cannot be read (%v), so whether kubelet uses this file is unknown; fix it, then run restore again", s.Kubelet.Path, s.Kubelet.Err)
		}
		if path.Clean(s.Kubelet.ResolvConf) == path.Clean(p) && restoredBy(s.KubeletFiles.SetBy(), backups) {
			// kubelet.manage pointed kubelet at it, and restore gives that file back
			// (docs/contract.md "kubelet.manage"); a running kubelet still reads it until it restarts.
			if s.Kubelet.PID > 0 {
				return true, fmt.Sprintf("restore gives back %s, but the running kubelet (pid %d) still reads this file until it restarts: restart %s, then run restore again", s.KubeletFiles.SetBy(), s.Kubelet.PID, orUnit(s.KubeletFiles.Unit))
			}
			return false, ""
		}
		if path.Clean(s.Kubelet.ResolvConf) == path.Clean(p) {
			return true, fmt.Sprintf("kubelet's config %s (%s) still points resolvConf at it; point kubelet elsewhere, then run restore again", s.Kubelet.Path, s.Kubelet.How)
		}
		return false, ""
	}
}

// restoredBy reports whether restore gives p back (the backups hold it).
func restoredBy(p string, backups []store.Entry) bool {
	return p != "" && slices.ContainsFunc(backups, func(e store.Entry) bool { return e.Path == p })
}

func orUnit(u string) string {
	if u == "" {
		return "kubelet"
	}
	return u
}
