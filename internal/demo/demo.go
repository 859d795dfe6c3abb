// Package demo replays two of the incidents nodedns prevents (docs/incidents.md "Incident 001: a
// DHCP search domain leaks and node-cache forwards to itself" and "Incident 002: host_resolvconf
// points the node at the cache and a reboot loops") on this machine, with real components, first
// without nodedns and then with `nodedns run`, and reports the same figures both times: CoreDNS's
// loop FATAL, lookups that fail, queries that leak to the LAN resolver. A third scene is a
// node-local-dns rolling update on a kubespray node (update.go): node-cache's teardown takes the
// cache address off the node until its replacement binds; it reports a pod's lookups answered and
// the longest gap without nodedns and with `nodedns run`'s standby (docs/contract.md "Standby"),
// and what the standby put back.
//
// Everything runs in namespaces the demo makes with the test harness (internal/testutil/nstest): a
// node (network, mount, PID and UTS namespaces; /etc and /var/lib overlaid, so nothing is written to
// this machine's files) and a LAN (a second network namespace) joined by a veth pair. The node has:
//   - the node-local cache: a real CoreDNS v1.15.0 bound to 169.254.25.10 on a bridge named
//     nodelocaldns, with kubespray's nodelocaldns Corefile (cluster.local, in-addr.arpa and
//     ip6.arpa to the cluster DNS, "." to the pod's /etc/resolv.conf, each with the loop plugin),
//     run as node-cache runs: in a mount namespace of its own whose /etc/resolv.conf is the file
//     kubelet hands a dnsPolicy: Default pod (a copy of kubelet's resolvConf, made when the pod
//     starts);
//   - the cluster DNS: a second CoreDNS on 10.233.0.3 (on a bridge kube-ipvs0, as kube-proxy's IPVS
//     mode puts service addresses) answering the cluster's zones, standing in for the cluster's
//     CoreDNS behind its service;
//   - pods: glibc's resolver (getent) in a mount namespace whose /etc/resolv.conf is what kubelet
//     writes for a dnsPolicy: ClusterFirst pod (the cluster search list, then the host's search
//     domains from kubelet's resolvConf; nameserver 169.254.25.10; ndots:5);
//   - for incident 001 a real systemd-resolved 252 on a private system bus, whose
//     /run/systemd/resolve/resolv.conf is kubelet's resolvConf (as on kubespray's resolved nodes).
//
// The LAN runs dnsmasq as its resolver (--log-queries: the demo counts what it receives) and, for
// incident 001, as its DHCP server handing out the search domain example.org; the node's real
// dhclient takes that lease, and its script hands the server and domain to resolved over D-Bus.
//
// The rolling update's node has node-cache modelled from its source (nstest.NodeCache: its
// interface, its twelve rules with iptables, its teardown on SIGTERM) around a real CoreDNS in
// kubespray's Corefile, and a pod (a network namespace of its own, as nstest.AddPod makes it)
// resolving through the cache address 100 times a second (nstest.Resolver).
package demo

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodedns/nodedns/internal/testutil/nstest"
)

// The node's and the LAN's addresses, as in the incident reports.
const (
	cacheAddr   = "169.254.25.10"
	clusterDNS  = "10.233.0.3"
	nodeAddr    = "192.168.1.21"
	lanDNS      = "192.168.1.1"
	dhcpDomain  = "example.org"
	outsideName = "registry-1.docker.io"
	// outsideAddr is what the LAN resolver answers for outsideName (a documentation address: the
	// demo has no internet, the LAN resolver stands in for it).
	outsideAddr = "203.0.113.10"
	// clusterName is the one name the cluster DNS knows.
	clusterName = "kubernetes.default.svc.cluster.local"
	clusterAddr = "10.233.0.1"
)

// Lookups is how many failing pod lookups incident 001 counts leaks for: one dead service name
// each (the report had Ingresses pointing at ExternalNames that did not exist).
const Lookups = 50

// Options configure a run.
type Options struct {
	// Nodedns is the nodedns binary to run; empty: built from this module (nstest.Build).
	Nodedns string
	// Out receives the report a person reads; nil discards it.
	Out io.Writer
}

