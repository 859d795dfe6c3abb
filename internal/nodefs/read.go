package nodefs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Kind is a kind of node file and the most bytes nodedns reads of one. No legitimate file of the
// kind is larger; a bigger one (a sparse 1 GiB file, /dev/zero swapped in) is refused before it is
// read, so it costs nothing but the error. The name goes into that error.
type Kind struct {
	Name string // "netplan file", "lease file", ...
	Max  int64
}

// Kinds every reader shares. Leaf packages define their own where their format says more (a lease,
// resolv.conf).
var (
	// Config is a configuration file a person or a tool writes (YAML, INI, unit files).
	Config = Kind{Name: "configuration file", Max: 1 << 20}
	// State is a file nodedns or another daemon keeps its state in (JSON, KEY=VALUE).
	State = Kind{Name: "state file", Max: 1 << 20}
	// Attribute is a kernel attribute (/sys/class/net/NAME/ifindex): sysfs serves at most one page
	// and reports every attribute as 4096 bytes long.
	Attribute = Kind{Name: "sysfs attribute", Max: 4096}
	// Proc is a file of /proc; a socket table on a busy node is the largest nodedns reads. Readers
	// that know their file is smaller bound it tighter with WithMax.
	Proc = Kind{Name: "/proc file", Max: 16 << 20}
)

// WithMax is the same kind of file bounded at max bytes.
func (k Kind) WithMax(max int64) Kind { return Kind{Name: k.Name, Max: max} }

// ErrNotRegular is returned for a FIFO, socket, device or directory where nodedns expects a file:
// opening a FIFO blocks until a writer comes, and a device can be endless.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is returned for a file over its kind's limit.
var ErrTooLarge = errors.New("file too large")

// Reader is the read side of a node's filesystem. Every read nodedns makes of a node path goes
// through one (a *Tree, or the write side's *store.Store): under the node's root, through the FS seam (so fault injection covers reads
// as well as writes), bounded by the file's Kind, and never a blocking open. Paths are node paths;
// symlinks are followed inside the root. The leaf readers (leases, netplan, systemd, node) take a
// Reader instead of a root directory.
type Reader interface {
	// ReadFile reads a regular file of kind k. A missing file gives an error matching
	// fs.ErrNotExist; a FIFO, socket, device or directory ErrNotRegular; a file over k.Max
	// ErrTooLarge. A symlink to /dev/null (systemd's mask) reads as empty. Errors name p.
	ReadFile(p string, k Kind) ([]byte, error)
	// ReadDir lists a directory, sorted by name.
	ReadDir(p string) ([]fs.DirEntry, error)
	// Stat describes p, following symlinks inside the root.
	Stat(p string) (fs.FileInfo, error)
	// Lstat describes p without following a final symlink.
	Lstat(p string) (fs.FileInfo, error)
	// Readlink returns the target a symlink at p stores, as written.
	Readlink(p string) (string, error)
	// ResolveLink follows the symlinks of p inside the root and returns the final node path.
	ResolveLink(p string) (string, error)
}

// InfoReader is a Reader that can also say what the file it read is (mode, owner, size) from the
// descriptor it read: the same inode as the bytes, without a second lookup of the path.
type InfoReader interface {
	Reader
	// ReadFileInfo is ReadFile that also returns fstat of the open file (nil for systemd's
	// /dev/null mask, read as empty without opening it).
	ReadFileInfo(p string, k Kind) ([]byte, fs.FileInfo, error)
}

// ReadFileInfo reads p through r with the file's info: from the read's own descriptor when r is an
// InfoReader, else from a Stat after the read.
func ReadFileInfo(r Reader, p string, k Kind) ([]byte, fs.FileInfo, error) {
	if ir, ok := r.(InfoReader); ok {
		return ir.ReadFileInfo(p, k)
	}
	data, err := r.ReadFile(p, k)
	if err != nil {
		return nil, nil, err
	}
	fi, err := r.Stat(p)
	if err != nil {
		return data, nil, nil
	}
	return data, fi, nil
}

// NewReader returns a Reader of the node whose / is root on this machine's filesystem.
func NewReader(root string) *Tree {
	if root == "" {
		root = "/"
	}
	return &Tree{Root: root, FS: OS()}
}

// ReadFile implements Reader.
func (t *Tree) ReadFile(p string, k Kind) ([]byte, error) {
	data, _, err := t.ReadFileInfo(p, k)
	return data, err
}

