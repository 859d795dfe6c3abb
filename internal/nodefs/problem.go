package nodefs

// Problem is a node file (or directory) a reader could not use, or a line or value in it that was
// skipped: the node path, the line (0 for the whole file), and what is wrong. A reader's Load
// reports its problems in this shape (systemd.Warning and kubelet.Problem have it too), and node
// records each with the kind of source it belongs to (node.Problem).
type Problem struct {
	Path string // node path; "" when the reader cannot name one
	Line int
	Msg  string
}
