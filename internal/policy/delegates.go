package policy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/systemd"
)

// DelegateHeader opens a delegate file nodedns created in /etc to mask one in /run or /usr/lib
// (docs/contract.md: every file nodedns creates names nodedns and says it is managed).
const DelegateHeader = "Managed by nodedns: this copy masks %s without its loop addresses; `nodedns restore` removes it."

// dnsDelegates fixes resolved's DNS delegates (systemd 258+) whose DNS= lists a loop address, the
// systemd way (docs/contract.md "systemd-resolved 258 and later: DNS delegates"): a file in /etc
// is edited in place (backed up first); a file in /run or /usr/lib is masked by a same-named copy in
// /etc/systemd/dns-delegate.d without the loop addresses. resolved reads its delegates only at
// start, so it is restarted as for resolved.conf.d.
func (p *Plan) dnsDelegates(s *node.Snapshot) {
	if !s.ResolvedInUse() || s.DNSDelegates == nil {
		return
	}
	f := p.Facts
	changed := false
	for _, d := range s.DNSDelegates.Delegates {
		// The lines of each file that list a loop address.
		byFile := map[string]map[int]bool{}
		var order []string
		var loops []string
		for i, sv := range d.DNS {
			if !f.IsLoop(sv.Addr, false) {
				continue
			}
			src := d.DNSSources[i]
			if byFile[src.Path] == nil {
				byFile[src.Path] = map[int]bool{}
				order = append(order, src.Path)
			}
			byFile[src.Path][src.Line] = true
			if !slices.Contains(loops, sv.Raw) {
				loops = append(loops, sv.Raw)
			}
		}
		for _, src := range order {
			if why := d.Foreign[src]; why != "" {
				// Another user could have written it: its other lines (servers, domains) are theirs,
				// and an edit or a copy in /etc would make them nodedns's, for good.
				p.block(src, "delegate %q lists %s in %s, a file another user could have written (%s): nodedns neither edits it nor copies it into /etc; resolved loads it as it is: make it root's, or remove it", d.ID, strings.Join(loops, " "), src, why)
				continue
			}
			target, ok := systemd.DelegateOverridePath(src)
			data, read := d.FileData(src)
			if !ok || !read {
				p.block(src, "delegate %q lists %s, but nodedns cannot place an override for this file", d.ID, strings.Join(loops, " "))
				continue
			}
			after, err := systemd.RemoveDelegateServers(data, byFile[src], func(sv systemd.Server) bool { return f.IsLoop(sv.Addr, false) })
			if err != nil {
				p.block(target, "delegate %q lists %s in %s: %v; edit it by hand", d.ID, strings.Join(loops, " "), src, err)
				continue
			}
			var before []byte
			if target == src {
				before = data
				if !strings.HasPrefix(string(after), "# "+EditedHeader) {
					after = append([]byte("# "+EditedHeader+"\n"), after...)
				}
			} else if !strings.HasPrefix(string(after), "# Managed by nodedns") {
				after = append([]byte("# "+fmt.Sprintf(DelegateHeader, src)+"\n"), after...)
			}
			n := len(p.Changes)
			p.write(target, target, before, after, 0o644, fmt.Sprintf("DNS delegate %q lists %s (DNS= in %s)", d.ID, strings.Join(loops, " "), src))
			changed = changed || len(p.Changes) > n
		}
	}
	if changed && !p.HasAction(RestartResolved{}.Kind()) {
		p.Actions = append(p.Actions, RestartResolved{Reason: "reload the DNS delegates (resolved reads dns-delegate.d only at start)"})
	}
	if !changed {
		p.delegatesStale(s)
	}
}

// delegatesStale restarts resolved when a delegate it runs with (over D-Bus) lists a loop address
// that no delegate file does any more: a fix written while a restart failed, or an edit nobody
// restarted resolved for.
func (p *Plan) delegatesStale(s *node.Snapshot) {
	if s.ResolvedLive == nil || p.HasAction(RestartResolved{}.Kind()) {
		return
	}
	for _, d := range s.DNSDelegates.Delegates {
		for _, sv := range d.DNS {
			if p.Facts.IsLoop(sv.Addr, false) {
				return // the files still ask for it: blocked above
			}
		}
	}
	var stale []string
	for _, d := range s.ResolvedLive.Delegates {
		for _, sv := range d.DNS {
			if p.Facts.IsLoop(sv.Addr, false) {
				stale = append(stale, fmt.Sprintf("%s (delegate %q)", sv.Addr, d.ID))
			}
		}
	}
	if len(stale) > 0 {
		p.Actions = append(p.Actions, RestartResolved{
			Reason: fmt.Sprintf("resolved still runs with %s, which its dns-delegate.d no longer lists: restart it to reload", strings.Join(stale, " "))})
	}
}

// DelegateTargets are the files through which nodedns fixes the delegates of s: each delegate
// file, its drop-ins, and their overrides in /etc.
func DelegateTargets(s *node.Snapshot) []string {
	if s.DNSDelegates == nil {
		return nil
	}
	var out []string
	for _, d := range s.DNSDelegates.Delegates {
		for _, f := range d.Files {
			out = append(out, f)
			if o, ok := systemd.DelegateOverridePath(f); ok && o != f {
				out = append(out, o)
			}
		}
	}
	return out
}