// Figures are what one phase of an incident measured.
type Figures struct {
	// CacheUp: the node-local cache was running and answering at the end of the phase.
	CacheUp bool
	// LoopFatals counts the cache's exits with the loop plugin's FATAL during the phase (the demo
	// restarts it as kubelet restarts a crashing pod); FatalLine is the first such line.
	LoopFatals int
	FatalLine  string
	// Starts counts the cache's starts in the phase.
	Starts int
	// ExitCode is the cache's exit status when it exited (else -1).
	ExitCode int
	// Outside is what a pod's lookup of outsideName gave: the address, or the failure.
	Outside string
	// Leaked counts the queries for *.svc.cluster.local.<DHCP domain> the LAN resolver received
	// during the pods' Lookups failing lookups (incident 001 only; -1 when not measured).
	Leaked int
	// Nameservers and Search are those of the file kubelet hands pods (its resolvConf).
	Nameservers, Search []string
	// SelfForwarded counts the queries the cache forwarded to its own address during the phase
	// (from its Prometheus metrics; -1 when it was not up to ask).
	SelfForwarded int
}

// Incident is one replayed incident.
type Incident struct {
	ID, Title string
	Before    Figures
	After     Figures
	// Changed is what `nodedns run` logged that it changed; Restored what `nodedns restore` said.
	Changed  []string
	Restored []string
	// RestoredExact: after `nodedns restore` kubelet's resolvConf is byte for byte what it was
	// before nodedns ran.
	RestoredExact bool
	Elapsed       time.Duration
}

// Result is what a run measured: the incidents (002, then 001) and the rolling update.
type Result struct {
	Incidents []Incident
	Update    Update
}

// Run replays incidents 002 and 001, then a node-local-dns rolling update, and returns their
// figures. Every namespace and process it started is gone when t's cleanups have run (t.Cleanup).
func Run(t testing.TB, o Options) Result {
	t.Helper()
	out := o.Out
	if out == nil {
		out = io.Discard
	}
	bin := o.Nodedns
	if bin == "" {
		bin = nstest.Build(t)
	}
	if !filepath.IsAbs(bin) {
		abs, err := filepath.Abs(bin)
		if err != nil {
			t.Fatal(err)
		}
		bin = abs
	}
	nstest.NeedTools(t, "apt-get install dnsmasq-base isc-dhcp-client", "dnsmasq", "dhclient")
	nstest.NeedTools(t, "apt-get install libc-bin util-linux iproute2 dbus-daemon dbus-bin", "getent", "unshare", "ip", "dbus-daemon", "dbus-send")
	nstest.NeedTools(t, "apt-get install iptables bind9-dnsutils", "iptables", "dig")
	d := &demo{t: t, out: out, bin: bin, coredns: nstest.CoreDNS(t)}
	var r Result
	r.Incidents = []Incident{d.incident002(), d.incident001()}
	r.Update = d.rollingUpdate()
	return r
}

type demo struct {
	t       testing.TB
	out     io.Writer
	bin     string
	coredns string
}

func (d *demo) printf(format string, args ...any) { fmt.Fprintf(d.out, format, args...) }

// incident002 is kubespray's host_resolvconf after a reboot (seed 002): /etc/resolv.conf is a
// regular file listing only the cache; dhclient's lease has the LAN server.
func (d *demo) incident002() Incident {
	return d.replay(Incident{ID: "002", Title: "kubespray's host_resolvconf points the node at the cache; after a reboot the cache loops"}, replayPlan{
		iface: "ens33", restarts: 2, setup: d.setup002,
		fixed: func(n *node) bool {
			data, err := os.ReadFile(n.sb.Path("/etc/resolv.conf"))
			return err == nil && !strings.Contains(string(data), cacheAddr)
		},
	})
}

// setup002 puts the node in incident 002's state and returns nodedns's config for it.
func (d *demo) setup002(n *node) (config string) {
	n.sb.Run(d.t, fmt.Sprintf(`set -e
rm -f /etc/resolv.conf
printf 'domain cluster.local\nsearch cluster.local default.svc.cluster.local. svc.cluster.local.\nnameserver %[1]s\n' > /etc/resolv.conf
printf '# Configuration file for /sbin/dhclient.\nrequest subnet-mask, broadcast-address, time-offset, routers,\n\tdomain-name, domain-name-servers, domain-search, host-name;\n' > /etc/dhcp/dhclient.conf
cat > /var/lib/dhcp/dhclient.ens33.leases <<'END'
lease {
  interface "ens33";
  fixed-address %[2]s;
  option subnet-mask 255.255.255.0;
  option routers %[3]s;
  option dhcp-lease-time 86400;
  option dhcp-message-type 5;
  option domain-name-servers %[3]s;
  option dhcp-server-identifier %[3]s;
  renew 3 2099/11/11 01:23:45;
  rebind 3 2099/11/11 11:23:45;
  expire 3 2099/11/11 14:23:45;
}
END
cat > /var/lib/kubelet/config.yaml <<'END'
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: systemd
clusterDomain: cluster.local
clusterDNS:
- %[1]s
resolvConf: "/etc/resolv.conf"
END
`, cacheAddr, nodeAddr, lanDNS))
	d.printf("  node: /etc/resolv.conf lists only the cache (%s), kubelet hands that file to pods, and the\n", cacheAddr)
	d.printf("  node-local cache (CoreDNS, kubespray's Corefile) forwards \".\" to its pod's copy of it.\n")
	return "netplan:\n  mode: \"off\"\n"
}

