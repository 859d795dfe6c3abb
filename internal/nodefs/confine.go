package nodefs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Confined opens (docs/contract.md, "Directories other users can write"): under --root, resolving a node path and
// then opening the host path it maps to leaves a window in which the kernel follows whatever is
// there at open: a component flipped to a symlink that leaves the root made `plan` print an outside
// file's bytes. So every open under a root goes through openRoot, which lets the kernel resolve the
// whole path confined to the root in one call (openat2 with RESOLVE_IN_ROOT: absolute targets and
// ".." stay inside, /proc's magic links are refused), and where openat2 is missing (ENOSYS, Linux
// before 5.6, or a seccomp filter that hides it) walks the path one component at a time from an fd
// of the root, each component opened without following it and every symlink resolved here relative
// to the root fd, so nothing can move the walk outside between two steps.

// openat2State is 0 until the first confined open, then 1 when openat2 works here and 2 when it
// does not. (The tests take the walk with openat2 hidden by a seccomp filter:
// internal/testutil/noopenat2.)
var (
	openat2State atomic.Int32
	// lookupCalls counts the system calls confined opens make (the root's open and close, openat2
	// or every call of the walk): what BenchmarkConfinedRead reports per read.
	lookupCalls atomic.Int64
)

// openat2 opens rel under the directory fd dir with RESOLVE_IN_ROOT|RESOLVE_NO_MAGICLINKS. It
// returns unix.ENOSYS when the call is unavailable.
func openat2(dir int, rel string, flags int, mode uint32) (int, error) {
	if openat2State.Load() == 2 {
		return -1, unix.ENOSYS
	}
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Mode: uint64(mode), Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS}
	for try := 0; ; try++ {
		lookupCalls.Add(1)
		fd, err := unix.Openat2(dir, rel, &how)
		switch {
		case (errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN)) && try < 64:
			// EAGAIN: a rename elsewhere raced a ".." of the lookup and the kernel asks to retry.
			// Renames kept up on purpose make openRoot take the walk instead (the caller sees
			// EAGAIN as ENOSYS for this one open).
			continue
		case errors.Is(err, unix.EAGAIN):
			return -1, unix.ENOSYS
		case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM) && openat2State.Load() == 0:
			openat2State.Store(2)
			return -1, unix.ENOSYS
		}
		if err == nil {
			openat2State.CompareAndSwap(0, 1)
		}
		return fd, err
	}
}

// Confined reports whether t's opens are confined to the root (openRoot): a root other than the
// real one, on the real filesystem (an FS wrapped for fault injection keeps its own path-based
// opens).
func (t *Tree) Confined() bool { return t.confined() }

// Held roots: a process that works on one root for long (the daemon under --root) opens the root
// directory once and keeps its descriptor, instead of opening and closing it around every confined
// open. The descriptor is the directory the root named when it was held: renaming another directory
// to the root's name later does not move the daemon (nothing is resolved outside the root either way).
var heldRoots = struct {
	sync.RWMutex
	m map[string]*heldRoot
}{m: map[string]*heldRoot{}}

type heldRoot struct {
	fd   int
	refs int
}

// HoldRoot keeps the root directory open for the confined opens under it until release is called
// (holds nest). The real root ("" or "/") is not confined and needs nothing.
func HoldRoot(root string) (release func(), err error) {
	if root == "" || root == "/" {
		return func() {}, nil
	}
	key := filepath.Clean(root)
	heldRoots.Lock()
	defer heldRoots.Unlock()
	h := heldRoots.m[key]
	if h == nil {
		fd, err := unix.Open(key, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: key, Err: err}
		}
		h = &heldRoot{fd: fd}
		heldRoots.m[key] = h
	}
	h.refs++
	var once sync.Once
	return func() {
		once.Do(func() {
			heldRoots.Lock()
			defer heldRoots.Unlock()
			if h.refs--; h.refs == 0 {
				delete(heldRoots.m, key)
				unix.Close(h.fd)
			}
		})
	}, nil
}

// openRoot opens the host path hp, which lies under root, confined to root: flags as open(2) takes
// them (O_NOFOLLOW refuses a final symlink, O_CREAT creates inside the root). The result is an
// *os.File named hp.
func openRoot(root, hp string, flags int, mode uint32) (*os.File, error) {
	fd, err := openRootFd(root, hp, flags, mode)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), hp), nil
}

// openRootFile is openRoot as a File on the bare descriptor (rawFile), for regular files and the
// directories nodedns never lists: no fcntl to decide on polling.
func openRootFile(root, hp string, flags int, mode uint32) (*rawFile, error) {
	fd, err := openRootFd(root, hp, flags, mode)
	if err != nil {
		return nil, err
	}
	return &rawFile{fd: fd, name: hp}, nil
}

