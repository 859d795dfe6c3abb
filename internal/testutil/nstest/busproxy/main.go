// Command busproxy relays connections from a unix socket to another one, byte for byte. nstest
// runs it INSIDE a sandbox's PID namespace so that a test process outside can talk to the
// sandbox's system bus as a process of the node (Sandbox.BusAddress): the bus gives a service a
// caller's PID, which is none for a process outside its PID namespace; NetworkManager 1.42 then
// refuses the call ("Unable to determine UID of the request") and systemd-resolved 252 aborts on
// an assertion in sd_bus_creds_get_pid, while the connection the bus sees is the proxy's, made
// from inside.
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
