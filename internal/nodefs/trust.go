package nodefs

import (
	"fmt"
	"io/fs"
	"os"
	"sync"
	"syscall"
	"time"
)

// Euid is the effective uid of this process, asked of the kernel once: nodedns never changes it,
// and every trust check of a pass compares owners with it.
var Euid = sync.OnceValue(os.Geteuid)

// UntrustedError is a file or directory nodedns refuses to rely on: the node path, what is wrong
// with it, and how to fix it (docs/contract.md, "Where things live").
type UntrustedError struct {
	// Path is the node path refused.
	Path string
	// Problem says what is wrong: "is a symlink", "is owned by uid 1000", "is writable by others".
	Problem string
	// UID and Mode are what the path has (UID -1 when unknown).
	UID  int
	Mode fs.FileMode
	// Fix is the command that makes it trusted again.
	Fix string
}

func (e *UntrustedError) Error() string {
	return fmt.Sprintf("refusing untrusted state %s: it %s (owner uid %d, mode %s); nodedns trusts only state owned by root (or the user running it) and writable by nobody else, since whoever can write it chooses what restore puts back. Check who changed it, then: %s",
		e.Path, e.Problem, e.UID, ModeString(e.Mode), e.Fix)
}

// ModeString shows a mode as ls does, with the octal permission bits: "drwxrwxrwx (0777)".
func ModeString(m fs.FileMode) string {
	return fmt.Sprintf("%s (%04o)", m.String(), UnixMode(m))
}

// Untrusted reports why fi (lstat of the node path p) is not trusted state, nil when it is. dir says
// whether a directory is expected (else a regular file); wantMode is the mode the fix sets.
func Untrusted(p string, fi fs.FileInfo, dir bool, wantMode fs.FileMode) error {
	uid, _ := Owner(fi)
	e := &UntrustedError{Path: p, UID: uid, Mode: fi.Mode()}
	euid := Euid()
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		e.Problem = "is a symlink (nodedns never follows a symlink inside its state directory)"
		e.Fix = fmt.Sprintf("rm %s", p)
	case dir && !fi.IsDir(), !dir && !fi.Mode().IsRegular():
		want := "a regular file"
		if dir {
			want = "a directory"
		}
		e.Problem = fmt.Sprintf("is not %s but a %s", want, FileType(fi.Mode()))
		e.Fix = fmt.Sprintf("rm %s", p)
	case uid > 0 && uid != euid:
		// Root's files are trusted by everyone: root could change anything anyway.
		e.Problem = fmt.Sprintf("is owned by uid %d, neither root nor uid %d", uid, euid)
	case fi.Mode()&0o002 != 0:
		e.Problem = "is writable by others"
	case fi.Mode()&0o020 != 0:
		e.Problem = "is writable by its group"
	default:
		return nil
	}
	if e.Fix == "" {
		e.Fix = fmt.Sprintf("chown %d:%d %s && chmod %04o %s", euid, os.Getegid(), p, UnixMode(wantMode), p)
	}
	return e
}

// ReadConfigFile reads the config file at the host path p once, from the descriptor its owner and
// mode were judged on (CheckConfigFile on fstat of the open file): judging a stat of the path and
// then opening the path again lets a symlink flipped in between hand nodedns another user's config.
// Bounded by Config; a FIFO, socket or device is refused without a blocking open.
func ReadConfigFile(p string) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := ReadOpen(osFile{f}, Config, func(fi fs.FileInfo) error { return CheckConfigFile(p, fi) })
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	return data, nil
}

// CheckConfigFile judges the config file nodedns is about to read (fi from fstat of the open file,
// name for the message): refused when anyone but its owner's group can write it, or when it is owned by a user
// other than root and the one running nodedns. The config decides what nodedns writes as root, so
// it must not be someone else's to edit.
func CheckConfigFile(name string, fi fs.FileInfo) error {
	uid, _ := Owner(fi)
	euid := Euid()
	switch {
	case fi.Mode()&0o002 != 0:
		return fmt.Errorf("refusing config %s: it is writable by others (mode %s, owner uid %d); fix: chmod o-w %s", name, ModeString(fi.Mode()), uid, name)
	case uid > 0 && uid != euid:
		return fmt.Errorf("refusing config %s: it is owned by uid %d, neither root nor the user running nodedns (uid %d; mode %s); fix: chown root %s", name, uid, euid, ModeString(fi.Mode()), name)
	}
	return nil
}

// Owner returns the uid and gid in fi, or -1, -1 when the FS does not report them.
func Owner(fi fs.FileInfo) (uid, gid int) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st != nil {
		return int(st.Uid), int(st.Gid)
	}
	return -1, -1
}

// specialBits pairs Go's setuid, setgid and sticky bits with chmod(2)'s, for both directions.
var specialBits = [...]struct {
	mode fs.FileMode
	unix uint32
}{{fs.ModeSetuid, syscall.S_ISUID}, {fs.ModeSetgid, syscall.S_ISGID}, {fs.ModeSticky, syscall.S_ISVTX}}

// UnixMode is m as chmod(2) takes it: permission bits plus setuid, setgid and sticky.
func UnixMode(m fs.FileMode) uint32 {
	u := uint32(m.Perm())
	for _, b := range specialBits {
		if m&b.mode != 0 {
			u |= b.unix
		}
	}
	return u
}

// FileModeOf is UnixMode the other way: chmod(2)'s permission, setuid, setgid and sticky bits of u
// as a fs.FileMode (other bits of u are dropped).
func FileModeOf(u uint32) fs.FileMode {
	m := fs.FileMode(u & 0o777)
	for _, b := range specialBits {
		if u&b.unix != 0 {
			m |= b.mode
		}
	}
	return m
}

// FileType names the type of a file that is not a regular one, for messages.
func FileType(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}

// LockedError is the state lock still held by another process after the wait.
type LockedError struct {
	// Path is the lock file (a node path once it leaves the Store).
	Path string
	// PID is the holder's process id as it wrote it into the lock file; 0 when unknown.
	PID int
	// Waited is how long this process waited.
	Waited time.Duration
}

func (e *LockedError) Error() string {
	holder := "another process"
	switch {
	case e.PID == os.Getpid():
		holder = fmt.Sprintf("this nodedns process (pid %d)", e.PID)
	case e.PID > 0:
		holder = fmt.Sprintf("nodedns process %d", e.PID)
	}
	return fmt.Sprintf("nodedns's state lock %s is held by %s: gave up after %s (another apply, restore, netplan pin or the daemon is changing the node; try again when it is done)", e.Path, holder, e.Waited)
}
