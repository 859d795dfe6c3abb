package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nodedns/nodedns/internal/nodefs"
)

// The state lock (docs/contract.md, invariant 4): one exclusive lock over nodedns's state, held by
// apply, each daemon pass, restore and `netplan pin` from reading the manifest to the last rename. A
// restore that ran between apply's backup and apply's rename used to clear the manifest and the copy
// and let apply write its edit anyway: the original was lost for good. The lock is flock(2) on
// StateDir/backup/.lock, released by the kernel when its holder dies, and the holder writes its PID
// into the file so a command that gives up waiting can say who holds it.

// DefaultLockWait is how long a command waits for the state lock before it gives up with a
// LockedError: far longer than any apply, restore or daemon pass (a pass's live calls are bounded
// by 30 s), short enough that a wedged holder gives a clear error instead of a hang.
const DefaultLockWait = 60 * time.Second

// LockName is the lock file's name inside StateDir/backup.
const LockName = ".lock"

// LockedError is the state lock still held by another process after the wait.
type LockedError = nodefs.LockedError

// Lock is the state lock held for a whole change. Every Store of this process on the same root and
// state directory works under it while it is held (their own short locks do not wait for it).
type Lock struct {
	pl      *pathLock
	release func() error
	since   time.Time
	once    sync.Once
	// Interrupted is the PID of a holder that died holding the lock before this one took it (0:
	// every earlier holder let go cleanly): only then can temp files of nodedns's targets be left.
	Interrupted int
	// stateKey names the state directory as the Stores of this process give it (heldLocks);
	// stateDir and backupDir are its host paths and its backup directory's, trusted when the lock
	// was taken. Nobody else can change a directory that passed (root's, writable by root only, no
	// symlink), so the operations made under the lock use them without walking the chain again:
	// the trust walk is once per lock, not once per write.
	stateKey            string
	stateDir, backupDir string
}

// Since is when the lock was taken. A temp file of nodedns older than this was left by a holder
// that died (every temp file is made under the lock and removed before it is released).
func (l *Lock) Since() time.Time { return l.since }

// Unlock releases the lock; later calls do nothing.
func (l *Lock) Unlock() error {
	var err error
	l.once.Do(func() {
		heldLocks.Delete(l.stateKey)
		l.pl.mu.Lock()
		l.pl.outer = nil
		l.pl.mu.Unlock()
		err = l.release()
		<-l.pl.gate
	})
	return err
}

// pathLock is this process's side of one lock file: the gate makes the holders inside the process
// take turns (two flock(2)s on separate opens of one file exclude each other even within a process,
// so without it a Store would wait for the Lock its own caller holds).
type pathLock struct {
	gate  chan struct{} // a token while someone in this process holds the flock
	inner sync.Mutex    // serialises manifest updates made under an outer Lock
	mu    sync.Mutex
	outer *Lock
}

// heldLocks maps a Store's state key (stateKey) to the Lock this process holds over it.
var heldLocks sync.Map

// stateKey is the unresolved host path of the state directory: the same for every Store of this
// process on the same root and state directory.
func (s *Store) stateKey() string { return s.host(s.stateDir()) }

// held returns the Lock this process holds over s's state, nil when none.
func (s *Store) held() *Lock {
	v, ok := heldLocks.Load(s.stateKey())
	if !ok {
		return nil
	}
	l := v.(*Lock)
	l.pl.mu.Lock()
	defer l.pl.mu.Unlock()
	if l.pl.outer != l {
		return nil
	}
	return l
}

var locks = struct {
	sync.Mutex
	m map[string]*pathLock
}{m: map[string]*pathLock{}}

func lockFor(hostPath string) *pathLock {
	locks.Lock()
	defer locks.Unlock()
	pl := locks.m[hostPath]
	if pl == nil {
		pl = &pathLock{gate: make(chan struct{}, 1)}
		locks.m[hostPath] = pl
	}
	return pl
}

