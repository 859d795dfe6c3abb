package cachenet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/internal/policy"
	"github.com/nodedns/nodedns/internal/store"
)

// RecordPath is the node path of the record of what nodedns put back and has not yet handed over to
// node-cache (docs/contract.md "Standby"): `restore` removes what it lists.
const RecordPath = config.PutBackFile

// MarshalRecord is the record's file content.
func MarshalRecord(ms []Made) ([]byte, error) {
	data, err := json.MarshalIndent(ms, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// ParseRecord reads the record; name is for the error. Every entry must name what it made well
// enough to be removed safely: an interface by name and index, an address with its interface, a
// rule with its backend, family, table, chain and node-cache's comment (and an nf_tables rule its
// handle, a legacy one its spec).
func ParseRecord(name string, data []byte) ([]Made, error) {
	var ms []Made
	if err := json.Unmarshal(data, &ms); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	for i, m := range ms {
		if m.Link != nil && (m.Link.Name == "" || m.Link.Index <= 0) {
			return nil, fmt.Errorf("%s: entry %d: an interface without a name or index", name, i)
		}
		for _, a := range m.Addrs {
			if a.Link == "" || a.Index <= 0 || !a.Prefix.IsValid() {
				return nil, fmt.Errorf("%s: entry %d: an address without its interface or prefix", name, i)
			}
		}
		for _, r := range m.Rules {
			if r.Family != 4 && r.Family != 6 || r.Table == "" || r.Chain == "" || !strings.HasPrefix(r.Comment, CommentPrefix) {
				return nil, fmt.Errorf("%s: entry %d: a rule that is not node-cache's (%s %s %q)", name, i, r.Table, r.Chain, r.Comment)
			}
			switch {
			case r.Backend == BackendNFT && r.Handle == 0:
				return nil, fmt.Errorf("%s: entry %d: an nf_tables rule without its handle", name, i)
			case r.Backend == BackendLegacy && r.Spec == "":
				return nil, fmt.Errorf("%s: entry %d: a legacy rule without its spec", name, i)
			case r.Backend != BackendNFT && r.Backend != BackendLegacy:
				return nil, fmt.Errorf("%s: entry %d: unknown backend %q", name, i, r.Backend)
			}
		}
	}
	return ms, nil
}

// Reverter removes on `nodedns restore` what the standby put back and node-cache has not taken over
// (docs/contract.md "Standby"). It is an Actor of no action: it only reverts.
type Reverter struct {
	Store *store.Store
}

// Handles implements reconcile.Actor: no planned action is its.
func (Reverter) Handles(policy.Action) bool { return false }

// Do implements reconcile.Actor; it is never called.
func (Reverter) Do(context.Context, policy.Action) error { return nil }

// BeforeRestore removes what the record lists, before restore removes the record itself with the
// other files nodedns created.
func (r Reverter) BeforeRestore(ctx context.Context) ([]store.RestoreResult, error) {
	data, err := r.Store.ReadState(RecordPath, nodefs.State)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", RecordPath, err)
	}
	ms, err := ParseRecord(RecordPath, data)
	if err != nil {
		return nil, err
	}
	var res []store.RestoreResult
	var errs []error
	// The newest first: what a later put-back added sits on what an earlier one made.
	for i := len(ms) - 1; i >= 0; i-- {
		removed, kept, err := Remove(ctx, ms[i])
		for _, s := range removed {
			res = append(res, store.RestoreResult{Path: "nodelocaldns: " + s, Action: store.ActionRemoved, Reason: "nodedns put it back after node-cache's teardown at " + ms[i].At.Format("2006-01-02T15:04:05Z07:00")})
		}
		for _, s := range kept {
			res = append(res, store.RestoreResult{Path: "nodelocaldns: " + s, Action: store.ActionKept})
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return res, errors.Join(errs...)
}

// AfterRestore implements reconcile.Reverter: nothing to do once the files are back.
func (Reverter) AfterRestore(context.Context, []store.RestoreResult) ([]store.RestoreResult, error) {
	return nil, nil
}
