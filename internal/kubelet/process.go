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
	if strings.TrimSpace(string(comm)) != "kubelet" {
		exe, err := os.Readlink(filepath.Join(dir, "exe"))
		if err != nil || path.Base(strings.TrimSuffix(exe, " (deleted)")) != "kubelet" {
			return Found{}, false, nil
		}
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
	fl := FlagsFromArgs(args[1:])
	found := Found{How: fmt.Sprintf("--config of the running kubelet, pid %d", pid)}
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
	return found, true, nil
}
