// Command demo is `make demo`: it replays incidents 002 and 001 (docs/incidents.md) and a
// node-local-dns rolling update on this machine, in namespaces of its own, without and then with
// `nodedns run`, and prints the figures side by side. It needs root. It exits 0 when the figures
// show the incident before and none after (the rolling update: lookups lost without nodedns, at
// least 99% answered with its standby), 1 when they do not, 2 when the demo could not run.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/demo"
)

func main() {
	bin := flag.String("nodedns", "bin/nodedns", "the nodedns binary to run in the demo's node")
	verbose := flag.Bool("v", false, "print the components' logs when something fails")
	flag.Parse()
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "nodedns demo: needs root for its namespaces: sudo make demo")
		os.Exit(2)
	}
	// The harness runs only with this set (internal/testutil/nstest.Require).
	os.Setenv("NODEDNS_PRIVILEGED", "1")

	start := time.Now()
	s := &demo.Session{}
	if *verbose {
		s.Out = os.Stderr
	}
	// Ctrl-C or a SIGTERM removes every namespace, process and file the demo made (a SIGKILL
	// leaves no process, namespace or mount either: the harness ties them to this process). The
	// scenario, still running meanwhile, fails on what the cleanups remove: its result is not
	// reported: the demo exits 130 once the handler has cleaned up.
	var interrupted atomic.Bool
	cleaned := make(chan struct{})
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		interrupted.Store(true)
		fmt.Fprintln(os.Stderr, "\nnodedns demo: interrupted, cleaning up")
		s.RunCleanups()
		close(cleaned)
	}()

	fmt.Println("nodedns demo: incidents 002 and 001 and a node-local-dns rolling update, replayed with real CoreDNS,")
	fmt.Println("dnsmasq and systemd-resolved in namespaces of their own (this machine's /etc and network are not touched).")
	fmt.Println()
	var res demo.Result
	failed, skipped, msg := s.Do(func(t testing.TB) {
		res = demo.Run(t, demo.Options{Nodedns: *bin, Out: os.Stdout})
	})
	if interrupted.Load() {
		<-cleaned
		os.Exit(130)
	}
	switch {
	case skipped:
		fmt.Fprintf(os.Stderr, "nodedns demo: cannot run here: %s\n", msg)
		os.Exit(2)
	case failed:
		fmt.Fprintf(os.Stderr, "nodedns demo failed: %s\n(run with -v for the components' logs)\n", msg)
		os.Exit(2)
	}
	bad := demo.Check(res)
	fmt.Printf("Done in %.1fs; every namespace and process the demo started is gone.\n", time.Since(start).Seconds())
	if len(bad) > 0 {
		for _, b := range bad {
			fmt.Fprintln(os.Stderr, "nodedns demo: unexpected: "+b)
		}
		os.Exit(1)
	}
}
