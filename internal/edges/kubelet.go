package edges

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/systemd"
)

// kubeletProcess is step 1 of docs/contract.md "Kubelet's config": the running kubelet's own
// --config, from /proc/PID/cmdline. It beats whatever the unit files say (a unit edited without a
// restart, a kubelet started by hand or by another supervisor) and is used only on the live node.
type kubeletProcess struct {
	cfg  config.Config
	proc string // "/proc"; a fake tree in tests
}

func (kubeletProcess) Name() string { return "kubelet process" }

// procKind bounds a /proc file read here: kubelet's command line is well under a page, and the
// kernel caps what it serves of one far below this.
var procKind = nodefs.Proc.WithMax(1 << 20)

func (k kubeletProcess) Observe(_ context.Context, s *node.Snapshot) error {
	if k.cfg.Kubelet.Config != "" && k.cfg.Kubelet.Config != config.KubeletConfigAuto {
		return nil // a path in the config names the file directly
	}
	found, ok, err := findKubeletProcess(k.proc)
	if err != nil {
		return err
	}
	if ok {
		s.UseKubeletConfig(found)
	}
	return nil
}

// findKubeletProcess finds the process whose name is kubelet (its comm, else the base name of its
// executable: a comm is cut at 15 bytes and can be changed by the process) and reads its --config
// and --config-dir. When several run (a restart caught half-way), the oldest (lowest PID) wins.
func findKubeletProcess(proc string) (node.KubeletFound, bool, error) {
	ents, err := os.ReadDir(proc)
	if err != nil {
		return node.KubeletFound{}, false, fmt.Errorf("list %s: %w", proc, err)
	}
	var pids []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	sort.Ints(pids)
	for _, pid := range pids {
		found, ok, err := readKubeletProcess(proc, pid)
		if err != nil || ok {
			return found, ok, err
		}
	}
	return node.KubeletFound{}, false, nil
}

// readKubeletProcess reads one process; ok is false when it is not a (live) kubelet.
func readKubeletProcess(proc string, pid int) (node.KubeletFound, bool, error) {
	dir := filepath.Join(proc, strconv.Itoa(pid))
	comm, err := nodefs.ReadKernel(filepath.Join(dir, "comm"), procKind)
	if err != nil {
		return node.KubeletFound{}, false, nil // gone, or not ours to read
	}
	if strings.TrimSpace(string(comm)) != "kubelet" {
		exe, err := os.Readlink(filepath.Join(dir, "exe"))
		if err != nil || path.Base(strings.TrimSuffix(exe, " (deleted)")) != "kubelet" {
			return node.KubeletFound{}, false, nil
		}
	}
	data, err := nodefs.ReadKernel(filepath.Join(dir, "cmdline"), procKind)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return node.KubeletFound{}, false, nil // it exited between the two reads
		}
		return node.KubeletFound{}, false, fmt.Errorf("read kubelet's command line: %w", err)
	}
	args := systemd.ParseCmdline(data)
	if len(args) == 0 {
		return node.KubeletFound{}, false, nil // a zombie: its command line is gone
	}
	fl := systemd.KubeletFlagsFromArgs(args[1:])
	found := node.KubeletFound{How: fmt.Sprintf("--config of the running kubelet, pid %d", pid)}
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