// incident001 is a resolved node with kubespray's drop-in (DNS= the cache) and a DHCP search
// domain on its uplink (seed 001): kubelet's resolvConf is resolved's
// /run/systemd/resolve/resolv.conf.
func (d *demo) incident001() Incident {
	// The cache may catch its own loop at start (the loop plugin's probe reaches itself through the
	// first nameserver); kubelet restarts it until it stays up, as in the report.
	return d.replay(Incident{ID: "001", Title: "a DHCP search domain leaks and node-cache forwards to itself"}, replayPlan{
		iface: "enp1s0", dhcp: true, restarts: 10, leaks: true, setup: d.setup001,
		fixed: func(n *node) bool {
			data, err := os.ReadFile(n.sb.Path("/run/systemd/resolve/resolv.conf"))
			return err == nil && !strings.Contains(string(data), cacheAddr) && !strings.Contains(string(data), dhcpDomain)
		},
	})
}

// setup001 puts the node in incident 001's state and returns nodedns's config for it.
func (d *demo) setup001(n *node) (config string) {
	t := d.t
	n.sb.Run(t, fmt.Sprintf(`set -e
mkdir -p /etc/systemd/resolved.conf.d
chmod 0755 /etc/systemd /etc/systemd/resolved.conf.d
printf '[Resolve]\nDNS=%[1]s\nDomains=default.svc.cluster.local svc.cluster.local\nFallbackDNS=\nCache=no-negative\n' > /etc/systemd/resolved.conf.d/kubespray.conf
rm -f /etc/resolv.conf && ln -s /run/systemd/resolve/stub-resolv.conf /etc/resolv.conf
cat > /var/lib/kubelet/config.yaml <<'END'
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
clusterDomain: cluster.local
clusterDNS:
- %[1]s
resolvConf: "/run/systemd/resolve/resolv.conf"
END
id systemd-resolve >/dev/null 2>&1 || useradd -r -M -s /usr/sbin/nologin systemd-resolve
`, cacheAddr, nodeAddr, lanDNS))
	n.sb.SystemBus(t)
	res := n.sb.StartResolved(t)

	// The node takes its lease from the LAN's DHCP server with a real dhclient, whose script hands
	// the lease's server and search domain to resolved over D-Bus, as Ubuntu's resolved hook does
	// (the address is already on the link). It runs inside the node: resolved asks the bus for its
	// caller's process, which must be in its PID namespace.
	rdir := nstest.ResolvedDir(t)
	script := filepath.Join(n.sb.Dir(), "dhclient-script")
	must(t, os.WriteFile(script, []byte(fmt.Sprintf(`#!/bin/sh
case "$reason" in BOUND|RENEW|REBIND|REBOOT)
	export LD_LIBRARY_PATH=%[1]s/usr/lib/x86_64-linux-gnu/systemd
	%[1]s/usr/bin/resolvectl dns "$interface" $new_domain_name_servers
	if [ -n "$new_domain_search" ]; then %[1]s/usr/bin/resolvectl domain "$interface" $new_domain_search; fi
esac
`, nstest.Quote(rdir))), 0o755))
	conf := filepath.Join(n.sb.Dir(), "dhclient.conf")
	must(t, os.WriteFile(conf, []byte("request subnet-mask, broadcast-address, routers, domain-name, domain-name-servers, domain-search;\n"), 0o644))
	n.sb.Run(t, fmt.Sprintf("dhclient -1 -cf %s -sf %s -lf /var/lib/dhcp/dhclient.enp1s0.leases -pf /run/dhclient.pid enp1s0", nstest.Quote(conf), nstest.Quote(script)))
	nstest.WaitFor(t, 10*time.Second, "resolved's resolv.conf to list the DHCP domain", func() bool {
		data, err := os.ReadFile(n.sb.Path("/run/systemd/resolve/resolv.conf"))
		return err == nil && strings.Contains(string(data), dhcpDomain)
	})
	d.printf("  node: systemd-resolved 252 with kubespray's drop-in (DNS=%s); dhclient took a lease from the\n", cacheAddr)
	d.printf("  LAN's dnsmasq with search domain %s; kubelet hands pods resolved's /run/systemd/resolve/resolv.conf.\n", dhcpDomain)
	return "resolved:\n  restartCommand: [" + strconv.Quote(res.RestartScript) + "]\nnetplan:\n  mode: \"off\"\n"
}

