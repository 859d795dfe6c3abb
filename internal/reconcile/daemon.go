package reconcile

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/networkmanager"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/internal/policy"
)

// EventSource is a live source of change notices the daemon reacts to, such as the systemd-resolved
// D-Bus client's PropertiesChanged and NameOwnerChanged signals. Each value says what changed (it is
// logged); the daemon reconciles on any. A source may close its channel when it stops for good.
// Sources are consulted only by Daemon.Run; the daemon never closes their channels.
type EventSource interface {
	Events() <-chan string
}

// Defaults of the daemon's timing.
const (
	// DefaultSettle is how long the daemon waits for a missing, empty or half-written file to settle
	// before it reconciles anyway. Complete content is acted on at once.
	DefaultSettle = 500 * time.Millisecond
	// DefaultQuiet is how long a file that was just missing or empty must stay unchanged once it
	// looks complete: a shell writing it line by line (dhclient-script's make_resolv_conf) produces a
	// parsable file after every line, and replacing it before the writer is done loses the rest of
	// its lines (they go to the unlinked inode).
	DefaultQuiet = 50 * time.Millisecond
	// maxSettleFactor caps the wait for a file that keeps changing: at most this many Settle periods
	// after the first incomplete event, the daemon reconciles whatever is there.
	maxSettleFactor = 4
	// passTimeout bounds one reconcile pass's live calls (D-Bus) and external commands (netplan
	// generate, NetworkManager --print-config, networkctl), so a hung bus or tool cannot stall the
	// loop (and, with it, the watchdog) or shutdown for long. The loop pings the watchdog every
	// WatchdogSec/2 (15 s) between passes, so a pass must end well within 15 s.
	passTimeout = 12 * time.Second
	// passLockWait bounds how long a pass waits for the state lock while a restore or an apply holds
	// it; then the pass is postponed by one settle period. Well under half of the unit's
	// WatchdogSec=30s, so the watchdog is still fed in time.
	passLockWait = 5 * time.Second
)

// Daemon is `nodedns run`: it applies at start, then watches the node's files (and the live event
// sources) and re-applies when something changes, backing off from targets another writer keeps
// rewriting. Use it once: Run may be called one time.
type Daemon struct {
	// Node is the node to keep right. The daemon owns it while Run runs (a reload replaces its
	// Config).
	Node *Node
	// Events are live sources of change notices (the resolved D-Bus client). Under --root they are
	// still consulted; a --root caller simply passes none.
	Events []EventSource
	// Resync is the periodic full pass without events; 0 means Node.Config.Daemon.ResyncInterval
	// (default 5 minutes).
	Resync time.Duration
	// Settle is how long an incomplete file may settle; 0 means DefaultSettle.
	Settle time.Duration
	// Quiet is how long a file seen incomplete must then stay unchanged; 0 means DefaultQuiet.
	Quiet time.Duration
	// Watchdog is how often to send WATCHDOG=1 (half of systemd's WatchdogSec); 0 means never.
	Watchdog time.Duration
	// Notify sends one sd_notify(3) state ("READY=1", "STATUS=...", "WATCHDOG=1"); nil means none.
	Notify func(state string) error
	// Reloads asks for a config reload (SIGHUP); Reload produces the new config. An error keeps the
	// old config and is reported in the log and STATUS.
	Reloads <-chan struct{}
	Reload  func() (config.Config, error)
	// AfterPass, when set, is told what each pass did and which targets it newly stopped fighting
	// over (for metrics).
	AfterPass func(o Outcome, newBackoffs []string)

	mu     sync.Mutex
	status Status

	// The loop's own state (one goroutine).
	ws       watchSet
	fights   *fights
	settleAt time.Time
	// young are the files seen missing, empty or half-written since the last pass: complete content
	// in them waits for Quiet first.
	young       map[string]bool
	settleFirst time.Time
	last        *node.Snapshot // what the last pass read: its watches are the next pass's
	wsOf        *node.Snapshot // the snapshot ws was built for
	rescan      bool           // a pass started watching new directories: read once more
	// obs keeps what each source read, so a pass re-reads only the sources whose paths changed:
	// changed are the node paths events named since the last pass read, full says an event could
	// not be attributed to paths (an overflow, a directory appearing or going, a live event, a
	// resync, a reload): the next pass reads everything.
	obs     node.Observer
	dirs    dirCache // where each declared directory is watched (syncWatches)
	changed map[string]bool
	full    bool
	// lastState is the last backoff set written to node.WritersStatePath ("" when none is written).
	lastState string
}