// ReadFileInfo implements InfoReader.
func (t *Tree) ReadFileInfo(p string, k Kind) ([]byte, fs.FileInfo, error) {
	p, err := NodePath(p)
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", p, err)
	}
	if t.confined() && k.Max > 0 {
		// The kernel resolves the path inside the root in the same call that opens it: no walk
		// first. Only a file that is not there needs one, to tell systemd's /dev/null mask (which
		// roots built for tests rarely have) and a link loop from a missing file.
		data, fi, err := t.readHost(t.Host(p), k, 0)
		if err == nil {
			return data, fi, nil
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ELOOP) && !errors.Is(err, syscall.ENOTDIR) {
			return nil, nil, fmt.Errorf("read %s: %w", p, err)
		}
	}
	final, err := t.Resolve(p, true)
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", p, err)
	}
	if final == os.DevNull {
		return nil, nil, nil // a mask: roots built for tests rarely have /dev/null
	}
	data, fi, err := t.readHost(t.Host(final), k, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", p, err)
	}
	return data, fi, nil
}

// ReadHost reads a host path through the FS seam, refusing what is not a regular file before it is
// opened and again on the open file (the path may be swapped between the two), and anything over
// k.Max without reading it. Under a root on the real filesystem the open is confined to the root
// (openRoot), so a component swapped for a symlink that leaves it is resolved inside it.
func (t *Tree) ReadHost(hp string, k Kind) ([]byte, error) {
	data, _, err := t.readHost(hp, k, 0)
	return data, err
}

// ReadHostNoFollow is ReadHost for a path that must be a regular file itself: a symlink there
// (swapped in since it was looked at) is refused (ELOOP), never followed.
func (t *Tree) ReadHostNoFollow(hp string, k Kind) ([]byte, error) {
	data, _, err := t.readHost(hp, k, syscall.O_NOFOLLOW)
	return data, err
}

// confined reports whether opens go through openRoot: a root other than the real one, on the real
// filesystem (an FS wrapped for fault injection keeps its own path-based opens).
func (t *Tree) confined() bool {
	_, real := t.fsys().(osFS)
	return real && t.Root != "" && t.Root != "/"
}

// OpenHost opens a host path under Root as os.OpenFile does, confined to Root (see ReadHost).
func (t *Tree) OpenHost(hp string, flag int, perm fs.FileMode) (File, error) {
	if t.confined() {
		f, err := openRootFile(t.Root, hp, flag, uint32(perm.Perm()))
		if err != nil {
			return nil, err
		}
		return f, nil
	}
	return t.fsys().OpenFile(hp, flag, perm)
}

func (t *Tree) readHost(hp string, k Kind, extra int) ([]byte, fs.FileInfo, error) {
	if k.Max <= 0 {
		return nil, nil, fmt.Errorf("invalid size limit %d for a %s", k.Max, k.Name)
	}
	if t.confined() {
		f, err := openRootFile(t.Root, hp, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY|extra, 0)
		if err != nil {
			return nil, nil, UnwrapPath(err)
		}
		defer f.Close()
		return readOpen(f, k, nil)
	}
	fsys := t.fsys()
	stat := fsys.Stat
	if extra&syscall.O_NOFOLLOW != 0 {
		stat = fsys.Lstat
	}
	fi, err := stat(hp)
	if err != nil {
		return nil, nil, UnwrapPath(err)
	}
	if err := regular(fi, k); err != nil {
		return nil, nil, err
	}
	// O_NONBLOCK: if a FIFO is swapped in after the Stat above, open(2) must not hang the daemon.
	f, err := fsys.OpenFile(hp, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY|extra, 0)
	if err != nil {
		return nil, nil, UnwrapPath(err)
	}
	defer f.Close()
	return readOpen(f, k, nil)
}

// ReadOpen reads an open file of kind k: checked again on the open file (the path may have been
// swapped since it was looked at) by check, when given, and as a regular file within k.Max; then
// never more than k.Max+1 bytes read, since the file may grow meanwhile.
func ReadOpen(f File, k Kind, check func(fs.FileInfo) error) ([]byte, error) {
	data, _, err := readOpen(f, k, check)
	return data, err
}

