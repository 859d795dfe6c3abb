// Package podprobe is the vocabulary of nodelocaldns.pods, pure: a pod network namespace as
// internal/live/podnet finds it (Pod, NSID), one probe round's question (Query) and what each pod and
// the host got (Report, PodResult, Result, Outcome), and which pods failed where the host was
// answered (Report.Failures). podnet does the finding and the probing; the check judges these values
// without importing it (nor its netlink and namespace code).
package podprobe

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/miekg/dns"
)

// NSID identifies a namespace: the device and inode of its nsfs file. /proc/PID/ns/net and a bind
// mount of it under /run/netns have the same pair, so it deduplicates what the two scans find.
type NSID struct{ Dev, Ino uint64 }

func (id NSID) String() string { return fmt.Sprintf("%d:%d", id.Dev, id.Ino) }

// IsZero reports an unknown namespace.
func (id NSID) IsZero() bool { return id == NSID{} }

// How a pod got its name (Pod.NamedBy).
const (
	NamedByHostname = "hostname" // the hostname of the pod's UTS namespace: the pod name
	NamedByNetns    = "netns"    // the runtime's name under /run/netns
	NamedByPID      = "pid"      // a process in the namespace, as "pid N"
)

// Pod is one pod network namespace.
type Pod struct {
	// Name is the pod name (its UTS hostname), else the netns name, else "pid N".
	Name string
	// NamedBy says which: NamedByHostname, NamedByNetns or NamedByPID.
	NamedBy string
	// Namespace and PodName are the pod's Kubernetes namespace and name as the container runtime
	// records its sandbox (its OCI spec under /run, root's), "" when no such record names this
	// namespace. Unlike the hostname (a pod's spec.hostname is its author's choice), they say whose
	// pod it is: only the runtime writes them.
	Namespace, PodName string
	// ID identifies the namespace; podnet.Probe refuses a namespace file that no longer names it.
	ID NSID
	// NetNS is the file to open to enter the namespace: the /run/netns bind mount when there is one
	// (it lives as long as the sandbox), else a process's ns/net.
	NetNS string
	// Netns is the runtime's name for it under /run/netns ("" when it has none) and Runtime the
	// runtime that name belongs to (podnet.RuntimeContainerd, podnet.RuntimeCRIO).
	Netns, Runtime string
	// PID is a process in the namespace as the proc root numbers it (a kubepods one when there is
	// one: the sandbox's pause process has the lowest PID); 0 when none was found.
	PID int
	// Kubepods is true when a process in kubelet's pod cgroups holds the namespace; PodUID and QoS
	// come from its cgroup path.
	Kubepods    bool
	PodUID, QoS string
	// PodIf is the pod's interface whose peer is HostIf, the host-side interface its traffic
	// arrives on (the veth peer: lxc… for Cilium, eni…/vlan… for the AWS VPC CNI, cali… for
	// Calico), HostIfIndex its index. Empty when no peer was found (an ipvlan pod, a link in a third
	// namespace).
	PodIf       string
	HostIf      string
	HostIfIndex int
}

// Outcome is what one query got.
type Outcome int

const (
	// Answered: a DNS response came back (whatever its rcode: the packet reached a server).
	Answered Outcome = iota
	// Timeout: nothing came back within the round's timeout (a drop: incident 000's BPF program, incident
	// 004's blackhole route: a silent drop on the input path, seen as a timeout on kernel 6.18).
	Timeout
	// Refused: the connection was refused (ICMP port unreachable on UDP, a RST on TCP): the address
	// is reached but nothing listens on the port.
	Refused
	// Error: the query could not be sent or failed otherwise (no route from the pod, the namespace
	// gone, a malformed reply).
	Error
)

func (o Outcome) String() string {
	switch o {
	case Answered:
		return "answered"
	case Timeout:
		return "timeout"
	case Refused:
		return "refused"
	case Error:
		return "error"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Result is one query: one target address over one protocol, from one namespace.
type Result struct {
	Addr    netip.Addr
	Net     string // "udp" or "tcp"
	Outcome Outcome
	// Rcode is the response's rcode when Outcome is Answered.
	Rcode int
	// Err says why when Outcome is not Answered.
	Err error
	// RTT is the time from sending the query to its outcome.
	RTT time.Duration
}

func (r Result) String() string {
	s := fmt.Sprintf("%s over %s: %s", r.Addr, r.Net, r.Outcome)
	switch {
	case r.Outcome == Answered:
		s += " " + dns.RcodeToString[r.Rcode]
	case r.Outcome == Error && r.Err != nil:
		s += " (" + r.Err.Error() + ")"
	}
	return s
}

// PodResult is what one pod namespace got.
type PodResult struct {
	Pod Pod
	// Err is set when no query could be sent from the namespace at all (it is gone, or cannot be
	// entered); Results is then empty. Such a pod is not a DNS failure.
	Err error
	// Results has one entry per target and protocol, in Query.Targets order, udp before tcp.
	Results []Result
}

// Report is one probe round.
type Report struct {
	// Host is what the host's own namespace got, for comparison (same order as PodResult.Results);
	// HostErr is set when the host's queries could not be sent at all.
	Host    []Result
	HostErr error
	Pods    []PodResult
	// Elapsed is the round's wall time.
	Elapsed time.Duration
}

// DefaultTimeout is a round's timeout when Query.Timeout is zero (docs/contract.md's probes.timeout).
const DefaultTimeout = 2 * time.Second

// Query is one probe round's question.
type Query struct {
	// Name is asked (type Type, default A) of every target, e.g. kubernetes.default.svc.cluster.local.
	Name string
	Type uint16
	// Targets are the addresses to ask (cache addresses, or the cluster DNS addresses in lrp mode),
	// IPv4 and IPv6 alike; Port defaults to 53.
	Targets []netip.Addr
	Port    uint16
	// Timeout bounds the whole round, not each query: every pod's queries run at once, so a
	// round with 40 pods that all time out takes one Timeout, not 40. Default 2s (probes.timeout).
	Timeout time.Duration
	// Host is as podnet.Options.Host: "" asks from this process's own network namespace.
	Host string
}

// Failures returns the pods that were not answered where the host was: for each, the results of the
// queries the host got an answer to and the pod did not. Pods that could not be probed at all
// (PodResult.Err) are not failures; neither is a query the host was not answered on either
// (nodelocaldns.dns reports that one).
func (r Report) Failures() []PodResult {
	hostOK := map[[2]string]bool{}
	for _, h := range r.Host {
		if h.Outcome == Answered {
			hostOK[[2]string{h.Addr.String(), h.Net}] = true
		}
	}
	var out []PodResult
	for _, p := range r.Pods {
		var bad []Result
		for _, res := range p.Results {
			if res.Outcome != Answered && hostOK[[2]string{res.Addr.String(), res.Net}] {
				bad = append(bad, res)
			}
		}
		if len(bad) > 0 {
			out = append(out, PodResult{Pod: p.Pod, Results: bad})
		}
	}
	return out
}
