package node

// WriteTree is writeTree for the package's external tests (node_test).
var WriteTree = writeTree