// Status is what the daemon last did: the STATUS= line and what tests assert.
type Status struct {
	// Passes counts reconcile passes; Ignored counts events for files that do not matter.
	Passes  int
	Ignored int
	// Own counts events caused by nodedns's own writes (skipped without a pass).
	Own int
	// Last is when the last pass ended; Trigger what started it.
	Last    time.Time
	Trigger string
	// Counts of the last pass.
	Written, Removed, Pending, Held, Blocked, Errors int
	// Backoffs are the targets nodedns stopped fighting over.
	Backoffs []node.Backoff
	// ConfigError is the last failed reload's error ("" after a good one).
	ConfigError string
	// Watched are the host directories watched.
	Watched []string
}

// Line renders the status as one line for STATUS= and logs.
func (s Status) Line() string {
	var b strings.Builder
	state := "ok"
	switch {
	case s.Errors > 0:
		state = "errors"
	case s.Blocked > 0:
		state = "blocked"
	case len(s.Backoffs) > 0:
		state = "backed off"
	}
	fmt.Fprintf(&b, "%s: pass %d (%s) wrote %d, removed %d, pending %d, blocked %d, errors %d", state, s.Passes, s.Trigger, s.Written, s.Removed, s.Pending, s.Blocked, s.Errors)
	if len(s.Backoffs) > 0 {
		var ps []string
		for _, bo := range s.Backoffs {
			ps = append(ps, fmt.Sprintf("%s (%d rewrites by another writer within %v)", bo.Path, bo.Rewrites, time.Duration(bo.Window)))
		}
		b.WriteString("; not fighting over " + strings.Join(ps, ", "))
	}
	if s.ConfigError != "" {
		b.WriteString("; config reload failed, old config kept: " + s.ConfigError)
	}
	return b.String()
}

// Status returns a copy of the daemon's status; safe from any goroutine.
func (d *Daemon) Status() Status {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.status
	s.Backoffs = append([]node.Backoff(nil), s.Backoffs...)
	s.Watched = append([]string(nil), s.Watched...)
	return s
}

func (d *Daemon) setStatus(f func(s *Status)) {
	d.mu.Lock()
	f(&d.status)
	d.mu.Unlock()
}

func (d *Daemon) notify(state string) {
	if d.Notify == nil {
		return
	}
	if err := d.Notify(state); err != nil {
		d.Node.log().Warn("sd_notify failed", "state", state, "err", err)
	}
}

func (d *Daemon) resync() time.Duration {
	switch {
	case d.Resync > 0:
		return d.Resync
	case d.Node.Config.Daemon.ResyncInterval > 0:
		return d.Node.Config.Daemon.ResyncInterval
	}
	return 5 * time.Minute
}

func (d *Daemon) settle() time.Duration {
	if d.Settle > 0 {
		return d.Settle
	}
	return DefaultSettle
}

func (d *Daemon) quiet() time.Duration {
	if d.Quiet > 0 {
		return min(d.Quiet, d.settle())
	}
	return min(DefaultQuiet, d.settle())
}

// wait pushes the settle deadline to now+after, never past maxSettleFactor settle periods from the
// first incomplete event of this episode.
func (d *Daemon) wait(now time.Time, after time.Duration) {
	if d.settleFirst.IsZero() {
		d.settleFirst = now
	}
	d.settleAt = now.Add(after)
	if limit := d.settleFirst.Add(maxSettleFactor * d.settle()); d.settleAt.After(limit) {
		d.settleAt = limit
	}
}

func (d *Daemon) writersConfig() (int, time.Duration) {
	w := d.Node.Config.Writers
	n, win := w.BackoffAfter, w.Window
	if n <= 0 {
		n = 10
	}
	if win <= 0 {
		win = time.Minute
	}
	return n, win
}

