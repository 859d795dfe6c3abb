package hostnet

import (
	"fmt"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// NewAt returns a Reader of the network namespace ns (its sockets are opened there; no thread of
// the caller enters it), for the tests that read a sandbox's namespace. Close it when done.
func NewAt(ns netns.NsHandle) (Reader, func(), error) {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, nil, fmt.Errorf("open rtnetlink in namespace %s: %w", ns, err)
	}
	return netlinkReader{h: h}, h.Close, nil
}