// replayPlan is how an incident is replayed: the node's uplink (iface; dhcp: the LAN's dnsmasq hands
// out its address), setup putting the node in the incident's state and giving nodedns's config, the
// cache's restarts allowed before the figures without nodedns (measure), whether lookups leak to
// the LAN, and fixed saying when `nodedns run` has repaired the node.
type replayPlan struct {
	iface       string
	dhcp, leaks bool
	restarts    int
	setup       func(n *node) (config string)
	fixed       func(n *node) bool
}

// replay replays inc: its node set up, its figures without nodedns, then with `nodedns run` once it
// has repaired the node, then what `nodedns restore` put back; the report printed.
func (d *demo) replay(inc Incident, r replayPlan) Incident {
	start := time.Now()
	d.printf("Incident %s: %s\n", inc.ID, inc.Title)
	n := d.newNode(r.iface, r.dhcp, true)
	config := r.setup(n)
	_, start0 := n.kubeletResolvConf()
	n.measure(&inc.Before, r.restarts, r.leaks)

	cfg := filepath.Join(n.sb.Dir(), "nodedns.yaml")
	must(d.t, os.WriteFile(cfg, []byte(config), 0o644))
	p, changed := n.runNodedns(cfg, func() bool { return r.fixed(n) })
	inc.Changed = changed
	n.measure(&inc.After, 0, r.leaks)
	inc.Restored, inc.RestoredExact = n.restore(p, cfg, start0)
	inc.Elapsed = time.Since(start)
	d.report(inc)
	return inc
}

// report prints an incident's figures side by side.
func (d *demo) report(inc Incident) {
	b, a := inc.Before, inc.After
	row := func(what, before, after string) {
		d.printf("  %-32s %-38s %s\n", what, clip(before, 37), clip(after, 37))
	}
	list := func(l []string) string {
		if len(l) == 0 {
			return "(none)"
		}
		return strings.Join(l, " ")
	}
	row("", "without nodedns", "with nodedns run")
	row("pods' upstreams (kubelet file)", list(b.Nameservers), list(a.Nameservers))
	row("search domains pods inherit", list(inherited(b.Search)), list(inherited(a.Search)))
	row("node-local cache (CoreDNS)", cacheState(b), cacheState(a))
	if b.SelfForwarded >= 0 || a.SelfForwarded >= 0 {
		row("queries it sent to itself", count(b.SelfForwarded), count(a.SelfForwarded))
	}
	row(outsideName+" from a pod", b.Outside, a.Outside)
	if b.Leaked >= 0 {
		row(fmt.Sprintf("%d failing pod lookups", Lookups), fmt.Sprintf("%d queries leaked to the LAN", b.Leaked), fmt.Sprintf("%d queries leaked to the LAN", a.Leaked))
		d.printf("  (the LAN's dnsmasq logs them as user7-svc.user7.svc.cluster.local.%s and so on)\n", dhcpDomain)
	}
	if b.FatalLine != "" {
		line := b.FatalLine
		if k := strings.Index(line, ", see https://"); k > 0 {
			line = line[:k]
		}
		d.printf("  CoreDNS without nodedns: %s\n", line)
	}
	d.printf("  nodedns run: %s\n", strings.Join(inc.Changed, "; "))
	back := "the node is as it was"
	if !inc.RestoredExact {
		back = "kubelet's file is NOT as it was"
	} else if slices.Contains(b.Nameservers, cacheAddr) {
		back += ", the loop included"
	}
	var said []string
	removed := 0
	for _, r := range inc.Restored {
		switch {
		case strings.HasPrefix(r, "removed "):
			removed++
		case strings.HasPrefix(r, "restart-resolved "):
			said = append(said, "restarted systemd-resolved")
		default:
			if k := strings.Index(r, ":"); k > 0 {
				r = r[:k]
			}
			said = append(said, r)
		}
	}
	if removed > 0 {
		said = append(said, fmt.Sprintf("removed the %d paths it had created", removed))
	}
	d.printf("  nodedns restore: %s\n", strings.Join(said, "; "))
	d.printf("  After restore %s. (%.1fs)\n\n", back, inc.Elapsed.Seconds())
}

// inherited returns the search domains of kubelet's file that a ClusterFirst pod gets beyond the
// cluster's own.
func inherited(search []string) []string {
	var out []string
	for _, s := range search {
		if k := strings.TrimSuffix(s, "."); k != "cluster.local" && !strings.HasSuffix(k, ".cluster.local") {
			out = append(out, s)
		}
	}
	return out
}