// Run applies, then watches until ctx is cancelled (SIGTERM). A pass in progress when ctx is
// cancelled is finished first, so no write is cut short (a pass still waiting for the state lock is
// dropped: it has changed nothing); Run then removes its writers state file and returns nil. It
// returns an error only when it cannot watch at all.
func (d *Daemon) Run(ctx context.Context) error {
	w, err := fsnotify.NewBufferedWatcher(1024)
	if err != nil {
		return fmt.Errorf("start watching: %w", inotifyLimit(err))
	}
	defer w.Close()
	// Under --root, the root directory is opened once for the daemon's confined opens, not around
	// each of them.
	if release, err := nodefs.HoldRoot(d.Node.Root); err == nil {
		defer release()
	}
	d.fights = newFights(d.writersConfig())
	d.ws = watchSet{}

	live, stopLive := d.forwardEvents(ctx)
	defer stopLive()

	d.passes(ctx, w, "start")
	st := d.Status()
	d.notify("STATUS=" + st.Line())
	d.Node.log().Info("daemon ready", "root", d.Node.Root, "watched_dirs", len(st.Watched), "resync", d.resync(), "settle", d.settle(), "watchdog", d.Watchdog)

	t := d.newTimers()
	defer t.stop()
	t.rearmSettle(d) // the start pass may have been postponed
	d.notify("READY=1")
	for {
		trigger, err := d.next(ctx, w, live, t)
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			d.shutdown()
			d.Node.log().Info("daemon stopped", "reason", context.Cause(ctx))
			return nil
		}
		if trigger == "" {
			t.rearmSettle(d)
			continue
		}
		// Coalesce a burst: everything already queued joins this pass.
		d.drain(w)
		t.settle.Stop()
		d.settleAt, d.settleFirst, d.young = time.Time{}, time.Time{}, nil
		d.passes(ctx, w, trigger)
		t.rearmSettle(d) // the pass may have been postponed
		t.resync.Reset(d.resync())
		t.armResume(d)
	}
}

// forwardEvents merges the live sources' notices into one channel: one forwarding goroutine per
// source. stop ends them all and waits for them.
func (d *Daemon) forwardEvents(ctx context.Context) (live <-chan string, stop func()) {
	out := make(chan string)
	fwdCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, src := range d.Events {
		ch := src.Events()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-fwdCtx.Done():
					return
				case what, ok := <-ch:
					if !ok {
						return
					}
					select {
					case out <- what:
					case <-fwdCtx.Done():
						return
					}
				}
			}
		}()
	}
	return out, func() {
		cancel()
		wg.Wait()
	}
}

// passes runs a pass, then at most three more while passes start watching new directories (a
// directory that appeared during a pass was not watched while it read it). Bounded: a node whose
// directories keep appearing is caught by events and the resync.
func (d *Daemon) passes(ctx context.Context, w *fsnotify.Watcher, trigger string) {
	d.pass(ctx, w, trigger)
	for i := 0; d.rescan && i < 3 && ctx.Err() == nil; i++ {
		d.rescan = false
		d.full = true
		d.pass(ctx, w, "new watch")
	}
	d.rescan = false
}

// timers are the daemon loop's clocks besides inotify and the live sources.
type timers struct {
	resync   *time.Timer
	settle   *time.Timer // a postponed or settling pass
	resume   *time.Timer // a backed-off target whose other writer may have left it
	watchdog <-chan time.Time
	stops    []func()
}

func (d *Daemon) newTimers() *timers {
	t := &timers{resync: time.NewTimer(d.resync()), settle: time.NewTimer(time.Hour), resume: time.NewTimer(time.Hour)}
	t.settle.Stop()
	t.resume.Stop()
	t.stops = []func(){func() { t.resync.Stop() }, func() { t.settle.Stop() }, func() { t.resume.Stop() }}
	if d.Watchdog > 0 {
		wd := time.NewTicker(d.Watchdog)
		t.watchdog = wd.C
		t.stops = append(t.stops, wd.Stop)
	}
	return t
}

func (t *timers) stop() {
	for _, f := range t.stops {
		f()
	}
}

// rearmSettle sets the settle timer to the daemon's settle deadline, when it has one.
func (t *timers) rearmSettle(d *Daemon) {
	if !d.settleAt.IsZero() {
		t.settle.Reset(time.Until(d.settleAt))
	}
}

// armResume sets the resume timer to the next backed-off target's end of window.
func (t *timers) armResume(d *Daemon) {
	if _, next := d.fights.resumable(time.Now()); !next.IsZero() {
		t.resume.Reset(time.Until(next))
	}
}