// readOpen is ReadOpen that also returns the open file's info.
func readOpen(f File, k Kind, check func(fs.FileInfo) error) ([]byte, fs.FileInfo, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, UnwrapPath(err)
	}
	if check != nil {
		if err := check(fi); err != nil {
			return nil, nil, err
		}
	}
	if err := regular(fi, k); err != nil {
		return nil, nil, err
	}
	var data []byte
	if size := fi.Size(); size > 0 && size <= k.Max {
		// One read of one byte more than fstat counted: getting exactly the size is the whole file
		// (no second read to see the end); fewer or more bytes (a file that changed meanwhile, a
		// kernel attribute reporting a page) read on to the end.
		data = make([]byte, size+1)
		n, err := f.Read(data)
		if err != nil && err != io.EOF {
			return nil, nil, UnwrapPath(err)
		}
		data = data[:n]
		if int64(n) == size {
			return data, fi, nil
		}
	}
	rest, err := io.ReadAll(io.LimitReader(f, k.Max+1-int64(len(data))))
	if err != nil {
		return nil, nil, UnwrapPath(err)
	}
	data = append(data, rest...)
	if int64(len(data)) > k.Max {
		return nil, nil, &tooLarge{size: -1, k: k} // it grew after the Stat
	}
	return data, fi, nil
}

func regular(fi fs.FileInfo, k Kind) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w but a %s", ErrNotRegular, FileType(fi.Mode()))
	}
	if fi.Size() > k.Max {
		return &tooLarge{size: fi.Size(), k: k}
	}
	return nil
}

// Bound is ErrTooLarge, with the size and the limit, for size bytes over k.Max; nil when they fit. It
// bounds bytes that did not come through ReadFile (a watched file's new content) as ReadFile would.
func (k Kind) Bound(size int64) error {
	if size > k.Max {
		return &tooLarge{size: size, k: k}
	}
	return nil
}

// tooLarge is ErrTooLarge with the size and the limit of the kind.
type tooLarge struct {
	size int64 // -1: more than the limit, size unknown
	k    Kind
}

func (e *tooLarge) Error() string {
	if e.size < 0 {
		return fmt.Sprintf("more than the %s limit of a %s", sizeString(e.k.Max), e.k.Name)
	}
	return fmt.Sprintf("%d bytes, over the %s limit of a %s", e.size, sizeString(e.k.Max), e.k.Name)
}

func (e *tooLarge) Is(target error) bool { return target == ErrTooLarge }

func sizeString(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d-byte", n)
}

// ReadDir implements Reader.
func (t *Tree) ReadDir(p string) ([]fs.DirEntry, error) {
	p, err := NodePath(p)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", p, err)
	}
	final, err := t.Resolve(p, true)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", p, err)
	}
	es, err := t.readDirHost(t.Host(final))
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", p, UnwrapPath(err))
	}
	return es, nil
}

// Stat implements Reader.
func (t *Tree) Stat(p string) (fs.FileInfo, error) {
	p, err := NodePath(p)
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", p, err)
	}
	if t.confined() {
		// As ReadFile: the kernel resolves the path inside the root in the one call that opens it.
		// A path that is missing is missing for the walk too (it resolves the same links the same
		// way); only a link loop takes the walk, for its message.
		fi, err := t.statHost(t.Host(p))
		if err == nil {
			return fi, nil
		}
		if !errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("stat %s: %w", p, UnwrapPath(err))
		}
	}
	final, err := t.Resolve(p, true)
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", p, err)
	}
	fi, err := t.statHost(t.Host(final))
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", p, UnwrapPath(err))
	}
	return fi, nil
}

// Lstat implements Reader.
func (t *Tree) Lstat(p string) (fs.FileInfo, error) {
	p, err := NodePath(p)
	if err != nil {
		return nil, fmt.Errorf("lstat %s: %w", p, err)
	}
	_, _, fi, err := t.LstatNode(p)
	if err != nil {
		return nil, fmt.Errorf("lstat %s: %w", p, UnwrapPath(err))
	}
	if fi == nil {
		return nil, fmt.Errorf("lstat %s: %w", p, fs.ErrNotExist)
	}
	return fi, nil
}

// Readlink implements Reader.
func (t *Tree) Readlink(p string) (string, error) {
	p, err := NodePath(p)
	if err != nil {
		return "", fmt.Errorf("readlink %s: %w", p, err)
	}
	_, hp, _, err := t.LstatNode(p)
	if err != nil {
		return "", fmt.Errorf("readlink %s: %w", p, UnwrapPath(err))
	}
	target, err := t.fsys().Readlink(hp)
	if err != nil {
		return "", fmt.Errorf("readlink %s: %w", p, UnwrapPath(err))
	}
	return target, nil
}

