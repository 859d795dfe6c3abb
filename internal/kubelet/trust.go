package kubelet

// trust.go: a process is who the kernel says it is (docs/contract.md "Kubelet's config"). nodedns
// runs as root and takes kubelet's files from the running kubelet's command line, and the time
// kubelet.manage's restart is settled from its start time; any user can start a process named
// kubelet. So a process counts only when the kernel says it is root's kubelet: its uids and gids all
// 0, in PID 1's PID and mount namespaces (not a container's), started from an executable that is
// root's and writable by nobody else, in directories that are root's and writable by nobody else
// (as the process's own root shows them). The paths such a process names are read only when they
// are trusted too (Load: nodefs.CheckTrusted).

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/nodedns/nodedns/internal/nodefs"
)

// verifyProcess returns the real uid of process pid in proc (-1 when unknown) and why it is not
// root's kubelet: "" when every rule holds, else the first rule it fails, or why it could not be
// verified (unverified: the kernel did not show enough of it, see cannotVerify). Where the kernel
// hides the process's executable and namespaces (no ptrace access to it), what it shows anyone is
// asked instead (verifyUntraced): its status's NSpid and its cgroup, with what systemd says of the
// units that start kubelet.
func verifyProcess(proc string, pid int, units AskUnits) (uid int, why string, unverified bool) {
	uid, why = verify(proc, pid)
	if strings.HasPrefix(why, cannotVerifyPrefix) && uid == 0 {
		// The uids and gids are root's (verify checks them first); the rest the kernel hid.
		if w, ok := verifyUntraced(proc, pid, units); ok {
			why = w
		} else {
			why += "; " + w
		}
	}
	return uid, why, strings.HasPrefix(why, cannotVerifyPrefix)
}

func verify(proc string, pid int) (uid int, why string) {
	dir := filepath.Join(proc, strconv.Itoa(pid))
	status, err := nodefs.ReadKernel(filepath.Join(dir, "status"), procKind)
	if err != nil {
		return -1, cannotVerify(err)
	}
	uids, gids := statusIDs(status, "Uid:"), statusIDs(status, "Gid:")
	if len(uids) != 4 || len(gids) != 4 {
		return -1, fmt.Sprintf("%s%s/%d/status has no Uid: and Gid: lines of four ids", cannotVerifyPrefix, proc, pid)
	}
	uid = uids[0]
	// Real, effective, saved and filesystem ids: a set-user-ID program a user starts has a
	// euid of 0 and that user's real uid.
	if w := notRoot("uid", uids); w != "" {
		return uid, w
	}
	if w := notRoot("gid", gids); w != "" {
		return uid, w
	}
	for _, ns := range []struct{ link, name string }{{"pid", "PID"}, {"mnt", "mount"}} {
		its, err := os.Readlink(filepath.Join(dir, "ns", ns.link))
		if err != nil {
			return uid, cannotVerify(err)
		}
		init, err := os.Readlink(filepath.Join(proc, "1", "ns", ns.link))
		if err != nil {
			return uid, cannotVerify(err)
		}
		if its != init {
			return uid, fmt.Sprintf("in another %s namespace than PID 1 (%s, PID 1's is %s): a container's", ns.name, its, init)
		}
	}
	exe, err := os.Readlink(filepath.Join(dir, "exe"))
	if err != nil {
		return uid, cannotVerify(err)
	}
	exe = strings.TrimSuffix(exe, " (deleted)")
	// The executable itself, as the process runs it (the inode, even when replaced or deleted
	// since), then its directories as the process's root shows them.
	fi, err := os.Stat(filepath.Join(dir, "exe"))
	if err != nil {
		return uid, cannotVerify(err)
	}
	if w := notRootOnly(fi); w != "" {
		return uid, fmt.Sprintf("its executable %s %s", exe, w)
	}
	if !path.IsAbs(exe) {
		return uid, fmt.Sprintf("%sits executable is %q", cannotVerifyPrefix, exe)
	}
	root := filepath.Join(dir, "root")
	for d := path.Dir(exe); ; d = path.Dir(d) {
		var fi fs.FileInfo
		if d == "/" {
			fi, err = os.Stat(root) // the process's root directory, through the link
		} else {
			fi, err = os.Lstat(root + d)
		}
		if err != nil {
			return uid, cannotVerify(err)
		}
		if !fi.IsDir() {
			return uid, fmt.Sprintf("its executable's directory %s is no longer a directory but a %s", d, nodefs.FileType(fi.Mode()))
		}
		if w := notRootOnly(fi); w != "" {
			return uid, fmt.Sprintf("its executable's directory %s %s", d, w)
		}
		if d == "/" {
			return uid, ""
		}
	}
}

