package nodefs

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// rawFile is a File on a bare descriptor, for the confined opens of regular files and directories:
// os.NewFile asks the kernel for the descriptor's flags (fcntl) to decide whether to poll it, and
// nodedns never polls a file it reads or writes. Every method is the one system call it names.
type rawFile struct {
	fd   int
	name string
}

func (f *rawFile) Name() string { return f.name }

func (f *rawFile) pathErr(op string, err error) error {
	return &fs.PathError{Op: op, Path: f.name, Err: err}
}

func (f *rawFile) Read(b []byte) (int, error) {
	for {
		n, err := unix.Read(f.fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, f.pathErr("read", err)
		}
		if n == 0 && len(b) > 0 {
			return 0, io.EOF
		}
		return n, nil
	}
}

func (f *rawFile) Write(b []byte) (int, error) {
	return f.writeAll(b, func(rest []byte, _ int) (int, error) { return unix.Write(f.fd, rest) })
}

func (f *rawFile) WriteAt(b []byte, off int64) (int, error) {
	return f.writeAll(b, func(rest []byte, done int) (int, error) { return unix.Pwrite(f.fd, rest, off+int64(done)) })
}

// writeAll writes all of b through one write call at a time (given what is left and how much is
// written), retried on EINTR and continued after a short write.
func (f *rawFile) writeAll(b []byte, write func(rest []byte, done int) (int, error)) (int, error) {
	done := 0
	for done < len(b) {
		n, err := write(b[done:], done)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return done, f.pathErr("write", err)
		}
		done += n
	}
	return done, nil
}

func (f *rawFile) Truncate(size int64) error {
	return ignoringEINTR(f, "truncate", func() error { return unix.Ftruncate(f.fd, size) })
}

func (f *rawFile) Stat() (fs.FileInfo, error) {
	var st syscall.Stat_t
	if err := ignoringEINTR(f, "stat", func() error { return syscall.Fstat(f.fd, &st) }); err != nil {
		return nil, err
	}
	return fileInfo(filepath.Base(f.name), &st), nil
}

func (f *rawFile) Chmod(mode fs.FileMode) error {
	return ignoringEINTR(f, "chmod", func() error { return unix.Fchmod(f.fd, UnixMode(mode)) })
}

func (f *rawFile) Chown(uid, gid int) error {
	return ignoringEINTR(f, "chown", func() error { return unix.Fchown(f.fd, uid, gid) })
}

func (f *rawFile) Sync() error {
	return ignoringEINTR(f, "sync", func() error { return unix.Fsync(f.fd) })
}

func (f *rawFile) Close() error {
	if f.fd < 0 {
		return f.pathErr("close", os.ErrClosed)
	}
	err := unix.Close(f.fd)
	f.fd = -1
	if err != nil {
		return f.pathErr("close", err)
	}
	return nil
}

func ignoringEINTR(f *rawFile, op string, call func() error) error {
	for {
		err := call()
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return f.pathErr(op, err)
		}
		return nil
	}
}

// statInfo is fs.FileInfo from fstat, as os.File.Stat makes it (Sys is the *syscall.Stat_t).
type statInfo struct {
	name string
	st   syscall.Stat_t
}

func fileInfo(name string, st *syscall.Stat_t) fs.FileInfo { return &statInfo{name: name, st: *st} }

func (i *statInfo) Name() string       { return i.name }
func (i *statInfo) Size() int64        { return i.st.Size }
func (i *statInfo) ModTime() time.Time { return time.Unix(i.st.Mtim.Unix()) }
func (i *statInfo) IsDir() bool        { return i.Mode().IsDir() }
func (i *statInfo) Sys() any           { return &i.st }

// Mode is the mode as os reports it for the same stat.
func (i *statInfo) Mode() fs.FileMode {
	m := fs.FileMode(i.st.Mode & 0o777)
	switch i.st.Mode & syscall.S_IFMT {
	case syscall.S_IFBLK:
		m |= fs.ModeDevice
	case syscall.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case syscall.S_IFDIR:
		m |= fs.ModeDir
	case syscall.S_IFIFO:
		m |= fs.ModeNamedPipe
	case syscall.S_IFLNK:
		m |= fs.ModeSymlink
	case syscall.S_IFSOCK:
		m |= fs.ModeSocket
	}
	if i.st.Mode&syscall.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if i.st.Mode&syscall.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if i.st.Mode&syscall.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}