// UnwrapPath drops the host path from an *fs.PathError, so that messages name node paths only.
func UnwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// DropIn is one configuration file found by DropIns.
type DropIn struct {
	Name string // the file name, which orders it
	Path string // its node path
	// Shadowed are the node paths of files of the same name in lower-priority directories, which
	// this one hides, highest priority first.
	Shadowed []string
}

// DropIns lists the files whose names end in suffix in dirs (node paths, highest priority first) as
// systemd orders configuration (systemd.unit(5), resolved.conf(5); netplan(5) follows the same rule):
// a name found in an earlier directory shadows the same name in later ones (so an empty file or a
// /dev/null symlink masks it), and the survivors are sorted by file name alone, whatever their
// directory. Hidden files (a leading dot: editors' and nodedns's own temp files) are skipped. A
// directory named like a file is listed like one (resolved 252 and netplan both fail on it when they
// read it, measured). A missing directory is skipped; one that cannot be listed is reported in errs
// and skipped.
func DropIns(r Reader, dirs []string, suffix string) (out []DropIn, errs []error) {
	byName := map[string]int{}
	for _, dir := range dirs {
		es, err := r.ReadDir(dir)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
				errs = append(errs, err)
			}
			continue
		}
		for _, e := range es {
			name := e.Name()
			if !strings.HasSuffix(name, suffix) || strings.HasPrefix(name, ".") {
				continue
			}
			p := path.Join(dir, name)
			if i, seen := byName[name]; seen {
				out[i].Shadowed = append(out[i].Shadowed, p)
				continue
			}
			byName[name] = len(out)
			out = append(out, DropIn{Name: name, Path: p})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, errs
}

// SysClassNet is where the kernel names interfaces (NAME/ifindex). Under --root it is how a file
// named by interface index (a networkd lease, a link state file) maps to its interface.
const SysClassNet = "/sys/class/net"

// IfNames maps interface indexes to names from /sys/class/net/NAME/ifindex. Links come and go, and
// a file whose index has no name still counts, so an entry without an ifindex is skipped; one whose
// ifindex cannot be read (a FIFO, a huge file, garbage) is skipped and reported in errs. When two
// names claim one index the first in name order wins.
func IfNames(r Reader) (names map[int]string, errs []error) {
	names = map[int]string{}
	entries, err := r.ReadDir(SysClassNet)
	if err != nil {
		return names, nil
	}
	for _, e := range entries {
		// Real sysfs entries are relative symlinks into /sys/devices: followed inside the root.
		p := path.Join(SysClassNet, e.Name(), "ifindex")
		data, err := r.ReadFile(p, Attribute)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			continue // bonding_masters and other files that are not links
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		i, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || i <= 0 {
			errs = append(errs, fmt.Errorf("read %s: %q is not an interface index", p, strings.TrimSpace(string(data))))
			continue
		}
		if _, dup := names[i]; !dup {
			names[i] = e.Name()
		}
	}
	return names, errs
}

// ReadKernel reads a file of this machine's kernel interfaces (/proc, /sys) with the same guarantees
// as ReadFile (bounded by k, never a blocking open, FIFOs and devices refused), but lets the kernel
// resolve the path: /proc's magic links (/proc/PID/root, /proc/PID/cwd, /proc/self) lead into other
// processes' mount namespaces, which no walk inside a root can follow. For live checks only; a node
// path under --root goes through a Reader.
func ReadKernel(p string, k Kind) ([]byte, error) {
	data, err := (&Tree{Root: "/", FS: OS()}).ReadHost(p, k)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	return data, nil
}

// readDirHost lists a host directory, confined to Root like ReadHost.
func (t *Tree) readDirHost(hp string) ([]fs.DirEntry, error) {
	if !t.confined() {
		return t.fsys().ReadDir(hp)
	}
	f, err := openRoot(t.Root, hp, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	es, err := f.ReadDir(-1)
	sort.Slice(es, func(i, j int) bool { return es[i].Name() < es[j].Name() })
	return es, err
}

// statHost describes a host path, confined to Root like ReadHost.
func (t *Tree) statHost(hp string) (fs.FileInfo, error) {
	if !t.confined() {
		return t.fsys().Stat(hp)
	}
	f, err := openRootFile(t.Root, hp, unix.O_PATH, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Stat()
}