// notRootOnly says why fi is not root's and writable by root only ("" when it is).
func notRootOnly(fi fs.FileInfo) string {
	uid, _ := nodefs.Owner(fi)
	m := fi.Mode()
	if uid == 0 && m&0o022 == 0 {
		return ""
	}
	why := "is writable by its group"
	switch {
	case uid != 0:
		why = fmt.Sprintf("is owned by uid %d", uid)
	case m&0o002 != 0:
		why = "is writable by others"
	}
	return fmt.Sprintf("%s (owner uid %d, mode %s)", why, uid, nodefs.ModeString(m))
}

// notRoot says why ids (a status line's real, effective, saved and filesystem ids) are not all 0.
func notRoot(kind string, ids []int) string {
	for _, id := range ids {
		if id == 0 {
			continue
		}
		if ids[0] == ids[1] && ids[1] == ids[2] && ids[2] == ids[3] {
			if kind == "uid" {
				return "not root's"
			}
			return fmt.Sprintf("not root's: its %s is %d", kind, ids[0])
		}
		return fmt.Sprintf("not root's: its real, effective, saved and filesystem %ss are %d %d %d %d", kind, ids[0], ids[1], ids[2], ids[3])
	}
	return ""
}

// statusIDs reads the four ids of a /proc/PID/status line ("Uid:\t0\t0\t0\t0"); nil when the line is
// missing or malformed.
func statusIDs(status []byte, key string) []int {
	for _, l := range strings.Split(string(status), "\n") {
		rest, ok := strings.CutPrefix(l, key)
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 4 {
			return nil
		}
		ids := make([]int, 4)
		for i, s := range f {
			n, err := strconv.ParseUint(s, 10, 32)
			if err != nil {
				return nil
			}
			ids[i] = int(n)
		}
		return ids
	}
	return nil
}

// cannotVerifyPrefix starts the reason of a process that could not be verified.
const cannotVerifyPrefix = "cannot be verified: "

// cannotVerify is a rule that could not be checked: the process is not taken either.
func cannotVerify(err error) string {
	if errors.Is(err, fs.ErrPermission) {
		// proc(5): reading another process's exe and ns/ takes ptrace read access to it
		// (PTRACE_MODE_READ_FSCREDS): CAP_SYS_PTRACE, or its capabilities among nodedns's own.
		// verifyUntraced tries what the kernel shows anyone.
		return fmt.Sprintf("%s%v (the kernel shows another process's executable and namespaces only to a reader with ptrace access to it)", cannotVerifyPrefix, err)
	}
	return cannotVerifyPrefix + err.Error()
}