// next waits for what the loop reacts to and returns the trigger of a pass ("" for none: a watchdog
// ping, an event that needs no pass yet, ctx done); an error means inotify is gone.
func (d *Daemon) next(ctx context.Context, w *fsnotify.Watcher, live <-chan string, t *timers) (string, error) {
	log := d.Node.log()
	select {
	case <-ctx.Done():
		return "", nil
	case ev, ok := <-w.Events:
		if !ok {
			return "", errors.New("watch: inotify closed")
		}
		return d.event(ev), nil
	case err, ok := <-w.Errors:
		if !ok {
			return "", errors.New("watch: inotify closed")
		}
		// An overflow (IN_Q_OVERFLOW) loses events: only a full pass is safe.
		log.Warn("watch error; reconciling in full", "err", err)
		d.full = true
		return "watch error", nil
	case what, ok := <-live:
		if ok {
			log.Debug("live event", "what", what)
		}
		d.full = true // a D-Bus signal names no file
		return what, nil
	case <-t.settle.C:
		return "settled", nil
	case <-t.resync.C:
		d.full = true
		return "resync", nil
	case <-t.watchdog:
		d.notify("WATCHDOG=1")
		return "", nil
	case <-t.resume.C:
		resumed, _ := d.fights.resumable(time.Now())
		for _, b := range resumed {
			log.Info("other writer settled: fighting again", "path", b.Path, "backed_off_since", b.Since.Format(time.RFC3339), "quiet_for", time.Duration(b.Window))
		}
		t.armResume(d)
		if len(resumed) == 0 {
			return "", nil
		}
		return "writer settled", nil
	case <-d.Reloads:
		d.reload()
		d.full = true
		return "config reload", nil
	}
}

// drain handles every event already queued without blocking, so a burst costs one pass.
func (d *Daemon) drain(w *fsnotify.Watcher) {
	for {
		select {
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			d.event(ev)
		default:
			return
		}
	}
}

// event judges one inotify event. It returns a trigger when a pass must run now, "" when the event is
// irrelevant, nodedns's own write, or an incomplete file (then the settle deadline is set).
func (d *Daemon) event(ev fsnotify.Event) string {
	dir, name := filepath.Split(ev.Name)
	sp, ok := d.ws.classify(filepath.Clean(dir), name)
	if !ok {
		// No pass for it, but a source may still have read it (a file in a directory it lists):
		// the next pass reads that source again, as a full read would.
		d.changedHost(ev.Name)
		if ev.Op != fsnotify.Chmod {
			d.setStatus(func(s *Status) { s.Ignored++ })
		}
		return ""
	}
	np := path.Join(sp.Dir, name)
	if sp.dirOnly {
		d.full = true // a watched directory appeared, went or was replaced
		d.Node.log().Debug("watched directory appeared or went", "path", np, "op", ev.Op.String())
		return np
	}
	d.changedPath(np)
	if ev.Op == fsnotify.Chmod {
		return "" // content unchanged (the mode is read again by the next pass)
	}
	// Through the node's reader: never a blocking open (a FIFO swapped in must not freeze the loop),
	// bounded, and a symlink is followed inside the root.
	data, err := d.Node.store().ReadFile(np, watchedKind)
	if err == nil && d.fights.ours(np, data) {
		d.setStatus(func(s *Status) { s.Own++ })
		return ""
	}
	now := time.Now()
	if err == nil {
		d.fights.foreignActivity(np, data, now)
	}
	ok, why := complete(data, err, sp)
	if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
		// The file was deleted (dhclient-script deletes resolv.conf, then writes it line by line):
		// whatever is there by the time this event is read may be its writer's first line, so the
		// event, not the content read now, says it is young. (Seen under load: the REMOVE was read
		// after the first line was already written.) An atomic rename into place is a Create and
		// stays fast.
		if d.young == nil {
			d.young = map[string]bool{}
		}
		d.young[np] = true
		if ok {
			d.wait(now, d.quiet())
			d.Node.log().Debug("file changed", "path", np, "op", ev.Op.String(), "complete", ok, "state", why, "just_recreated", true)
			return ""
		}
	}
	young := d.young[np]
	d.Node.log().Debug("file changed", "path", np, "op", ev.Op.String(), "complete", ok, "state", why, "just_recreated", young && ok)
	switch {
	case ok && !young:
		return np
	case ok:
		// Complete now, but it was missing or empty a moment ago: its writer may still be writing.
		d.wait(now, d.quiet())
	default:
		if d.young == nil {
			d.young = map[string]bool{}
		}
		d.young[np] = true
		d.wait(now, d.settle())
	}
	return ""
}

