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
	"strconv"
	"strings"

	"github.com/nodedns/nodedns/internal/nodefs"
)

// verifyProcess returns the real uid of process pid in proc (-1 when unknown) and why it is not
// root's kubelet: "" when every rule holds, else the first rule it fails, or why it could not be
// verified (unverified: the kernel did not show enough of it, see cannotVerify).
func verifyProcess(proc string, pid int) (uid int, why string, unverified bool) {
	uid, why = verify(proc, pid)
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
		return fmt.Sprintf("%s%v (the kernel shows another process's executable and namespaces only to a reader with ptrace access to it: CAP_SYS_PTRACE)", cannotVerifyPrefix, err)
	}
	return cannotVerifyPrefix + err.Error()
}
