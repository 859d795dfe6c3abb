package live

import (
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/internal/store"
	"github.com/nodedns/nodedns/probes"
)

// FileState keeps the reboot baseline at probes.StatePath through store.Store, the only writer to a
// node (atomic; backed up once, so `nodedns restore` removes it with the rest of what nodedns
// created).
type FileState struct{ Store *store.Store }

// Load implements probes.StateStore: trusted state only (store.ReadState), so nobody else's file
// decides what the reboot baseline says.
func (f FileState) Load() ([]byte, error) { return f.Store.ReadState(probes.StatePath, nodefs.State) }

// Save implements probes.StateStore.
func (f FileState) Save(data []byte) error {
	_, err := f.Store.Write(probes.StatePath, data, 0o644)
	return err
}
