// Command kubelet-judge holds the readers nodedns's kubelet tests are judged by that do not ship as
// programs of their own, built against the same releases as the real ones (.ci/kubelet-build):
//
//	kubelet-judge pod [flags]          the resolv.conf a pod gets from kubelet's own pod DNS
//	                                   configurer (k8s.io/kubernetes pkg/kubelet/network/dns)
//	kubelet-judge rancher [flags] ARGS the kubelet command line RKE2 or k3s starts, from their
//	                                   config.yaml and config.yaml.d as they merge them, parsed by
//	                                   urfave/cli v2 as they parse it (rancher.go)
//
// Both run chrooted in a node's tree (the tests' kubeletjudge harness) and read the node's files by
// their node paths, as kubelet, RKE2 and k3s do.
//
// This directory is built only in the scratch module of .ci/kubelet-build (it imports
// k8s.io/kubernetes, which nodedns's own go.mod never requires); the leading dot of .ci keeps it out
// of ./... .
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kubelet-judge pod|rancher [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "pod":
		err = pod(os.Args[2:])
	case "rancher":
		err = rancher(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubelet-judge %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}