// verifyUntraced proves a process of root's (verify checked its uids and gids) is root's kubelet
// from what the kernel shows any reader, without ptrace access to it (docs/contract.md "Kubelet's
// config"). ok is true when it decides: why "" (proven) or the rule it fails; else why says what
// could not be shown, and the process stays unverified.
//   - Its PID namespace: the NSpid line of /proc/PID/status lists its PID in every PID namespace
//     from the one of this /proc (the reader's) down to its own (fs/proc/array.c task_state): one
//     entry is this /proc's, PID 1's; more is a container's.
//   - Who started it: it is a unit's main process (systemd's MainPID), or it is in the control
//     group of a unit that starts kubelet (systemd's ControlGroup; without an answer from systemd,
//     system.slice/UNIT, where systemd puts a service), whose directory and cgroup.procs are root's
//     and writable by nobody else. Moving a process into a cgroup takes write access to that
//     cgroup.procs (cgroup v2's migration rule, and cgroup v1's file mode alike), so no other user
//     can put one there; a cgroup delegated to a user (user@UID.service and below) is that user's
//     and fails the owner rule, whatever its name. Paths are as /proc/PID/cgroup shows them, below
//     the reader's cgroup namespace root: within it, a path names one cgroup.
func verifyUntraced(proc string, pid int, ask AskUnits) (why string, ok bool) {
	dir := filepath.Join(proc, strconv.Itoa(pid))
	status, err := nodefs.ReadKernel(filepath.Join(dir, "status"), procKind)
	if err != nil {
		return "nor from its status: " + err.Error(), false
	}
	nspid := statusFields(status, "NSpid:")
	switch {
	case len(nspid) == 0:
		return "nor from its status: no NSpid line", false
	case len(nspid) > 1:
		return fmt.Sprintf("in another PID namespace than PID 1 (its PIDs %s, from PID 1's namespace down): a container's", strings.Join(nspid, " ")), true
	}
	var units map[string]UnitProcess
	if ask != nil {
		units = ask()
	}
	if _, ok := mainPIDs(units)[pid]; ok {
		return "", true // systemd's word: it started this process as the unit's main one
	}
	data, err := nodefs.ReadKernel(filepath.Join(dir, "cgroup"), procKind)
	if err != nil {
		return "nor from its cgroup: " + err.Error(), false
	}
	cg, v2 := systemdCgroup(data)
	if cg == "" {
		return "nor from its cgroup: no cgroup v2 or name=systemd path in it", false
	}
	var want []string
	for _, u := range Units {
		if up, known := units[u]; known && up.ControlGroup != "" {
			want = append(want, up.ControlGroup)
		} else if units == nil {
			want = append(want, "/system.slice/"+u)
		}
	}
	if !slices.Contains(want, cg) {
		return fmt.Sprintf("nor from its cgroup: %s is no unit's that starts kubelet", cg), false
	}
	mount := cgroupMount(proc, v2)
	if mount == "" {
		return fmt.Sprintf("nor from its cgroup %s: the cgroup file system is not mounted here", cg), false
	}
	if err := nodefs.CheckTrusted(nodefs.NewReader(mount), path.Join(cg, "cgroup.procs")); err != nil {
		return fmt.Sprintf("its cgroup %s is not root's alone: %v", cg, err), true
	}
	return "", true
}

// statusFields are the fields of a /proc/PID/status line, nil when it is missing.
func statusFields(status []byte, key string) []string {
	for _, l := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(l, key); ok {
			return strings.Fields(rest)
		}
	}
	return nil
}

// systemdCgroup is the path systemd tracks a process by, from /proc/PID/cgroup: the cgroup v2 line
// (0::PATH; v2 true), else the cgroup v1 name=systemd hierarchy's (legacy and hybrid nodes).
func systemdCgroup(data []byte) (cg string, v2 bool) {
	var v1 string
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) != 3 || !strings.HasPrefix(f[2], "/") {
			continue
		}
		switch {
		case f[0] == "0" && f[1] == "":
			return path.Clean(f[2]), true
		case slices.Contains(strings.Split(f[1], ","), "name=systemd"):
			v1 = path.Clean(f[2])
		}
	}
	return v1, false
}

// cgroupMount is where the reader's mount namespace mounts the cgroup v2 hierarchy (v2), else the
// cgroup v1 name=systemd one, from proc/self/mountinfo; "" when none is.
func cgroupMount(proc string, v2 bool) string {
	data, err := nodefs.ReadKernel(filepath.Join(proc, "self", "mountinfo"), procKind)
	if err != nil {
		return ""
	}
	return cgroupMountIn(data, v2)
}

// cgroupMountIn is cgroupMount's reading of a mountinfo file (proc(5): fields, " - ", the file
// system type, its source, its super options); "" when it names no such mount.
func cgroupMountIn(data []byte, v2 bool) string {
	for _, l := range strings.Split(string(data), "\n") {
		pre, post, ok := strings.Cut(l, " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		switch {
		case v2 && g[0] == "cgroup2":
			return f[4]
		case !v2 && g[0] == "cgroup" && slices.Contains(strings.Split(g[2], ","), "name=systemd"):
			return f[4]
		}
	}
	return ""
}
