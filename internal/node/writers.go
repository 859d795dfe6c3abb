package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/internal/statefile"
)

// WritersStatePath is the node path of the small state file in which `nodedns run` (reconcile.Daemon)
// records the targets it stopped fighting over, for `nodedns check` (probes) to report. The daemon removes it
// when no target is backed off and when it exits.
const WritersStatePath = config.WritersFile

// Backoff is one target the daemon stopped rewriting because another writer keeps rewriting it.
type Backoff struct {
	// Path is the node path of the target (the file written, a symlink's final target included).
	Path string `json:"path"`
	// Since is when the daemon stopped fighting.
	Since time.Time `json:"since"`
	// Rewrites is how many times another writer replaced nodedns's content within Window.
	Rewrites int `json:"rewrites"`
	// Window is writers.window when the backoff started.
	Window Duration `json:"window"`
	// LastForeign is when another writer last touched the target; the daemon resumes one Window
	// after it.
	LastForeign time.Time `json:"lastForeign"`
	// Content is the SHA-256 of the other writer's latest content.
	Content string `json:"content"`
}

// WritersState is the content of WritersStatePath.
type WritersState struct {
	// PID is the daemon's process id: a state file whose daemon is gone is stale.
	PID      int       `json:"pid"`
	Backoffs []Backoff `json:"backoffs"`
}

// Duration is a time.Duration that JSON shows as "60s".
type Duration time.Duration

// MarshalJSON renders the duration as Go's duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON parses a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// ParseWritersState parses WritersStatePath's content; name is for the error.
func ParseWritersState(name string, data []byte) (WritersState, error) {
	var st WritersState
	if err := statefile.Decode(data, &st); err != nil {
		return WritersState{}, fmt.Errorf("parse %s: %w", name, err)
	}
	for i, b := range st.Backoffs {
		if b.Path == "" || b.Path[0] != '/' {
			return WritersState{}, fmt.Errorf("parse %s: backoff %d: path %q is not an absolute node path", name, i, b.Path)
		}
	}
	return st, nil
}

// MarshalWritersState renders the state file, indented, with a final newline.
func MarshalWritersState(st WritersState) ([]byte, error) {
	if st.Backoffs == nil {
		st.Backoffs = []Backoff{}
	}
	data, err := statefile.Encode(st)
	if err != nil {
		return nil, fmt.Errorf("marshal writers state: %w", err)
	}
	return data, nil
}

// ReadWritersState reads the daemon's writers state. A missing file is the zero state and no error.
func ReadWritersState(r nodefs.Reader) (WritersState, error) {
	// Only when nobody else could have written it: a planted backoff would stop nodedns from
	// putting a file back (nodefs.CheckState).
	if err := nodefs.CheckState(r, WritersStatePath); err != nil {
		return WritersState{}, err
	}
	data, err := r.ReadFile(WritersStatePath, statefile.Kind)
	if errors.Is(err, fs.ErrNotExist) {
		return WritersState{}, nil
	}
	if err != nil {
		return WritersState{}, err
	}
	return ParseWritersState(WritersStatePath, data)
}
