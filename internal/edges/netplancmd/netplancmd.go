// Package netplancmd runs netplan's own tools (`netplan generate`, `netplan get`) on copies of a
// node's netplan files: netplan 0.106 is the judge of a file nodedns wants to keep, never package
// netplan's parser. It is the exec side of netplan, kept with the other live edges so that netplan/
// stays a pure parser.
package netplancmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/netplan"
)

// GenerateTimeout bounds one `netplan generate` or `netplan get` run (about 0.15 s each on the
// 2-core CI machine, 5 runs timed). Well inside the daemon's pass budget, which keeps a pass within
// the unit's WatchdogSec=30s (packaging/systemd/nodedns.service).
const GenerateTimeout = 10 * time.Second

// Runner runs netplan's own tools on copies of a node's netplan files: netplan 0.106 is the judge
// of a file nodedns wants to keep, never this package's parser. The node itself is never touched:
// every run works in a fresh temporary directory through --root-dir.
type Runner struct {
	// Bin is the netplan executable; "" means "netplan" from PATH.
	Bin string
	// TempDir is where the copies are made; "" means os.TempDir().
	TempDir string
}

// GenerateError is netplan refusing a tree: its own message, with the temporary directory taken out
// so paths read as node paths (/etc/netplan/90-nodedns.yaml:7:9: Error in network definition: ...).
type GenerateError struct {
	// Message is netplan's first error line ("file:line:col: Error ..." when it gives a position).
	Message string
	// Output is everything netplan printed, warnings included.
	Output string
	Err    error
}

// Error returns netplan's message.
func (e *GenerateError) Error() string {
	return "netplan generate rejected the configuration: " + e.Message
}

// Unwrap returns the process error.
func (e *GenerateError) Unwrap() error { return e.Err }

var errLineRE = regexp.MustCompile(`(?m)^.*(Error|error|ERROR).*$`)

// Generate copies the netplan files under root (the node's /lib, /etc and /run netplan
// directories) into a temporary root, applies changes (node path -> content; nil content removes
// the file), runs `netplan generate --root-dir` there and returns what netplan rendered: every file
// it wrote under the temporary root (networkd .network/.link files, NetworkManager keyfiles, udev
// rules), keyed by node path. A tree netplan refuses is a *GenerateError.
func (r Runner) Generate(ctx context.Context, root string, changes map[string][]byte) (map[string][]byte, error) {
	tmp, err := r.copyTree(root, changes)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if err := r.run(ctx, tmp, "generate", "--root-dir", tmp); err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	err = filepath.WalkDir(tmp, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(tmp, p)
		node := "/" + filepath.ToSlash(rel)
		if d.IsDir() || isNetplanDir(path.Dir(node)) {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[node] = []byte("symlink " + strings.TrimPrefix(t, tmp))
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[node] = data
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read netplan generate output: %w", err)
	}
	return out, nil
}

// Get returns `netplan get --root-dir` of the node's files with changes applied: netplan's own
// merged view, for a diff of what a change does.
func (r Runner) Get(ctx context.Context, root string, changes map[string][]byte) ([]byte, error) {
	tmp, err := r.copyTree(root, changes)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(ctx, GenerateTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.bin(), "get", "--root-dir", tmp, "all")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := dyingWithNodedns(cmd, cmd.Output)
	if err != nil {
		return nil, r.genError(tmp, stderr.Bytes(), err)
	}
	return out, nil
}

// Validate is Generate for one file: nil when netplan accepts the node's tree with nodePath set to
// data (nil data: removed).
func (r Runner) Validate(ctx context.Context, root, nodePath string, data []byte) error {
	_, err := r.Generate(ctx, root, map[string][]byte{nodePath: data})
	return err
}

func (r Runner) bin() string {
	if r.Bin != "" {
		return r.Bin
	}
	return "netplan"
}

func (r Runner) run(ctx context.Context, tmp string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, GenerateTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.bin(), args...)
	out, err := dyingWithNodedns(cmd, cmd.CombinedOutput)
	if err != nil {
		return r.genError(tmp, out, err)
	}
	return nil
}

