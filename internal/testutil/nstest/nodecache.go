package nstest

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// node-cache (kubernetes/dns cmd/node-cache, now kubernetes-sigs/node-local-dns) cannot be built
// here: the module proxy refuses k8s.io/dns. NodeCache models what it does to the node, from its
// source (kubernetes/dns at 9aa70b8f, cmd/node-cache/app/cache_app.go and pkg/netif/netif.go), with a
// real CoreDNS as the cache and the suite's own iptables:
//
//   - Init: `EnsureDummyDevice` (netif.go): an existing interface is kept as it is and the cache
//     address added where missing (AddrAdd's error ignored); a missing one is created as a `dummy`
//     link (here a bridge: this kernel has no dummy type), never set up. Then CoreDNS binds.
//   - Its rules (cache_app.go `initIptables`: twelve per address, in this order, with these
//     comments) come once CoreDNS runs, as they do at once when node-cache is given -pidfile
//     (`runPeriodic`); each through `EnsureRule(Prepend, ...)` (k8s.io/kubernetes
//     pkg/util/iptables/iptables.go: `iptables -C`, and `-I` when that fails).
//   - On SIGTERM, unless -skipteardown, `TeardownNetworking` (run from CoreDNS's process-exit hook,
//     while its servers still run): for each rule, DeleteRule then EnsureRule in a loop until
//     EnsureRule finds the rule was there, then a last DeleteRule (the rule EnsureRule just added);
//     then `RemoveDummyDevice` deletes the interface; then CoreDNS stops its servers and the process
//     exits.
//
// The model is a shell (the "pod") with CoreDNS as its child; the shell does the rules, the
// interface and the teardown, CoreDNS holds the listeners.
type NodeCache struct {
	Interface string
	Addr      netip.Addr
	Corefile  string
	// Iptables is the command the rules are written with: "iptables" (this suite's default,
	// nf_tables on bookworm and forky) or "iptables-legacy".
	Iptables string
	// SkipTeardown is node-cache's -skipteardown.
	SkipTeardown bool

	sb    *Sandbox
	cmd   *exec.Cmd
	shell int // the model's process (the "node-cache" pod), as this machine numbers it
	seq   int
}

// NodeCacheComments are node-cache's rule comments (cache_app.go iptablesCommentSkipConntrack and
// iptablesCommentAllowTraffic).
var NodeCacheComments = []string{"NodeLocal DNS Cache: skip conntrack", "NodeLocal DNS Cache: allow DNS traffic"}

// NodeCacheRules are node-cache's rules for addr (cache_app.go initIptables; LocalPort 53, the
// default HealthPort 8080): table, chain and the arguments EnsureRule is given.
func NodeCacheRules(addr netip.Addr) [][]string {
	a, skip, allow := addr.String(), NodeCacheComments[0], NodeCacheComments[1]
	var out [][]string
	for _, r := range []struct{ table, chain, dir, port, target, comment string }{
		{"raw", "PREROUTING", "d", "53", "NOTRACK", skip},
		{"filter", "INPUT", "d", "53", "ACCEPT", allow},
		{"raw", "OUTPUT", "s", "53", "NOTRACK", skip},
		{"filter", "OUTPUT", "s", "53", "ACCEPT", allow},
		{"raw", "OUTPUT", "d", "53", "NOTRACK", skip},
	} {
		for _, p := range []string{"tcp", "udp"} {
			out = append(out, []string{r.table, r.chain, "-p", p, "-" + r.dir, a, "--" + r.dir + "port", r.port, "-j", r.target, "-m", "comment", "--comment", r.comment})
		}
	}
	out = append(out,
		[]string{"raw", "OUTPUT", "-p", "tcp", "-d", a, "--dport", "8080", "-j", "NOTRACK", "-m", "comment", "--comment", skip},
		[]string{"raw", "OUTPUT", "-p", "tcp", "-s", a, "--sport", "8080", "-j", "NOTRACK", "-m", "comment", "--comment", skip})
	return out
}

// nodeCacheScript is the model's shell: $1 the interface, $2 the address, $3 iptables, $4 the
// Corefile, $5 CoreDNS, $6 the pidfile, $7 "1" for -skipteardown.
const nodeCacheScript = `set -u
IF=$1 ADDR=$2 IPT=$3 COREFILE=$4 COREDNS=$5 PIDFILE=$6 SKIP=$7
check() { t=$1 c=$2; shift 2; $IPT -w -t "$t" -C "$c" "$@" 2>/dev/null; }
# utiliptables EnsureRule(Prepend): -C, then -I; "existed" is -C's answer.
ensure() { t=$1 c=$2; shift 2; check "$t" "$c" "$@" && return 0; $IPT -w -t "$t" -I "$c" "$@"; return 1; }
# utiliptables DeleteRule: -C, then -D when there.
delete() { t=$1 c=$2; shift 2; check "$t" "$c" "$@" || return 0; $IPT -w -t "$t" -D "$c" "$@"; }
# TeardownNetworking's loop for one rule.
teardown_rule() { while :; do delete "$@"; ensure "$@" || break; done; delete "$@"; }
# EnsureDummyDevice.
if ip link show "$IF" >/dev/null 2>&1; then
	ip addr add "$ADDR" dev "$IF" 2>/dev/null
else
	ip link add "$IF" type dummy 2>/dev/null || ip link add "$IF" type bridge
	ip addr add "$ADDR" dev "$IF"
fi
rm -f "$PIDFILE"
"$COREDNS" -conf "$COREFILE" -pidfile "$PIDFILE" &
CACHE=$!
teardown() {
	if [ "$SKIP" != 1 ]; then
		while IFS= read -r r; do eval "teardown_rule $r"; done < "$RULES"
		ip link del "$IF"
	fi
	kill -TERM $CACHE
	wait $CACHE
	exit 0
}
trap teardown TERM INT
while [ ! -s "$PIDFILE" ]; do sleep 0.02; done
while IFS= read -r r; do eval "ensure $r"; done < "$RULES"
: > "$PIDFILE.rules"
while :; do wait $CACHE; s=$?; [ $s -gt 128 ] || exit $s; done
`