func count(n int) string {
	if n < 0 {
		return "-"
	}
	return strconv.Itoa(n)
}

func cacheState(f Figures) string {
	switch {
	case f.CacheUp && f.LoopFatals > 0:
		return fmt.Sprintf("up after %d loop FATAL(s), restarted", f.LoopFatals)
	case f.CacheUp:
		return "up, answering"
	case f.LoopFatals > 0:
		return fmt.Sprintf("exit %d, loop FATAL (%d of %d starts)", f.ExitCode, f.LoopFatals, f.Starts)
	default:
		return fmt.Sprintf("down (exit %d)", f.ExitCode)
	}
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// Check returns what in the figures is not what the incidents and their fix must show: the
// incident before nodedns (002: the cache exits with the loop plugin's FATAL; 001: failing pod
// lookups leak to the LAN resolver) and none after (the cache up and answering an outside name,
// nothing leaked); and what in the rolling update is not what the standby promises
// (docs/contract.md "Standby").
func Check(r Result) []string {
	var bad []string
	for _, inc := range r.Incidents {
		b, a := inc.Before, inc.After
		switch inc.ID {
		case "002":
			if b.CacheUp || b.LoopFatals == 0 || b.ExitCode != 1 {
				bad = append(bad, fmt.Sprintf("incident 002 before: want the cache to exit 1 with the loop FATAL, got up=%v fatals=%d exit=%d", b.CacheUp, b.LoopFatals, b.ExitCode))
			}
			if b.Outside == outsideAddr {
				bad = append(bad, "incident 002 before: a pod resolved "+outsideName+" with the cache down")
			}
		case "001":
			if b.Leaked <= 0 {
				bad = append(bad, fmt.Sprintf("incident 001 before: want leaked queries, got %d", b.Leaked))
			}
			if a.Leaked != 0 {
				bad = append(bad, fmt.Sprintf("incident 001 after: %d queries leaked, want 0", a.Leaked))
			}
		}
		if !a.CacheUp || a.LoopFatals != 0 || a.Outside != outsideAddr {
			bad = append(bad, fmt.Sprintf("incident %s after: want the cache up with no loop and %s answered %s, got up=%v fatals=%d answer=%q", inc.ID, outsideName, outsideAddr, a.CacheUp, a.LoopFatals, a.Outside))
		}
	}
	return append(bad, checkUpdate(r.Update)...)
}

// checkUpdate: without nodedns node-cache's teardown takes its interface and every rule, and the
// pod loses lookups for seconds (the address is gone until the replacement binds, ReplaceAfter
// later: well under 99% answered, a gap over a second); with the standby at least 99% are answered
// and no gap is longer than 200 ms, plus what the machine's load alone cost the control resolver
// (nstest.GapAllowed, as the standby's live tests allow), at 50 lookups a second or more; nodedns
// put back the interface and node-cache's rules, and the replacement took them over.
func checkUpdate(u Update) []string {
	var bad []string
	w, c := u.Without, u.With
	if u.Rules == 0 || u.TornDown.Link || u.TornDown.Rules != 0 {
		bad = append(bad, fmt.Sprintf("rolling update without nodedns: want node-cache's teardown to delete its interface and its %d rules, left interface=%v and %d rules", u.Rules, u.TornDown.Link, u.TornDown.Rules))
	}
	if w.AnsweredShare() > 0.9 || w.LongestGap <= time.Second {
		bad = append(bad, fmt.Sprintf("rolling update without nodedns: %s; want lookups lost (at most 90%% answered, a gap over 1s)", w))
	}
	if c.AnsweredShare() < 0.99 || c.LongestGap > nstest.GapAllowed(u.Control) || c.Rate < 50 {
		bad = append(bad, fmt.Sprintf("rolling update with the standby: %s; want at least 99%% answered at 50 lookups/s or more and no gap over %v (control, asking the cluster DNS: %s)", c, nstest.GapAllowed(u.Control), u.Control))
	}
	if !strings.Contains(u.PutBack, "interface nodelocaldns") || !strings.Contains(u.PutBack, fmt.Sprintf("%d of node-cache's rules", u.Rules)) {
		bad = append(bad, fmt.Sprintf("rolling update with the standby: nodedns check says it put back %q, want the interface and node-cache's %d rules (nodelocaldns.standby %s)", u.PutBack, u.Rules, u.Check))
	}
	if !strings.HasPrefix(u.Check, "ok: ") || !u.TakenOver {
		bad = append(bad, "rolling update with the standby: want the replacement to have taken over what nodedns put back, nodelocaldns.standby "+u.Check)
	}
	return bad
}
