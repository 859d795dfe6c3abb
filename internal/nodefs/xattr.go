package nodefs

import (
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// xattrMax is the largest value Linux keeps in one extended attribute (XATTR_SIZE_MAX,
// include/uapi/linux/limits.h): a value said to be longer is refused rather than allocated.
const xattrMax = 64 << 10

// fgetxattr reads the extended attribute name of the descriptor fd. The value may grow between
// asking for its size and reading it (ERANGE), so the buffer grows and the read is made again; it
// only grows, up to xattrMax, so the loop ends.
func fgetxattr(fd int, name string) ([]byte, error) {
	buf := make([]byte, 256)
	for {
		n, err := unix.Fgetxattr(fd, name, buf)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.ERANGE:
			size, err := unix.Fgetxattr(fd, name, nil)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return nil, err
			}
			if size = max(size, 2*len(buf)); size > xattrMax {
				if len(buf) >= xattrMax {
					return nil, unix.E2BIG
				}
				size = xattrMax
			}
			buf = make([]byte, size)
			continue
		case err != nil:
			return nil, err
		}
		return buf[:n:n], nil
	}
}

// fsetxattr sets the extended attribute name of the descriptor fd to value.
func fsetxattr(fd int, name string, value []byte) error {
	for {
		err := unix.Fsetxattr(fd, name, value, 0)
		if err != unix.EINTR {
			return err
		}
	}
}

func (f *rawFile) Getxattr(name string) ([]byte, error) {
	v, err := fgetxattr(f.fd, name)
	if err != nil {
		return nil, f.pathErr("getxattr "+name, err)
	}
	return v, nil
}

func (f *rawFile) Setxattr(name string, value []byte) error {
	if err := fsetxattr(f.fd, name, value); err != nil {
		return f.pathErr("setxattr "+name, err)
	}
	return nil
}

// osFile is a File on an *os.File (the FS of the real filesystem outside --root): its extended
// attributes through its descriptor (SyscallConn, which leaves the file as it is).
type osFile struct{ *os.File }

func (f osFile) Getxattr(name string) ([]byte, error) {
	var v []byte
	err := f.control(func(fd int) (err error) { v, err = fgetxattr(fd, name); return err })
	if err != nil {
		return nil, &fs.PathError{Op: "getxattr " + name, Path: f.Name(), Err: err}
	}
	return v, nil
}

func (f osFile) Setxattr(name string, value []byte) error {
	err := f.control(func(fd int) error { return fsetxattr(fd, name, value) })
	if err != nil {
		return &fs.PathError{Op: "setxattr " + name, Path: f.Name(), Err: err}
	}
	return nil
}

// control runs call with the file's descriptor.
func (f osFile) control(call func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var cerr error
	if err := rc.Control(func(fd uintptr) { cerr = call(int(fd)) }); err != nil {
		return err
	}
	return cerr
}
