package nodefs

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
)

// Watch declares a directory a reader or a writer of nodedns depends on, and which names in it
// matter. Each reader package declares its own (leases.Watches, netplan.Watches, systemd.Watches,
// node.Watches); the daemon watches their union, and a test checks that every path Observe reads and
// every path a plan writes lies in a declared directory, so the list cannot drift from the readers.
type Watch struct {
	// Dir is a node path. It need not exist: the daemon then watches its nearest ancestor for it.
	Dir string
	// Match selects the names in Dir that matter.
	Match func(name string) bool
	// Complete says whether new content can be acted on at once (nil error) or is still being
	// written (a half-written file waits to settle). nil means: present and non-empty.
	Complete func(data []byte) error
}

// Names matches exactly these names.
func Names(names ...string) func(string) bool {
	return func(n string) bool {
		for _, x := range names {
			if n == x {
				return true
			}
		}
		return false
	}
}

// Suffix matches names ending in s, except hidden ones: a leading dot is a temp file (nodedns's own
// are .NAME.nodedns-*.tmp; editors, netplan and networkd use dot files too), and only the final
// rename into place matters.
func Suffix(s string) func(string) bool {
	return func(n string) bool { return strings.HasSuffix(n, s) && !strings.HasPrefix(n, ".") }
}

// Numeric matches names that are a positive decimal number (interface indexes).
func Numeric(n string) bool {
	i, err := strconv.Atoi(n)
	return err == nil && i > 0 && strconv.Itoa(i) == n
}

// ErrNoNewline marks a text file whose last line is not finished yet.
var ErrNoNewline = errors.New("no final newline (half-written?)")

// NewlineTerminated is the completeness test of line-based text (INI, KEY=VALUE): whoever writes it
// line by line has finished once the last line ends.
func NewlineTerminated(data []byte) error {
	if !bytes.HasSuffix(data, []byte("\n")) {
		return ErrNoNewline
	}
	return nil
}