// pass is one reconcile: observe, judge every planned change against other writers, apply the rest,
// re-aim the watches. Once it holds the state lock it is not interrupted by ctx: a pass in progress
// at SIGTERM finishes its writes.
func (d *Daemon) pass(ctx context.Context, w *fsnotify.Watcher, trigger string) {
	start := time.Now()
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), passTimeout)
	defer cancel()
	// Watch first, read second: a change made while the pass reads is then an event, never lost.
	d.syncWatches(w, d.last)
	release, ok := d.hold(ctx, trigger)
	if !ok {
		return
	}
	released := false
	defer func() {
		if !released {
			release()
		}
	}()
	s, p, changed := d.read(pctx)
	d.last = s
	d.acceptForeign(p.Changes, changed)
	held, started := d.judge(&p, time.Now())
	o := d.apply(pctx, p)
	d.changedByPass(p, o)
	// A directory that appeared during the pass (nodedns created /var/lib/nodedns, or someone made
	// /etc/systemd/resolved.conf.d) was not watched while the pass read it: read it again.
	if added := d.syncWatches(w, s); added > 0 {
		d.rescan = true
	}
	bo := d.fights.backoffs()
	d.saveWritersState(bo)
	release()
	released = true
	d.report(pctx, passReport{trigger: trigger, start: start, o: o, held: len(held), started: started, backoffs: bo})
}

// hold takes the state lock for a pass, from reading the node to the last write: a restore never
// runs in between. While a restore or an apply holds it past passLockWait, the pass is postponed by
// one settle period. A SIGTERM while it waits drops the pass, which has changed nothing yet, so the
// daemon stops at once (docs/contract.md, invariant 4, for the lock).
func (d *Daemon) hold(ctx context.Context, trigger string) (release func(), ok bool) {
	release, err := d.Node.HoldContext(ctx, passLockWait)
	switch {
	case err == nil:
		return release, true
	case ctx.Err() != nil:
		d.Node.log().Debug("pass dropped: the daemon is stopping", "trigger", trigger)
	default:
		d.Node.log().Warn("pass postponed: nodedns's state is locked", "trigger", trigger, "retry_in", d.settle(), "err", err)
		d.wait(time.Now(), d.settle())
	}
	return nil, false
}

// acceptForeign takes, for every target nodedns wrote and the plan no longer changes, the content
// someone else put there as the node's input from now on. changed are the node paths the pass read
// again (nil: all): a target none of them touched still holds what nodedns wrote or last accepted,
// and is not read again.
func (d *Daemon) acceptForeign(changes []policy.Change, changed []string) {
	planned := map[string]bool{}
	for _, c := range changes {
		planned[c.Target] = true
	}
	for tp, t := range d.fights.targets {
		if t.lastWritten != nil && !planned[tp] && touches(changed, tp) {
			if data, err := d.Node.store().ReadFile(tp, watchedKind); err == nil {
				d.fights.accepted(tp, data)
			}
		}
	}
}

// judge weighs every planned write against the other writers of its target: a target another
// writer keeps rewriting is held (left out of the plan) until that writer has left it alone for a
// window. started are the targets this pass stopped fighting over.
func (d *Daemon) judge(p *policy.Plan, now time.Time) (held []policy.Change, started []string) {
	log := d.Node.log()
	kept := p.Changes[:0]
	for _, c := range p.Changes {
		if c.Op != policy.OpWrite {
			kept = append(kept, c)
			continue
		}
		v := d.fights.change(c.Target, c.Before, now)
		switch {
		case v.started:
			started = append(started, c.Target)
			log.Warn("another writer keeps rewriting a target: nodedns stops fighting over it", "path", c.Target,
				"rewrites", v.count, "window", time.Duration(d.fights.window), "content_sha256", v.digest[:16],
				"resume", "after the other writer leaves it alone for one window")
		case v.logNew:
			log.Warn("another writer's content left as it is (backed off)", "path", c.Target, "content_sha256", v.digest[:16], "last_logged", v.lastLogged)
		case v.hold:
			// Backed off and already said so: one line per distinct content, not one per event.
		case v.count > 0:
			log.Info("another writer replaced nodedns's content: re-applying", "path", c.Target, "rewrites", v.count, "backoff_after", d.fights.backoffAfter)
		}
		if v.hold {
			held = append(held, c)
			continue
		}
		kept = append(kept, c)
	}
	p.Changes = kept
	return held, started
}

