package reconcile

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"sort"
	"time"

	"github.com/nodedns/nodedns/internal/node"
)

// fights tracks, per target, what nodedns last wrote and how often another writer replaced it
// (docs/contract.md "Other writers"): another writer's content is new input, not something to revert blindly;
// more than backoffAfter rewrites within window and nodedns stops fighting over that target until
// the other writer has left it alone for one whole window.
type fights struct {
	backoffAfter int
	window       time.Duration

	targets map[string]*fight
}

type fight struct {
	lastWritten []byte      // what nodedns last wrote; nil: nodedns does not own the current content
	rewrites    []time.Time // when another writer replaced lastWritten, within window
	backoff     *node.Backoff
	logged      map[string]bool // foreign contents already logged during this backoff
}

func newFights(backoffAfter int, window time.Duration) *fights {
	return &fights{backoffAfter: backoffAfter, window: window, targets: map[string]*fight{}}
}

func (f *fights) get(p string) *fight {
	t := f.targets[p]
	if t == nil {
		t = &fight{}
		f.targets[p] = t
	}
	return t
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// wrote records bytes nodedns just wrote to a target.
func (f *fights) wrote(p string, data []byte) {
	f.get(p).lastWritten = append([]byte(nil), data...)
}

// ours reports whether data is exactly what nodedns last wrote to p (an event it caused itself).
func (f *fights) ours(p string, data []byte) bool {
	t := f.targets[p]
	return t != nil && t.lastWritten != nil && bytes.Equal(t.lastWritten, data)
}

// foreignActivity records that another writer touched a backed-off target now (resets the quiet
// window after which nodedns resumes).
func (f *fights) foreignActivity(p string, data []byte, now time.Time) {
	t := f.targets[p]
	if t == nil || t.backoff == nil || (t.lastWritten != nil && bytes.Equal(t.lastWritten, data)) {
		return
	}
	t.backoff.LastForeign = now
	t.backoff.Content = digest(data)
}

// accepted records that a target holds another writer's content that nodedns does not want to change:
// the content is the node's new input, and nodedns no longer owns the file's bytes.
func (f *fights) accepted(p string, current []byte) {
	if t := f.targets[p]; t != nil && t.lastWritten != nil && !bytes.Equal(t.lastWritten, current) {
		t.lastWritten = nil
	}
}

// maxLoggedContents bounds the distinct foreign contents logged in one backoff episode.
const maxLoggedContents = 5

// verdict is what the fight tracker says about a planned change of a target.
type verdict struct {
	hold    bool // do not write: nodedns backed off this target
	started bool // the backoff started with this change
	logNew  bool // a distinct foreign content not logged before in this backoff
	// lastLogged: logNew for the last time in this backoff (maxLoggedContents reached).
	lastLogged bool
	digest     string // the foreign content's SHA-256
	count      int    // foreign rewrites within the window
}

// change judges a planned write of target p whose current content is current, at now. A change of
// content nodedns wrote itself and someone else replaced is one rewrite by another writer.
func (f *fights) change(p string, current []byte, now time.Time) verdict {
	t := f.get(p)
	v := verdict{digest: digest(current)}
	if t.backoff != nil {
		v.hold = true
		// One line per distinct content, up to maxLoggedContents per backoff episode: a writer
		// that never writes the same bytes twice (20,000 rewrites) must not flood the journal.
		if !t.logged[v.digest] && len(t.logged) < maxLoggedContents {
			t.logged[v.digest] = true
			v.logNew = true
			v.lastLogged = len(t.logged) == maxLoggedContents
		}
		v.count = len(t.rewrites)
		return v
	}
	if t.lastWritten == nil || bytes.Equal(t.lastWritten, current) {
		return v
	}
	t.rewrites = append(t.rewrites, now)
	cut := 0
	for cut < len(t.rewrites) && now.Sub(t.rewrites[cut]) > f.window {
		cut++
	}
	t.rewrites = t.rewrites[cut:]
	v.count = len(t.rewrites)
	if len(t.rewrites) > f.backoffAfter {
		t.backoff = &node.Backoff{Path: p, Since: now, Rewrites: len(t.rewrites), Window: node.Duration(f.window), LastForeign: now, Content: v.digest}
		t.logged = map[string]bool{v.digest: true}
		v.hold, v.started, v.logNew = true, true, true
	}
	return v
}

// resumable returns the backed-off targets whose other writer has been quiet for a whole window at
// now, ending their backoff, and the earliest time another one may become resumable (zero: none).
func (f *fights) resumable(now time.Time) (resumed []node.Backoff, next time.Time) {
	for _, t := range f.targets {
		if t.backoff == nil {
			continue
		}
		at := t.backoff.LastForeign.Add(f.window)
		if !now.Before(at) {
			resumed = append(resumed, *t.backoff)
			t.backoff, t.rewrites, t.logged = nil, nil, nil
			// The other writer's content stands until the next pass judges it afresh.
			t.lastWritten = nil
			continue
		}
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	sort.Slice(resumed, func(i, j int) bool { return resumed[i].Path < resumed[j].Path })
	return resumed, next
}

// backoffs lists the current backoffs, sorted by path.
func (f *fights) backoffs() []node.Backoff {
	var out []node.Backoff
	for _, t := range f.targets {
		if t.backoff != nil {
			out = append(out, *t.backoff)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

func pid() int { return os.Getpid() }
