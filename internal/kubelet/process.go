package kubelet

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nodedns/nodedns/internal/nodefs"
	"golang.org/x/sys/unix"
)

// procKind bounds a /proc file read here: kubelet's command line is well under a page, and the
// kernel caps what it serves of one far below this.
var procKind = nodefs.Proc.WithMax(1 << 20)

// Scan is what FindProcess saw in /proc.
type Scan struct {
	// Found is the chosen process's (OK): its --config, --config-dir and --resolv-conf, or the k3s
	// process's own flags (Complete adds its config files).
	Found Found
	OK    bool
	// Started is when the chosen process started (/proc/PID/stat, read with the process's
	// checks): what settles kubelet.manage's owed restart (docs/contract.md "kubelet.manage").
	Started time.Time
	// Ignored names each process that calls itself kubelet (or k3s, with a kubelet inside) but is
	// not root's, or could not be verified, with the rule it failed (trust.go), for `check`.
	Ignored []string
	// Unverified: one of them could not be verified at all (the kernel shows another process's
	// executable and namespaces only to a reader with ptrace access to it): whether kubelet runs,
	// and since when, is unknown rather than "no kubelet".
	Unverified bool
}

// UnitProcess is what systemd says of a unit that starts kubelet: its main process (MainPID) and
// its control group (ControlGroup, "" when unknown).
type UnitProcess struct {
	MainPID      int
	ControlGroup string
}

// AskUnits answers what systemd says of the units that start kubelet (Units), by unit: over D-Bus on
// the live node. nil, or an empty answer: nothing known (no systemd to ask). It is asked at most
// once per scan, and only when needed: several of root's kubelets to tell apart, or one to verify
// without ptrace access to it.
type AskUnits func() map[string]UnitProcess

// mainPIDs is the answer's main processes, PID -> unit.
func mainPIDs(units map[string]UnitProcess) map[int]string {
	out := map[int]string{}
	for u, up := range units {
		if up.MainPID > 0 {
			out[up.MainPID] = u
		}
	}
	return out
}

// askOnce wraps units so that it is asked at most once.
func askOnce(units AskUnits) AskUnits {
	if units == nil {
		return nil
	}
	var once sync.Once
	var answer map[string]UnitProcess
	return func() map[string]UnitProcess {
		once.Do(func() { answer = units() })
		return answer
	}
}

// FindProcess is step 1 of docs/contract.md "Kubelet's config": it finds the process whose name is
// kubelet (its comm, else the base name of its executable: a comm is cut at 15 bytes and can be
// changed by the process), or a `k3s server`/`k3s agent`, in proc ("/proc"; a fake tree in tests)
// and reads its --config and --config-dir. Only a process the kernel says is root's counts
// (verifyProcess: uid and gid 0, PID 1's PID and mount namespaces, a root-owned executable in
// root's directories; or, where the kernel shows nodedns no more than the process's status and
// cgroup, PID 1's PID namespace and a unit's cgroup or main process, as units says); every other is
// in Scan.Ignored with the rule it failed. When several qualify, the main process of a unit that
// starts kubelet (or its child: RKE2's kubelet) wins, as units says (nil: no bus), else the newest:
// the one that read kubelet's files last. The others are named in Found.How. A child with its
// parent's name, executable and command line is the parent's fork before its exec, and is left out.
func FindProcess(proc string, units AskUnits) (Scan, error) {
	units = askOnce(units)
	ents, err := os.ReadDir(proc)
	if err != nil {
		return Scan{}, fmt.Errorf("list %s: %w", proc, err)
	}
	var pids []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	sort.Ints(pids)
	var all []candidate
	byPID := map[int]candidate{}
	for _, pid := range pids {
		c, ok, err := readProcess(proc, pid, units)
		if err != nil {
			return Scan{}, err
		}
		if ok {
			all = append(all, c)
			byPID[pid] = c
		}
	}
	var scan Scan
	var trusted []candidate
	for _, c := range all {
		switch {
		case c.forkOf(byPID[c.ppid]):
			// Its parent's fork before its exec, not another kubelet (docs/contract.md "Kubelet's
			// config"): kubelet runs mount, iptables and others, and until the exec the child has
			// kubelet's name, executable and command line, and the newest start.
		case c.why != "":
			scan.Ignored = append(scan.Ignored, c.ignored())
			scan.Unverified = scan.Unverified || c.unverified
		default:
			trusted = append(trusted, c)
		}
	}
	if len(trusted) == 0 {
		return scan, nil
	}
	c, note := choose(proc, trusted, units)
	scan.Found, scan.OK = c.found, true
	scan.Found.How += note
	if started, err := startTime(proc, c.ticks); err == nil {
		scan.Started = started
	}
	return scan, nil
}