// StartNodeCache starts the model as node-cache starts: its interface ensured, CoreDNS bound, its
// rules ensured. It waits until CoreDNS answers nc's Corefile on the address (probe is a name
// and the answer it must carry) and the rules are in place.
func (sb *Sandbox) StartNodeCache(t testing.TB, nc *NodeCache, probe, answer string) {
	t.Helper()
	nc.sb = sb
	if nc.Interface == "" {
		nc.Interface = "nodelocaldns"
	}
	if nc.Iptables == "" {
		nc.Iptables = "iptables"
	}
	sb.Opts.Suite.Need(t, "apt-get install iptables bind9-dnsutils", nc.Iptables, "dig")
	nc.seq++
	dir := sb.Dir()
	script := filepath.Join(dir, "node-cache-model.sh")
	rules := filepath.Join(dir, "node-cache-rules")
	var b strings.Builder
	for _, r := range NodeCacheRules(nc.Addr) {
		for i, a := range r {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(Quote(a))
		}
		b.WriteByte('\n')
	}
	for p, data := range map[string]string{script: nodeCacheScript, rules: b.String()} {
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	skip := "0"
	if nc.SkipTeardown {
		skip = "1"
	}
	pidfile := fmt.Sprintf("/run/node-cache-%d.pid", nc.seq)
	nc.cmd, nc.shell = sb.StartPID(t, "env", "RULES="+rules, "sh", script, nc.Interface, netip.PrefixFrom(nc.Addr, nc.Addr.BitLen()).String(),
		nc.Iptables, nc.Corefile, CoreDNS(t), pidfile, skip)
	for _, tcp := range []string{"+notcp", "+tcp"} {
		WaitFor(t, 20*time.Second, fmt.Sprintf("node-cache on %s (%s)", nc.Addr, tcp), func() bool {
			out, err := sb.Try(fmt.Sprintf("dig %s +tries=1 +time=1 @%s %s A", tcp, nc.Addr, probe))
			return err == nil && strings.Contains(out, "status: NOERROR") && strings.Contains(out, answer)
		})
	}
	WaitFor(t, 20*time.Second, "node-cache's rules", func() bool {
		_, err := os.Stat(sb.Path(pidfile + ".rules"))
		return err == nil
	})
}

// CachePID is the CoreDNS process holding the listeners, or 0.
func (nc *NodeCache) CachePID() int {
	if nc.shell == 0 {
		return 0
	}
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", nc.shell, nc.shell))
	for _, f := range strings.Fields(string(data)) {
		if comm, err := os.ReadFile("/proc/" + f + "/comm"); err == nil && strings.TrimSpace(string(comm)) == "coredns" {
			var pid int
			fmt.Sscan(f, &pid)
			return pid
		}
	}
	return 0
}

// Terminate sends the model SIGTERM (a pod deleted, evicted, replaced by a rolling update) and waits
// until it has exited: with its teardown done, unless SkipTeardown.
func (nc *NodeCache) Terminate(t testing.TB) {
	t.Helper()
	if nc.cmd == nil {
		return
	}
	if err := syscall.Kill(nc.shell, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// StartPID reaps the model itself; a second Wait here would race with it.
	select {
	case <-nc.sb.Reaped(nc.cmd):
	case <-time.After(30 * time.Second):
		t.Fatalf("node-cache model did not exit within 30 s of SIGTERM")
	}
	nc.cmd, nc.shell = nil, 0
}

// Log is the model's output (its CoreDNS's included).
func (nc *NodeCache) Log() string { return output(nc.cmd) }

// CountRules counts node-cache's rules for addr in the node's tables, with the iptables-save
// matching iptables (iptables-save, iptables-legacy-save), by their comment.
func (sb *Sandbox) CountRules(t testing.TB, iptables string, addr netip.Addr) int {
	t.Helper()
	save := iptables + "-save"
	if strings.HasSuffix(iptables, "-legacy") {
		save = strings.TrimSuffix(iptables, "-legacy") + "-legacy-save"
	}
	out := sb.Run(t, save)
	n := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "-A ") && strings.Contains(l, "NodeLocal DNS Cache") && strings.Contains(l, " "+netip.PrefixFrom(addr, addr.BitLen()).String()+" ") {
			n++
		}
	}
	return n
}
