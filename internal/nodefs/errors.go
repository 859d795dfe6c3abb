package nodefs

import (
	"path/filepath"
	"strings"
)

// nodeErr rewrites the host paths in err's message as node paths, so that every message nodedns
// prints names the node's file, never where --root put it: "open /etc/.resolv.conf.nodedns-1.tmp:
// permission denied", not the same under /tmp/x/root. The original error stays reachable through
// errors.Is and errors.As.
func (s *Store) nodeErr(err error) error {
	if err == nil || s.Root == "" || s.Root == "/" {
		return err
	}
	root := filepath.Clean(s.Root)
	msg := err.Error()
	out := strings.ReplaceAll(msg, root+"/", "/")
	if out == msg {
		return err
	}
	return &nodePathError{msg: out, err: err}
}

type nodePathError struct {
	msg string
	err error
}

func (e *nodePathError) Error() string { return e.msg }
func (e *nodePathError) Unwrap() error { return e.err }