// candidate is one process that calls itself kubelet (or k3s).
type candidate struct {
	found Found
	pid   int
	name  string // what it calls itself: its comm, else its executable's base name
	uid   int    // its real uid, -1 when unknown
	why   string // why it is not root's kubelet ("" when it is: verifyProcess)
	// unverified: why says it could not be verified
	unverified bool
	ticks      uint64 // its start time, clock ticks since boot
	ppid       int
	// exe and cmdline are its executable link's target ("" when hidden) and its command line, as
	// read: a fork has its parent's until its exec.
	exe, cmdline string
}

// forkOf reports whether c is parent's fork that has not yet run its exec: parent's child, with its
// name, executable and command line (a process in the middle of a fork, or one that runs parent's
// very program with its very arguments, which no kubelet, RKE2 or k3s does).
func (c candidate) forkOf(parent candidate) bool {
	return parent.pid != 0 && c.ppid == parent.pid && c.name == parent.name && c.exe == parent.exe && c.cmdline == parent.cmdline
}

func (c candidate) ignored() string {
	uid := "uid unknown"
	if c.uid >= 0 {
		uid = fmt.Sprintf("uid %d", c.uid)
	}
	return fmt.Sprintf("pid %d (%s) calls itself %s: ignored (%s)", c.pid, uid, c.name, c.why)
}

// choose picks among root's processes: a unit's main process (or its descendant) when systemd
// names one, else the newest (ties: the higher PID); note says why and names the others.
func choose(proc string, trusted []candidate, ask AskUnits) (candidate, string) {
	if len(trusted) == 1 {
		return trusted[0], ""
	}
	pool, rule := trusted, ""
	if ask != nil {
		if units := mainPIDs(ask()); len(units) > 0 {
			var started []candidate
			for _, c := range trusted {
				if r := unitOf(proc, c, units); r != "" {
					started = append(started, c)
					rule = r
				}
			}
			if len(started) > 0 {
				pool = started
			}
			if len(started) > 1 {
				rule = fmt.Sprintf("the newest of %d processes the units that start kubelet run (systemd's MainPID)", len(started))
			}
		}
	}
	best := pool[0]
	for _, c := range pool[1:] {
		if c.ticks > best.ticks || (c.ticks == best.ticks && c.pid > best.pid) {
			best = c
		}
	}
	var others []string
	for _, c := range trusted {
		if c.pid != best.pid {
			others = append(others, strconv.Itoa(c.pid))
		}
	}
	also := fmt.Sprintf("pid %s also runs, root's", strings.Join(others, ", "))
	if len(others) > 1 {
		also = fmt.Sprintf("pids %s also run, root's", strings.Join(others, ", "))
	}
	if rule == "" {
		return best, fmt.Sprintf("; the newest of %d kubelet processes of root's, %s", len(trusted), also)
	}
	return best, fmt.Sprintf("; %s, %s", rule, also)
}

// unitOf says which unit started c, "" when none of units: c is a unit's main process, or a
// descendant of one (RKE2 runs kubelet as its child).
func unitOf(proc string, c candidate, units map[int]string) string {
	pid, ppid := c.pid, c.ppid
	for depth := 0; depth < 16 && pid > 1; depth++ {
		if u, ok := units[pid]; ok {
			if depth == 0 {
				return fmt.Sprintf("the main process of %s (systemd's MainPID)", u)
			}
			return fmt.Sprintf("a child of %s's main process, pid %d (systemd's MainPID)", u, pid)
		}
		pid = ppid
		stat, err := nodefs.ReadKernel(filepath.Join(proc, strconv.Itoa(pid), "stat"), procKind)
		if err != nil {
			return ""
		}
		if _, ppid, err = statFields(stat); err != nil {
			return ""
		}
	}
	return ""
}