// dyingWithNodedns runs cmd through run (its Output or CombinedOutput) with netplan dying with
// nodedns: a nodedns killed in the middle of a check must not leave netplan writing into a work
// directory the next nodedns is removing. The kernel sends the parent-death signal when the
// *thread* that forked the child ends, not the process (prctl(2), PR_SET_PDEATHSIG; Go's
// syscall.SysProcAttr.Pdeathsig, go.dev/issue/27505), and the Go runtime ends a thread whose
// goroutine returns while locked to it (internal/live/podnet's inNS does, when a thread cannot go
// back to its namespace): forked from such a thread, netplan would be killed in the middle of a
// check nodedns is still running. This goroutine holds its thread from the fork to the wait, so
// no other goroutine runs there and the thread outlives the child.
func dyingWithNodedns(cmd *exec.Cmd, run func() ([]byte, error)) ([]byte, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return run()
}

func (r Runner) genError(tmp string, out []byte, err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) || errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("run %s: %w (install netplan.io)", r.bin(), err)
	}
	text := strings.ReplaceAll(string(out), tmp, "")
	msg := ""
	if m := errLineRE.FindString(text); m != "" {
		msg = strings.TrimSpace(m)
	} else if t := strings.TrimSpace(text); t != "" {
		msg = strings.SplitN(t, "\n", 2)[0]
	} else {
		msg = err.Error()
	}
	return &GenerateError{Message: msg, Output: text, Err: err}
}

func isNetplanDir(d string) bool { return slices.Contains(netplan.Dirs, d) }

// copyTree copies the node's netplan YAML files (following symlinks inside root) into a new
// temporary directory, mode 0600 so netplan's permission warnings do not drown its errors.
func (r Runner) copyTree(root string, changes map[string][]byte) (string, error) {
	// The creator's PID in the name: a later sweep removes the directory of a process that died
	// in the middle (store.Store.SweepWork).
	tmp, err := os.MkdirTemp(r.TempDir, nodefs.WorkPattern("nodedns-netplan"))
	if err != nil {
		return "", fmt.Errorf("netplan copy: %w", err)
	}
	fail := func(err error) (string, error) {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("netplan copy: %w", err)
	}
	write := func(node string, data []byte) error {
		// Nothing reaches netplan that nodedns's own reader has not bounded: a file nested
		// 100,000 deep keeps `netplan generate` busy for most of a minute, past the unit's
		// watchdog. Other YAML errors are netplan's to judge (its message is the better one).
		if err := netplan.CheckBounds(node, data); err != nil {
			return err
		}
		full := filepath.Join(tmp, filepath.FromSlash(node))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		return os.WriteFile(full, data, netplan.FileMode)
	}
	// Every file of every directory, the shadowed ones too: netplan decides what it reads.
	rd := nodefs.NewReader(root)
	ds, errs := nodefs.DropIns(rd, netplan.Dirs, ".yaml")
	if len(errs) > 0 {
		return fail(errs[0])
	}
	for _, d := range ds {
		for _, node := range append([]string{d.Path}, d.Shadowed...) {
			if _, ok := changes[node]; ok {
				continue
			}
			data, err := netplan.ReadFile(rd, node)
			if err != nil {
				return fail(err)
			}
			if err := write(node, data); err != nil {
				return fail(err)
			}
		}
	}
	for node, data := range changes {
		if data == nil {
			continue
		}
		if !isNetplanDir(path.Dir(node)) || !strings.HasSuffix(node, ".yaml") {
			return fail(fmt.Errorf("%s is not a netplan file", node))
		}
		if err := write(node, data); err != nil {
			return fail(err)
		}
	}
	return tmp, nil
}
