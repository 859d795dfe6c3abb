// Package statefile is the format of nodedns's own JSON records (docs/contract.md "Where things
// live"): those under /var/lib/nodedns that a plan writes and the next observation reads back
// (dhcp-offered.json, dhcp-domains.json, kubelet-restart.json), the daemon's writers.json, and the
// resolved-links.json the edges keep for restore. Each is read with one strict decoder and written
// with one renderer, so a file nodedns did not write as it writes them (another version's fields, a
// second value, bytes after the value) is refused the same way everywhere instead of each reader
// deciding how much to tolerate.
//
// Pure: bytes in, bytes out. node reads and renders the first four through it (policy and reconcile
// write what node renders); the edges' resolved source reads and writes resolved-links.json.
package statefile

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/nodedns/nodedns/internal/nodefs"
)

// Kind bounds a state file nodedns reads.
var Kind = nodefs.State

// Decode reads data as exactly one JSON value into v, a pointer: data over Kind's limit, a field v
// does not have, and anything after the value but white space are errors.
func Decode(data []byte, v any) error {
	if err := Kind.Bound(int64(len(data))); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	end := dec.InputOffset()
	if rest := bytes.TrimLeft(data[end:], " \t\r\n"); len(rest) > 0 {
		return fmt.Errorf("data after the JSON value, at offset %d: a state file holds one value", int64(len(data)-len(rest)))
	}
	return nil
}

// Encode renders v as every state file is written: indented by two spaces, with a final newline
// (map keys sorted, as encoding/json sorts them).
func Encode(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