// apply carries out the plan and remembers what nodedns wrote, to tell its own writes from another
// writer's.
func (d *Daemon) apply(ctx context.Context, p policy.Plan) Outcome {
	o := d.Node.Apply(ctx, p)
	after := map[string][]byte{}
	for _, c := range p.Changes {
		after[c.Target] = c.After
	}
	for _, r := range o.Written {
		d.fights.wrote(r.Path, after[r.Path])
	}
	return o
}

// passReport is what a pass did, for report.
type passReport struct {
	trigger  string
	start    time.Time
	o        Outcome
	held     int
	started  []string
	backoffs []node.Backoff
}

// report tells what a pass did: the status (STATUS= and tests), one log line, the metrics hook.
func (d *Daemon) report(ctx context.Context, r passReport) {
	o := r.o
	d.setStatus(func(st *Status) {
		st.Passes++
		st.Last, st.Trigger = time.Now(), r.trigger
		st.Written, st.Removed, st.Pending, st.Held = len(o.Written), len(o.Removed), len(o.Pending), r.held
		st.Blocked, st.Errors = len(o.Blocked), len(o.Errors)
		st.Backoffs = r.backoffs
		st.Watched = d.ws.dirs()
	})
	status := d.Status()
	// A pass that changed nothing (another writer's event on a backed-off target, a resync of a
	// healthy node) is debug: at info, a backed-off fight logged a line per event.
	level := slog.LevelInfo
	if len(o.Written)+len(o.Removed)+len(o.Done)+len(o.Errors)+len(r.started) == 0 && r.trigger != "start" {
		level = slog.LevelDebug
	}
	d.Node.log().Log(ctx, level, "reconciled", "trigger", r.trigger, "pass", status.Passes, "wrote", len(o.Written), "removed", len(o.Removed),
		"pending", len(o.Pending), "held", r.held, "blocked", len(o.Blocked), "errors", len(o.Errors),
		"took", time.Since(r.start).Round(time.Microsecond))
	d.notify("STATUS=" + status.Line())
	if d.AfterPass != nil {
		d.AfterPass(o, r.started)
	}
}

// syncWatches re-aims the watches at what the readers declare for the snapshot s (node.Watches):
// /etc/resolv.conf may point elsewhere now, a watched directory may have appeared, kubelet's
// resolvConf may have moved. It returns how many directories it started watching.
func (d *Daemon) syncWatches(w *fsnotify.Watcher, s *node.Snapshot) int {
	forgot := 0
	if d.full {
		d.dirs = nil // a full pass looks every directory up again
	}
	forgot = d.dirs.forget(d.changed)
	// The watches are those of the snapshot and the directory lookups: the same snapshot with no
	// lookup dropped (a pass's first call, the events since the last pass changing only files)
	// gives the set already in place.
	if s != nil && s == d.wsOf && !d.full && forgot == 0 && d.ws != nil {
		return 0
	}
	d.wsOf = s
	ws := d.Node.buildWatchSet(d.Node.store(), node.Watches(d.Node.Config, s), &d.dirs)
	ws.sync(w, d.ws, func(msg string, args ...any) { d.Node.log().Warn(msg, args...) })
	added := 0
	for dir := range ws {
		if _, had := d.ws[dir]; !had {
			added++
		}
	}
	d.ws = ws
	return added
}

// reload re-reads the config (SIGHUP). An invalid config is reported and the old one kept.
func (d *Daemon) reload() {
	log := d.Node.log()
	if d.Reload == nil {
		log.Warn("config reload requested, but this daemon cannot reload")
		return
	}
	cfg, err := d.Reload()
	if err != nil {
		log.Error("config reload failed: keeping the old config", "err", err)
		d.setStatus(func(s *Status) { s.ConfigError = err.Error() })
		return
	}
	d.Node.SetConfig(cfg)
	d.fights.backoffAfter, d.fights.window = d.writersConfig()
	d.setStatus(func(s *Status) { s.ConfigError = "" })
	log.Info("config reloaded", "resync", d.resync(), "backoff_after", d.fights.backoffAfter, "window", d.fights.window)
}

