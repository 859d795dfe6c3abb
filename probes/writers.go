package probes

import (
	"fmt"
	"os"
	"path"
	"strings"
	"time"

	"github.com/nodedns/nodedns/internal/node"
)

// writerCheck maps a target `nodedns run` stopped fighting over to the check id that reports it, so
// `nodedns check` shows the backoff next to what the other writer keeps breaking (docs/contract.md: the
// check ids are a contract, so no id is added for it).
func (env *Env) writerCheck(target string) string {
	switch {
	case target == node.EtcResolvConf || (env.Snapshot != nil && target == env.Snapshot.ResolvConf.Target):
		return "resolvconf.loop"
	case target == env.Config.Kubelet.ResolvConf || (env.Snapshot != nil && target == env.Snapshot.Kubelet.ResolvConf):
		return "kubelet.resolvconf"
	case strings.HasPrefix(target, "/etc/systemd/") || strings.HasPrefix(target, "/run/systemd/"):
		return "resolved.dns"
	case strings.Contains(target, "/netplan/") || strings.HasPrefix(target, path.Dir(node.DhclientHook)):
		return "dhcp.search"
	}
	return "resolvconf.loop"
}

// annotateWriters turns the daemon's backoffs (node.WritersStatePath) into problems on the checks of
// their targets. A state file whose daemon is gone (no /proc/PID) is stale and ignored: the daemon
// removes it when it stops, so only a crash leaves one.
func annotateWriters(env *Env, r *Report) {
	if env.Snapshot == nil || env.Files == nil {
		return
	}
	st, err := node.ReadWritersState(env.Files)
	if err != nil {
		// It says nothing about the node's DNS, but whoever planted it should hear of it.
		env.log().Warn("the daemon's writers state is unreadable: other-writer backoffs are not reported", "err", err)
		return
	}
	if len(st.Backoffs) == 0 {
		return
	}
	if st.PID > 0 {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", st.PID)); err != nil {
			return
		}
	}
	for _, b := range st.Backoffs {
		id := env.writerCheck(b.Path)
		for i := range r.Checks {
			c := &r.Checks[i]
			if c.ID != id {
				continue
			}
			note := fmt.Sprintf("another writer rewrote %s %d times within %v: nodedns stopped fighting over it at %s",
				b.Path, b.Rewrites, time.Duration(b.Window), b.Since.Local().Format(time.RFC3339))
			if c.Status == OK || c.Status == Skipped {
				c.Message = note + " (" + c.Message + ")"
			} else {
				c.Message += "; " + note
			}
			c.Status = Problem
			c.Hint = "find and stop the other writer of " + b.Path + " (a template, a cron job, a DHCP hook); nodedns resumes once it leaves the file alone for writers.window"
		}
	}
}