// OpenInRootFd opens the host path hp, which lies under root, confined to root (see openRoot), and
// returns the bare descriptor; the caller closes it. The store opens the directories it writes in
// through it under --root.
func OpenInRootFd(root, hp string, flags int) (int, error) {
	return openRootFd(root, hp, flags, 0)
}

// openRootFd is openRoot's descriptor.
func openRootFd(root, hp string, flags int, mode uint32) (int, error) {
	rel := strings.TrimPrefix(strings.TrimPrefix(hp, strings.TrimSuffix(root, "/")), "/")
	if rel == "" {
		rel = "."
	}
	heldRoots.RLock()
	defer heldRoots.RUnlock()
	var rfd int
	if h := heldRoots.m[filepath.Clean(root)]; h != nil {
		rfd = h.fd
	} else {
		lookupCalls.Add(2) // this open and its close
		var err error
		rfd, err = unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, &os.PathError{Op: "open", Path: root, Err: err}
		}
		defer unix.Close(rfd)
	}
	fd, err := openat2(rfd, rel, flags, mode)
	if errors.Is(err, unix.ENOSYS) {
		fd, err = walkRoot(rfd, rel, flags, mode)
	}
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: hp, Err: err}
	}
	return fd, nil
}

// walkRoot is openat2(RESOLVE_IN_ROOT) done by hand: the path is walked from the root fd one
// component at a time, every directory opened O_PATH|O_NOFOLLOW relative to the one before it, and
// every symlink read from its own fd and spliced into the rest of the path (an absolute target
// starts again at the root fd; ".." never climbs above it). The last component is opened with the
// caller's flags and O_NOFOLLOW; a symlink there is followed the same way unless the caller asked
// for O_NOFOLLOW. At most MaxSymlinks links are followed.
func walkRoot(rfd int, rel string, flags int, mode uint32) (int, error) {
	// stack holds the fds of the directories from the root down; stack[0] is the root (not ours to
	// close).
	stack := []int{rfd}
	defer func() {
		for _, fd := range stack[1:] {
			count(unix.Close)(fd)
		}
	}()
	top := func() int { return stack[len(stack)-1] }
	rest := strings.Split(rel, "/")
	hops := 0
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		last := !hasComponent(rest)
		switch c {
		case "", ".":
			if last {
				return count(unix.Openat)(top(), ".", flags|unix.O_CLOEXEC, mode)
			}
			continue
		case "..":
			if len(stack) > 1 {
				count(unix.Close)(top())
				stack = stack[:len(stack)-1]
			}
			if last {
				return count(unix.Openat)(top(), ".", flags|unix.O_CLOEXEC, mode)
			}
			continue
		}
		var fd int
		var err error
		if last {
			fd, err = count(unix.Openat)(top(), c, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
			if err == nil {
				return fd, nil
			}
			if flags&unix.O_NOFOLLOW != 0 || !errors.Is(err, unix.ELOOP) && !errors.Is(err, unix.ENOTDIR) {
				return -1, err
			}
			// ELOOP: a symlink (ENOTDIR with O_DIRECTORY: maybe one); look at it below.
		}
		fd, err = count(unix.Openat)(top(), c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, err
		}
		var st unix.Stat_t
		if err := count(unix.Fstat)(fd, &st); err != nil {
			count(unix.Close)(fd)
			return -1, err
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			if last {
				count(unix.Close)(fd)
				return count(unix.Openat)(top(), c, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
			}
			stack = append(stack, fd)
			continue
		case unix.S_IFLNK:
		default:
			count(unix.Close)(fd)
			if last {
				return count(unix.Openat)(top(), c, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
			}
			return -1, unix.ENOTDIR
		}
		hops++
		if hops > MaxSymlinks {
			count(unix.Close)(fd)
			return -1, unix.ELOOP
		}
		buf := make([]byte, unix.PathMax)
		n, err := count(unix.Readlinkat)(fd, "", buf)
		count(unix.Close)(fd)
		if err != nil {
			return -1, err
		}
		target := string(buf[:n])
		if target == "" {
			return -1, unix.ENOENT
		}
		if strings.HasPrefix(target, "/") {
			for _, d := range stack[1:] {
				count(unix.Close)(d)
			}
			stack = stack[:1]
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return count(unix.Openat)(top(), ".", flags|unix.O_CLOEXEC, mode)
}

// count returns f after counting one system call in lookupCalls (for the walk's calls).
func count[F any](f F) F {
	lookupCalls.Add(1)
	return f
}
