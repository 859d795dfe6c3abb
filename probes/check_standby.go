package probes

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/internal/standby/statefile"
)

// readStandby reads the daemon's standby state (statefile.Path). ok is false when there is none
// or its daemon is gone: the daemon marks it unknown when it stops, so only a crash leaves one
// that claims more.
func (env *Env) readStandby() (st statefile.Status, ok bool, err error) {
	if env.Files == nil {
		return st, false, nil
	}
	// Only the daemon's own word: a file another user could write says nothing (nodefs.CheckState).
	if err := nodefs.CheckState(env.Files, statefile.Path); err != nil {
		return st, false, err
	}
	data, err := env.Files.ReadFile(statefile.Path, nodefs.State)
	if errors.Is(err, fs.ErrNotExist) {
		return st, false, nil
	}
	if err != nil {
		return st, false, err
	}
	st, err = statefile.Parse(statefile.Path, data)
	if err != nil {
		return st, false, err
	}
	if st.PID > 0 {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", st.PID)); err != nil {
			return st, false, nil
		}
	}
	return st, true, nil
}

type nodelocalStandby struct{}

func (nodelocalStandby) ID() string { return "nodelocaldns.standby" }

// Run reports the standby (docs/contract.md "Standby"): ok while ready, a problem while it stands in
// for the cache (the node is degraded, and says so), unknown when it cannot stand in.
func (nodelocalStandby) Run(_ context.Context, env *Env) Result {
	if !env.Config.NodeLocalDNS.Standby {
		return Result{Status: Skipped, Message: "nodeLocalDNS.standby is off"}
	}
	if env.Host == nil {
		return liveSkipped()
	}
	st, ok, err := env.readStandby()
	switch {
	case err != nil:
		return Result{Status: Unknown, Message: "the standby's state is unreadable: " + err.Error()}
	case !ok:
		return Result{Status: Unknown, Message: "nodeLocalDNS.standby is on, but `nodedns run` is not running: nothing stands in for the cache",
			Hint: "systemctl status nodedns"}
	}
	pb := putBack(st.PutBack)
	switch st.State {
	case statefile.Active:
		down := "the node-local cache is down"
		if len(st.Hung) > 0 {
			down = "the node-local cache holds its listeners on " + addrList(st.Hung) + " but answers nothing (hung)"
		}
		why := ""
		if st.Why != "" {
			why = "; " + st.Why
		}
		return Result{Status: Problem,
			Message: fmt.Sprintf("%s: nodedns stands in on %s since %s, %d queries (%s)%s%s",
				down, addrList(st.Covering), st.Since.Local().Format(time.RFC3339), st.Queries, st.Targets, why, pb),
			Hint: "pods keep resolving through nodedns, without the cache's caching: check the node-local-dns pod on this node (kubectl -n kube-system logs ds/nodelocaldns)"}
	case statefile.Ready:
		return Result{Status: OK, Message: "ready to stand in for the cache: " + st.Targets + pb}
	}
	r := Result{Status: Unknown, Message: "cannot stand in for the cache: " + st.Why + pb}
	if st.OtherUser() {
		// The kernel's SO_REUSEPORT rule (same user only): the cache and nodedns must be one user's
		// for the standby to stand in and hand back (docs/contract.md "Standby").
		r.Hint = fmt.Sprintf("run node-local-dns as uid %d (root), as kubernetes/dns's nodelocaldns.yaml and kubespray's DaemonSet do, or set nodeLocalDNS.standby: off", st.UID)
	}
	return r
}

// putBack says what the standby last did when node-cache's interface or a cache address went
// (docs/contract.md "Standby").
func putBack(pb *statefile.PutBack) string {
	if pb == nil {
		return ""
	}
	at := pb.At.Local().Format(time.RFC3339)
	if pb.What == "" {
		return fmt.Sprintf("; at %s %s: %s", at, pb.Gone, pb.Why)
	}
	s := fmt.Sprintf("; at %s %s: nodedns put back %s (%v later)", at, pb.Gone, pb.What, pb.Took.Round(time.Microsecond))
	if pb.Why != "" {
		s += " (" + pb.Why + ")"
	}
	if !pb.Adopted.IsZero() {
		s += fmt.Sprintf("; node-cache took it over at %s", pb.Adopted.Local().Format(time.RFC3339))
	} else {
		s += "; `nodedns restore` removes it until node-cache takes it over"
	}
	return s
}

// standbyActive reports the standby state when it stands in: what nodelocaldns.dns adds while the standby answers on the cache's addresses: its
// answers are not the cache's, and the node condition must stay visible.
func (env *Env) standbyActive() (statefile.Status, bool) {
	if !env.Config.NodeLocalDNS.Standby {
		return statefile.Status{}, false
	}
	st, ok, err := env.readStandby()
	return st, ok && err == nil && st.State == statefile.Active
}
