package nodefs

import (
	"os"
	"regexp"
	"strconv"
)

// The names of nodedns's own files (docs/contract.md, "Where things live"), shared by the readers
// that must skip or recognise them and by the store that makes them.

// DefaultStateDir is the node path of nodedns's state directory.
const DefaultStateDir = "/var/lib/nodedns"

// TempDirName is the name of nodedns's work directory inside the state directory.
const TempDirName = "tmp"

// tempRE matches nodedns's temp files: ".NAME.nodedns-DIGITS.tmp", where NAME is the file being
// replaced (a random number stands for the star of ".NAME.nodedns-*.tmp").
var tempRE = regexp.MustCompile(`^\.(.+)\.nodedns-[0-9]+\.tmp$`)

// IsTemp reports whether a file name is one of nodedns's temp files.
func IsTemp(name string) bool { return tempRE.MatchString(name) }

// TempOf returns the name of the file a temp file of nodedns's replaces ("" when name is none).
func TempOf(name string) string {
	if m := tempRE.FindStringSubmatch(name); m != nil {
		return m[1]
	}
	return ""
}

// WorkPattern is the os.MkdirTemp pattern of a work directory in the state's TempDirName for a
// helper named name ("nodedns-netplan"): the creator's PID is in the name, so a later sweep can tell
// a dead process's leftover from a live one's work.
func WorkPattern(name string) string {
	return name + "-" + strconv.Itoa(os.Getpid()) + "-*"
}