// readProcess reads one process; ok is false when it is not a (live) kubelet or k3s. A process
// that is one but not root's comes back with why set (verifyProcess).
func readProcess(proc string, pid int, units AskUnits) (candidate, bool, error) {
	dir := filepath.Join(proc, strconv.Itoa(pid))
	// Its start time before and after the reads: the same process throughout, not a PID reused.
	stat, err := nodefs.ReadKernel(filepath.Join(dir, "stat"), procKind)
	if err != nil {
		return candidate{}, false, nil // gone, or not ours to read
	}
	ticks, ppid, err := statFields(stat)
	if err != nil {
		return candidate{}, false, nil
	}
	comm, err := nodefs.ReadKernel(filepath.Join(dir, "comm"), procKind)
	if err != nil {
		return candidate{}, false, nil
	}
	name := strings.TrimSpace(string(comm))
	exe, _ := os.Readlink(filepath.Join(dir, "exe"))
	exe = strings.TrimSuffix(exe, " (deleted)")
	k3s := false
	switch {
	case name == "kubelet":
	case path.Base(exe) == "kubelet":
		name = "kubelet"
	case name == "k3s" || name == "k3s-server" || name == "k3s-agent":
		k3s = true // checked below: `k3s server` or `k3s agent`, which run kubelet in-process
	case path.Base(exe) == "k3s":
		name, k3s = "k3s", true
	default:
		return candidate{}, false, nil
	}
	data, err := nodefs.ReadKernel(filepath.Join(dir, "cmdline"), procKind)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return candidate{}, false, nil // it exited between the two reads
		}
		return candidate{}, false, fmt.Errorf("read kubelet's command line: %w", err)
	}
	args := ParseCmdline(data)
	if len(args) == 0 {
		return candidate{}, false, nil // a zombie: its command line is gone
	}
	var found Found
	if k3s {
		var ok bool
		if found, ok = readK3s(dir, pid, args); !ok {
			return candidate{}, false, nil
		}
	} else {
		found = readKubelet(proc, dir, pid, exe, args)
	}
	c := candidate{found: found, pid: pid, name: name, ticks: ticks, ppid: ppid, exe: exe, cmdline: string(data)}
	c.uid, c.why, c.unverified = verifyProcess(proc, pid, units)
	if again, err := nodefs.ReadKernel(filepath.Join(dir, "stat"), procKind); err != nil {
		return candidate{}, false, nil
	} else if t, _, err := statFields(again); err != nil || t != ticks {
		return candidate{}, false, nil // exited, and its PID taken by another process meanwhile
	}
	return c, true, nil
}

// readKubelet reads a kubelet process's flags.
func readKubelet(proc, dir string, pid int, exe string, args []string) Found {
	fl := FlagsFromArgs(args[1:])
	found := Found{How: fmt.Sprintf("--config of the running kubelet, pid %d", pid), Shape: ShapeKubelet, PID: pid}
	// RKE2 runs kubelet as its child, from its data directory's bin.
	if strings.Contains(exe, "/rancher/rke2/") || parentComm(proc, dir) == "rke2" {
		found.Shape, found.Unit, found.RancherConfig = ShapeRKE2, "", RancherConfig(ShapeRKE2)
	}
	if !fl.HasConfig {
		found.How = fmt.Sprintf("the running kubelet (pid %d) has no --config: kubelet's defaults", pid)
	}
	// A relative path is relative to kubelet's working directory.
	cwd, _ := os.Readlink(filepath.Join(dir, "cwd"))
	if cwd == "" {
		cwd = "/"
	}
	abs := func(p string) string {
		if path.IsAbs(p) {
			return path.Clean(p)
		}
		return path.Join(cwd, p)
	}
	if fl.HasConfig {
		found.Path = abs(fl.Config)
	}
	if fl.HasConfigDir {
		found.ConfigDir = abs(fl.ConfigDir)
		found.How += ", with the drop-ins of its --config-dir " + found.ConfigDir
	}
	if fl.HasResolvConf {
		found.ResolvConf, found.HasResolvConf = abs(fl.ResolvConf), true
		found.ResolvConfHow = fmt.Sprintf("--resolv-conf of the running kubelet, pid %d", pid)
		found.ResolvOrigin = Origin{Kind: OriginProcess}
	}
	return found
}

// parentComm is the comm of the process's parent ("" when unknown).
func parentComm(proc, dir string) string {
	stat, err := nodefs.ReadKernel(filepath.Join(dir, "stat"), procKind)
	if err != nil {
		return ""
	}
	_, ppid, err := statFields(stat)
	if err != nil {
		return ""
	}
	comm, err := nodefs.ReadKernel(filepath.Join(proc, strconv.Itoa(ppid), "comm"), procKind)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(comm))
}

