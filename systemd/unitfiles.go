package systemd

import (
	"path"

	"github.com/nodedns/nodedns/internal/nodefs"
)

// UnitDirs are where systemd looks for a unit installed by a package or an admin (systemd.unit(5)),
// highest priority first.
var UnitDirs = []string{"/etc/systemd/system", "/run/systemd/system", "/usr/local/lib/systemd/system", "/lib/systemd/system", "/usr/lib/systemd/system"}

// FindUnit finds a unit the way systemd loads it: the first of UnitDirs that has it, and its
// drop-ins (NAME.d/*.conf in every unit directory, ordered by nodefs.DropIns, systemd's rule). unit
// is "" (and no drop-in is listed) when no directory has it; errs are the drop-in directories that
// could not be listed.
func FindUnit(r nodefs.Reader, name string) (unit string, dropIns []string, errs []error) {
	for _, d := range UnitDirs {
		p := path.Join(d, name)
		if _, err := r.Stat(p); err == nil {
			unit = p
			break
		}
	}
	if unit == "" {
		return "", nil, nil
	}
	var dropDirs []string
	for _, d := range UnitDirs {
		dropDirs = append(dropDirs, path.Join(d, name+".d"))
	}
	ds, errs := nodefs.DropIns(r, dropDirs, ".conf")
	for _, d := range ds {
		dropIns = append(dropIns, d.Path)
	}
	return unit, dropIns, errs
}
