package store

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/nodedns/nodedns/internal/nodefs"
)

// Forget changes a file nodedns manages without backing it up, for `nodedns restore --forget`: the
// backups are lost, and the operator knowingly drops what nodedns left (its hook, its drop-ins, its
// header line). With data nil the file is removed; else it is replaced atomically with data, keeping
// its permission bits and owner. Only a path restore may change (Store.Targets) is accepted, under
// the state lock like every other change.
func (s *Store) Forget(p string, data []byte) error {
	p, err := nodefs.NodePath(p)
	if err != nil {
		return fmt.Errorf("forget %s: %w", p, err)
	}
	_, unlock, err := s.lock()
	if err != nil {
		return fmt.Errorf("forget %s: %w", p, err)
	}
	defer unlock()
	if err := s.restorable(nil)(Entry{Path: p, Kind: KindFile}); err != nil {
		return fmt.Errorf("forget %s: %w", p, err)
	}
	_, hp, fi, err := s.lstatForWrite(p)
	if err != nil {
		return fmt.Errorf("forget %s: %w", p, s.nodeErr(err))
	}
	if fi == nil {
		return nil
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("forget %s: not a regular file but a %s", p, nodefs.FileType(fi.Mode()))
	}
	fsys := s.fsys()
	if data == nil {
		if err := s.remove(hp); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("forget %s: %w", p, s.nodeErr(err))
		}
		return s.nodeErr(syncDir(fsys, filepath.Dir(hp)))
	}
	uid, gid := nodefs.Owner(fi)
	if err := s.replace(hp, data, fi.Mode().Perm(), uid, gid, nil); err != nil {
		return fmt.Errorf("forget %s: %w", p, s.nodeErr(err))
	}
	return nil
}