// readK3s reads a k3s process: `k3s server` and `k3s agent` run kubelet inside themselves, so /proc
// has no kubelet. Its own flags (--resolv-conf, --kubelet-arg, --data-dir) and K3S_RESOLV_CONF in
// its environment are kept for Complete, which adds what its config files say.
func readK3s(dir string, pid int, args []string) (Found, bool) {
	sub := ""
	for _, a := range args[1:] {
		if !strings.HasPrefix(a, "-") {
			sub = a
			break
		}
	}
	if sub != "server" && sub != "agent" {
		return Found{}, false // `k3s kubectl`, `k3s crictl`, ...: no kubelet in there
	}
	found := Found{Shape: ShapeK3s, RancherConfig: RancherConfig(ShapeK3s), PID: pid,
		How: fmt.Sprintf("the running k3s %s (pid %d) runs kubelet inside itself", sub, pid)}
	p := &rancherProcess{pid: pid}
	for i := 1; i < len(args); i++ {
		name, val, hasVal := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if !strings.HasPrefix(args[i], "-") || (name != "resolv-conf" && name != "kubelet-arg" && name != "data-dir") {
			continue
		}
		if !hasVal && i+1 < len(args) {
			i++
			val = args[i]
		}
		switch name {
		case "resolv-conf":
			p.resolvConf, p.hasResolvConf = val, true
		case "data-dir":
			p.dataDir = val
		default:
			p.kubeletArgs = append(p.kubeletArgs, val)
		}
	}
	if env, err := nodefs.ReadKernel(filepath.Join(dir, "environ"), procKind); err == nil {
		for _, kv := range ParseCmdline(env) {
			if v, ok := strings.CutPrefix(kv, "K3S_RESOLV_CONF="); ok {
				p.env = v
			}
		}
	}
	found.process = p
	return found, true
}

// userHZ is the unit of /proc/PID/stat's starttime (USER_HZ, 100 on every Linux architecture).
const userHZ = 100

// startTime is when a process started whose /proc/PID/stat says ticks (starttime, field 22: clock
// ticks since boot): that long after the boot time. kubelet.manage compares it with when nodedns
// changed kubelet's config (docs/contract.md "kubelet.manage"). Good to the clock tick.
func startTime(proc string, ticks uint64) (time.Time, error) {
	boot, err := bootTime(proc)
	if err != nil {
		return time.Time{}, err
	}
	return boot.Add(time.Duration(ticks) * time.Second / userHZ), nil
}

// bootTime is when the kernel booted: /proc/stat's btime, which the kernel cuts to the whole second
// (fs/proc/stat.c show_stat: getboottime64's tv_sec), refined to the nanosecond when it is this
// kernel's (a fake tree's is not): the wall clock now less CLOCK_BOOTTIME is the same boot time
// before the cut (getboottime64 is that difference), so when it falls within btime's second it is
// taken. The clocks are read wall clock first, so the boot time found is never later than the
// kernel's: a start time built on it errs early, towards a kubelet restart still owed.
func bootTime(proc string) (time.Time, error) {
	all, err := nodefs.ReadKernel(filepath.Join(proc, "stat"), procKind)
	if err != nil {
		return time.Time{}, err
	}
	for _, l := range strings.Split(string(all), "\n") {
		if v, ok := strings.CutPrefix(l, "btime "); ok {
			bt, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return time.Time{}, fmt.Errorf("%s/stat: btime %q", proc, v)
			}
			btime := time.Unix(bt, 0)
			now := time.Now().Round(0) // the wall clock alone
			var ts unix.Timespec
			if unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) == nil {
				if boot := now.Add(-time.Duration(ts.Nano())); !boot.Before(btime) && boot.Before(btime.Add(time.Second)) {
					return boot, nil
				}
			}
			return btime, nil
		}
	}
	return time.Time{}, fmt.Errorf("%s/stat: no btime", proc)
}

// statFields reads starttime and the parent's PID from /proc/PID/stat: "pid (comm) state ppid ..."
// with comm (which may hold spaces and parentheses) cut at the last ')', starttime field 22
// counting from pid.
func statFields(stat []byte) (ticks uint64, ppid int, err error) {
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return 0, 0, errors.New("no command name")
	}
	f := strings.Fields(string(stat[i+1:]))
	// f[0] is field 3 (state), f[1] field 4 (ppid): starttime, field 22, is f[19].
	if len(f) < 20 {
		return 0, 0, errors.New("too few fields")
	}
	if ppid, err = strconv.Atoi(f[1]); err != nil {
		return 0, 0, fmt.Errorf("ppid %q", f[1])
	}
	ticks, err = strconv.ParseUint(f[19], 10, 64)
	return ticks, ppid, err
}
