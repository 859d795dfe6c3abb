package node

import (
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/systemd"
)

// readDelegates reads systemd-resolved's DNS delegates (docs/contract.md "systemd-resolved 258 and
// later: DNS delegates") where resolved reads them: on systemd 258 and later, or when the version is
// unknown (a dns-delegate.d directory only exists where someone wrote one for resolved 258+). On an
// older systemd the files mean nothing to resolved, and nodedns leaves them alone.
func (s *Snapshot) readDelegates(r nodefs.Reader) {
	s.SystemdVersion = systemd.InstalledVersion(r)
	if s.SystemdVersion != 0 && s.SystemdVersion < systemd.DelegatesSince {
		return
	}
	d := systemd.LoadDNSDelegates(r)
	problems(s, SourceResolved, d.Warnings)
	s.DNSDelegates = d
}

// delegateWatches declares the delegate directories, and the drop-in directories of the delegates
// the snapshot found.
func delegateWatches(s *Snapshot) []nodefs.Watch {
	var ids []string
	if s != nil && s.DNSDelegates != nil {
		for _, d := range s.DNSDelegates.Delegates {
			ids = append(ids, d.ID)
		}
	}
	return append(systemd.DelegateWatches(ids), systemd.VersionWatches()...)
}