// enter waits for the in-process gate until deadline, or until ctx is done.
func (pl *pathLock) enter(ctx context.Context, deadline time.Time) bool {
	select {
	case pl.gate <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case pl.gate <- struct{}{}:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

// lockTry is the longest one flock attempt of LockContext waits before it looks at its context
// again: how late a cancelled wait for the state lock ends at most.
const lockTry = 100 * time.Millisecond

// lockPath returns the host path of the lock file, after making sure the state and backup
// directories exist and are trusted.
func (s *Store) lockPath() (backupDir, lockFile string, err error) {
	dir, err := s.backupHost()
	if err != nil {
		return "", "", err
	}
	return dir, filepath.Join(dir, LockName), nil
}

// Lock takes the state lock for a whole change, waiting at most wait (0: DefaultLockWait). It creates
// the state and backup directories if needed and refuses untrusted ones. Release it with Unlock.
func (s *Store) Lock(wait time.Duration) (*Lock, error) {
	return s.LockContext(context.Background(), wait)
}

// LockContext is Lock that also stops waiting when ctx is done (the daemon's SIGTERM), within
// lockTry: then the error is ctx's cause.
func (s *Store) LockContext(ctx context.Context, wait time.Duration) (*Lock, error) {
	if wait <= 0 {
		wait = DefaultLockWait
	}
	start := time.Now()
	bdir, lp, err := s.lockPath()
	if err != nil {
		return nil, fmt.Errorf("lock nodedns's state: %w", err)
	}
	pl := lockFor(lp)
	deadline := start.Add(wait)
	if !pl.enter(ctx, deadline) {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("lock nodedns's state: %w", context.Cause(ctx))
		}
		return nil, fmt.Errorf("lock nodedns's state: %w", s.nodeErr(&LockedError{Path: lp, PID: os.Getpid(), Waited: wait}))
	}
	// Short tries, so that a cancelled ctx is seen between them.
	var release func() error
	var prev int
	for {
		release, prev, err = s.fsys().Lock(lp, max(min(time.Until(deadline), lockTry), time.Millisecond))
		var le *LockedError
		if err == nil || !errors.As(err, &le) || !time.Now().Before(deadline) {
			break
		}
		if ctx.Err() != nil {
			<-pl.gate
			return nil, fmt.Errorf("lock nodedns's state: %w", context.Cause(ctx))
		}
	}
	if err != nil {
		<-pl.gate
		var le *LockedError
		if errors.As(err, &le) {
			le.Waited = wait
		}
		return nil, fmt.Errorf("lock nodedns's state: %w", s.nodeErr(err))
	}
	l := &Lock{pl: pl, release: release, since: time.Now(), Interrupted: prev,
		stateKey: s.stateKey(), stateDir: filepath.Dir(bdir), backupDir: bdir}
	pl.mu.Lock()
	pl.outer = l
	pl.mu.Unlock()
	heldLocks.Store(l.stateKey, l)
	return l, nil
}

// lock takes the state lock for one Store operation and returns the backup directory's host path.
// Under an outer Lock of this process it only serialises with the other operations made under it.
func (s *Store) lock() (dir string, unlock func(), err error) {
	if l := s.held(); l != nil {
		l.pl.inner.Lock()
		return l.backupDir, l.pl.inner.Unlock, nil
	}
	dir, lp, err := s.lockPath()
	if err != nil {
		return "", nil, err
	}
	pl := lockFor(lp)
	pl.mu.Lock()
	outer := pl.outer
	pl.mu.Unlock()
	if outer != nil {
		pl.inner.Lock()
		return dir, pl.inner.Unlock, nil
	}
	deadline := time.Now().Add(DefaultLockWait)
	if !pl.enter(context.Background(), deadline) {
		return "", nil, s.nodeErr(&LockedError{Path: lp, PID: os.Getpid(), Waited: DefaultLockWait})
	}
	release, _, err := s.fsys().Lock(lp, max(time.Until(deadline), time.Millisecond))
	if err != nil {
		<-pl.gate
		return "", nil, s.nodeErr(err)
	}
	return dir, func() {
		release()
		<-pl.gate
	}, nil
}

// backupHost returns the host path of StateDir/backup, creating StateDir (0755: kubelet's
// resolv.conf lives there) and backup (0700: it holds copies of 0600 netplan files) when missing,
// and refusing either when it is not trusted.
func (s *Store) backupHost() (string, error) {
	node, state, err := s.trustedDirNode(s.stateDir(), 0o755)
	if err != nil {
		return "", err
	}
	return s.trustedSubdir(node, state, "backup", 0o700)
}

// TempDir returns the host path of StateDir/tmp, the directory nodedns's helpers work in (netplan
// generate on a copy of the node's files), created 0700 and trusted like the rest of the state. It
// lives under the root, so a run under --root leaves nothing in the system's temp directory.
func (s *Store) TempDir() (string, error) {
	tempDirs.Add(1)
	node, state, err := s.trustedDirNode(s.stateDir(), 0o755)
	if err != nil {
		return "", err
	}
	return s.trustedSubdir(node, state, TempDirName, 0o700)
}

// tempDirs counts the TempDir calls of this process (TempDirCalls).
var tempDirs atomic.Int64

// TempDirCalls counts the TempDir calls this process made: a holder of the state lock that saw it
// unchanged since taking the lock made no work directory to sweep up.
func TempDirCalls() int64 { return tempDirs.Load() }

// TempDirName is the name of nodedns's work directory inside StateDir.
const TempDirName = nodefs.TempDirName
