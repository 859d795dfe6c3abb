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
	"time"

	"github.com/nodedns/nodedns/internal/nodefs"
)

// procKind bounds a /proc file read here: kubelet's command line is well under a page, and the
// kernel caps what it serves of one far below this.
var procKind = nodefs.Proc.WithMax(1 << 20)

// FindProcess is step 1 of docs/contract.md "Kubelet's config": it finds the process whose name is
// kubelet (its comm, else the base name of its executable: a comm is cut at 15 bytes and can be
// changed by the process) in proc ("/proc"; a fake tree in tests) and reads its --config and
// --config-dir. When several run (a restart caught half-way), the oldest (lowest PID) wins.
func FindProcess(proc string) (Found, bool, error) {
	ents, err := os.ReadDir(proc)
	if err != nil {
		return Found{}, false, fmt.Errorf("list %s: %w", proc, err)
	}
	var pids []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	sort.Ints(pids)
	for _, pid := range pids {
		found, ok, err := readProcess(proc, pid)
		if err != nil || ok {
			return found, ok, err
		}
	}
	return Found{}, false, nil
}

// readProcess reads one process; ok is false when it is not a (live) kubelet.
func readProcess(proc string, pid int) (Found, bool, error) {
	dir := filepath.Join(proc, strconv.Itoa(pid))
	comm, err := nodefs.ReadKernel(filepath.Join(dir, "comm"), procKind)
	if err != nil {
		return Found{}, false, nil // gone, or not ours to read
	}
	name := strings.TrimSpace(string(comm))
	exe, _ := os.Readlink(filepath.Join(dir, "exe"))
	exe = strings.TrimSuffix(exe, " (deleted)")
	k3s := false
	switch {
	case name == "kubelet", path.Base(exe) == "kubelet":
	case name == "k3s" || name == "k3s-server" || name == "k3s-agent" || path.Base(exe) == "k3s":
		k3s = true // checked below: `k3s server` or `k3s agent`, which run kubelet in-process
	default:
		return Found{}, false, nil
	}
	data, err := nodefs.ReadKernel(filepath.Join(dir, "cmdline"), procKind)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return Found{}, false, nil // it exited between the two reads
		}
		return Found{}, false, fmt.Errorf("read kubelet's command line: %w", err)
	}
	args := ParseCmdline(data)
	if len(args) == 0 {
		return Found{}, false, nil // a zombie: its command line is gone
	}
	if k3s {
		return readK3s(dir, pid, args)
	}
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
	}
	if fl.HasResolvConf {
		found.ResolvConf, found.HasResolvConf = abs(fl.ResolvConf), true
		found.ResolvConfHow = fmt.Sprintf("--resolv-conf of the running kubelet, pid %d", pid)
		found.ResolvOrigin = Origin{Kind: OriginProcess}
	}
	return found, true, nil
}

// parentComm is the comm of the process's parent ("" when unknown).
func parentComm(proc, dir string) string {
	stat, err := nodefs.ReadKernel(filepath.Join(dir, "stat"), procKind)
	if err != nil {
		return ""
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses, so cut at the last ')'.
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 2 {
		return ""
	}
	comm, err := nodefs.ReadKernel(filepath.Join(proc, f[1], "comm"), procKind)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(comm))
}

// readK3s reads a k3s process: `k3s server` and `k3s agent` run kubelet inside themselves, so /proc
// has no kubelet. Its own flags (--resolv-conf, --kubelet-arg, --data-dir) and K3S_RESOLV_CONF in
// its environment are kept for Complete, which adds what its config files say.
func readK3s(dir string, pid int, args []string) (Found, bool, error) {
	sub := ""
	for _, a := range args[1:] {
		if !strings.HasPrefix(a, "-") {
			sub = a
			break
		}
	}
	if sub != "server" && sub != "agent" {
		return Found{}, false, nil // `k3s kubectl`, `k3s crictl`, ...: no kubelet in there
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
	return found, true, nil
}

// userHZ is the unit of /proc/PID/stat's starttime (USER_HZ, 100 on every Linux architecture).
const userHZ = 100

// StartTime is when process pid started: /proc/PID/stat's starttime (field 22, clock ticks since
// boot) after /proc/stat's btime. kubelet.manage compares it with when nodedns changed kubelet's
// config (docs/contract.md "kubelet.manage"). Good to the second.
func StartTime(proc string, pid int) (time.Time, error) {
	stat, err := nodefs.ReadKernel(filepath.Join(proc, strconv.Itoa(pid), "stat"), procKind)
	if err != nil {
		return time.Time{}, err
	}
	ticks, err := statStartTicks(stat)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s/%d/stat: %w", proc, pid, err)
	}
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
			return time.Unix(bt, 0).Add(time.Duration(ticks) * time.Second / userHZ), nil
		}
	}
	return time.Time{}, fmt.Errorf("%s/stat: no btime", proc)
}

// statStartTicks reads starttime from /proc/PID/stat: "pid (comm) state ..." with comm cut at the
// last ')', then field 22 counting from pid.
func statStartTicks(stat []byte) (uint64, error) {
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return 0, errors.New("no command name")
	}
	f := strings.Fields(string(stat[i+1:]))
	// f[0] is field 3 (state): starttime, field 22, is f[19].
	if len(f) < 20 {
		return 0, errors.New("too few fields")
	}
	return strconv.ParseUint(f[19], 10, 64)
}