// saveWritersState keeps node.WritersStatePath in step with the backoffs, for `nodedns check`. It is
// written only when the set of backed-off targets changes, never per event.
func (d *Daemon) saveWritersState(bo []node.Backoff) {
	key := ""
	for _, b := range bo {
		key += b.Path + "@" + b.Since.String() + "\n"
	}
	if key == d.lastState {
		return
	}
	d.changedPath(node.WritersStatePath)
	st := d.Node.store()
	if len(bo) == 0 {
		if err := st.Remove(node.WritersStatePath); err != nil && !errors.Is(err, fs.ErrNotExist) {
			d.Node.log().Warn("cannot remove writers state", "path", node.WritersStatePath, "err", err)
			return
		}
		d.lastState = ""
		return
	}
	data, err := node.MarshalWritersState(node.WritersState{PID: pid(), Backoffs: bo})
	if err == nil {
		_, err = st.Write(node.WritersStatePath, data, 0o644)
	}
	if err != nil {
		d.Node.log().Warn("cannot record backoff for nodedns check", "path", node.WritersStatePath, "err", err)
		return
	}
	d.lastState = key
}

// shutdown leaves no state behind that claims a running daemon.
func (d *Daemon) shutdown() {
	d.notify("STOPPING=1")
	if d.lastState != "" {
		d.saveWritersState(nil)
	}
}

// changedPath notes a node path an event named (or this daemon wrote), for the next pass's read.
func (d *Daemon) changedPath(p string) {
	if d.changed == nil {
		d.changed = map[string]bool{}
	}
	d.changed[path.Clean(p)] = true
}

// changedHost notes the host path of an event; outside the root it names nothing nodedns reads.
func (d *Daemon) changedHost(p string) {
	root := d.Node.Root
	if root == "" {
		root = "/"
	}
	rel, err := filepath.Rel(root, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return
	}
	d.changedPath("/" + filepath.ToSlash(rel))
}

// read observes the node for a pass: in full when the daemon cannot say what changed, else only
// the sources whose paths the events since the last pass named (docs/contract.md,
// "Command line": a pass costs what changed). Policy still judges the whole snapshot.
func (d *Daemon) read(ctx context.Context) (*node.Snapshot, policy.Plan, []string) {
	var changed []string
	if !d.full {
		changed = make([]string, 0, len(d.changed))
		for p := range d.changed {
			changed = append(changed, p)
		}
	}
	d.full, d.changed = false, nil
	s, p := d.Node.ObserveChanged(ctx, &d.obs, changed)
	d.Node.log().Debug("read", "full", changed == nil, "changed", len(changed), "sources", strings.Join(d.obs.Read, ","))
	return s, p, changed
}

// touches reports whether a change to one of changed (nil: unknown, so everything) may have
// touched the node path p: p itself or a directory above it.
func touches(changed []string, p string) bool {
	if changed == nil {
		return true
	}
	for _, c := range changed {
		if c == p || c == "/" || strings.HasPrefix(p, c+"/") {
			return true
		}
	}
	return false
}

// changedByPass notes what the pass itself changed, so the next pass reads it again without
// waiting for its own events: every target; the backups when it wrote NetworkManager's intern file
// (the one backup Observe reads: the intern file's entry changes only when that file is written);
// everything after a live action or an error (a restarted daemon rewrites files of its own).
func (d *Daemon) changedByPass(p policy.Plan, o Outcome) {
	if len(o.Done) > 0 || len(o.Errors) > 0 {
		d.full = true
	}
	if len(o.Written)+len(o.Removed) == 0 {
		return
	}
	for _, c := range p.Changes {
		d.changedPath(c.Target)
		d.changedPath(c.Path)
	}
	for _, r := range o.Written {
		d.changedPath(r.Path)
	}
	for _, r := range o.Removed {
		d.changedPath(r)
	}
	for _, c := range p.Changes {
		if c.Target == networkmanager.InternConfPath || c.Path == networkmanager.InternConfPath {
			d.changedPath(node.BackupDir)
		}
	}
}
