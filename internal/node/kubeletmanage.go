package node

// kubeletmanage.go reads what kubelet.manage needs (docs/contract.md "kubelet.manage"): the edit
// that points kubelet's config at nodedns's file, from the node's files, and nodedns's record of a
// kubelet restart still owed.

import (
	"errors"
	"fmt"
	"time"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/kubelet"
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/internal/statefile"
)

// KubeletRestartFile is nodedns's record that it changed kubelet's config and kubelet has not yet
// been seen to restart since: written by apply with the change, removed once a kubelet that
// started later runs (live node), given back (removed) by restore.
const KubeletRestartFile = config.KubeletRestartFile

// KubeletRestart is that record.
type KubeletRestart struct {
	// Unit is the unit that starts kubelet ("" when none was found), File the file nodedns changed.
	Unit string `json:"unit"`
	File string `json:"file"`
	// Changed is when apply planned the change, rounded up to the clock tick (10 ms) kubelet's
	// start time is counted in: a kubelet whose start time is not before it started after the
	// change and reads the new config (policy.KubeletTick).
	Changed time.Time `json:"changed"`
	// Restarted is when nodedns restarted Unit for this change (kubelet.restart), zero while it
	// has not: it restarts the unit at most once per record.
	Restarted time.Time `json:"restarted,omitzero"`
}

// ParseKubeletRestart reads the record (strictly: statefile.Decode); an error names what is wrong.
func ParseKubeletRestart(data []byte) (*KubeletRestart, error) {
	var r KubeletRestart
	if err := statefile.Decode(data, &r); err != nil {
		return nil, fmt.Errorf("not nodedns's kubelet restart record: %w", err)
	}
	if r.Changed.IsZero() {
		return nil, errors.New("not nodedns's kubelet restart record: no time of change")
	}
	return &r, nil
}

// Render is the record's file.
func (r KubeletRestart) Render() []byte {
	b, err := statefile.Encode(r)
	if err != nil {
		panic(err) // strings and a time always marshal
	}
	return b
}

// readKubeletManage plans kubelet.manage's edit from the files just read and reads the record.
func (s *Snapshot) readKubeletManage(r nodefs.Reader, cfg config.Config) {
	s.KubeletManage, s.KubeletRestart = nil, nil
	if !cfg.Kubelet.Manage {
		return
	}
	if e, ok := kubelet.Manage(r, s.KubeletFiles, cfg.Kubelet.ResolvConf); ok {
		s.KubeletManage = &e
	}
	m := s.readStateRecord(r, KubeletRestartFile)
	if !m.Exists || m.Err != nil {
		return
	}
	rec, err := ParseKubeletRestart(m.Data)
	if err != nil {
		s.problem(SourceManaged, KubeletRestartFile, 0, err.Error())
		// Unreadable: a restart is owed until a running kubelet is seen (any start time will do).
		rec = &KubeletRestart{Unit: s.KubeletFiles.Unit}
	}
	s.KubeletRestart = rec
}
