// Command busproxy relays connections from a unix socket to another one, byte for byte. nstest
// runs it INSIDE a node sandbox's PID namespace so that a test process outside can talk to the
// sandbox's system bus as a process of the node: NetworkManager asks the bus for a caller's PID and
// refuses a caller whose PID its namespace cannot see ("Unable to determine UID of the request",
// 1.42.4), while the connection the bus sees is the proxy's, made from inside.
//
//	busproxy LISTEN_PATH TARGET_PATH
package main

import (
	"fmt"
	"io"
	"net"
	"os"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: busproxy LISTEN_PATH TARGET_PATH")
		os.Exit(2)
	}
	_ = os.Remove(os.Args[1])
	l, err := net.Listen("unix", os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "busproxy:", err)
		os.Exit(1)
	}
	for {
		c, err := l.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, "busproxy:", err)
			os.Exit(1)
		}
		go relay(c, os.Args[2])
	}
}

func relay(c net.Conn, target string) {
	defer c.Close()
	t, err := net.Dial("unix", target)
	if err != nil {
		fmt.Fprintln(os.Stderr, "busproxy:", err)
		return
	}
	defer t.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(t, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, t); done <- struct{}{} }()
	<-done
}
