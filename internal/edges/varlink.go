package edges

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"
)

// varlinkTimeout bounds one varlink call when the caller's context has no sooner deadline: a
// daemon that accepts and never answers must not hold a pass.
const varlinkTimeout = 5 * time.Second

// varlinkMaxReply bounds one reply: networkd's Describe of a node with many links is tens of KiB.
const varlinkMaxReply = 4 << 20

// VarlinkError is a varlink error reply: the error's interface-qualified name
// (io.systemd.System, org.varlink.service.MethodNotFound, ...) and its parameters.
type VarlinkError struct {
	Name       string
	Parameters json.RawMessage
}

func (e *VarlinkError) Error() string { return "varlink error " + e.Name }

// varlinkCall makes one varlink call (https://varlink.org: a JSON object terminated by a NUL byte,
// answered by one) on the unix socket at sock and returns the reply's parameters. It is the whole
// client nodedns needs: one method, no "more" replies, no upgrade.
func varlinkCall(ctx context.Context, sock, method string, params any) (json.RawMessage, error) {
	if params == nil {
		params = struct{}{}
	}
	req, err := json.Marshal(struct {
		Method     string `json:"method"`
		Parameters any    `json:"parameters"`
	}{method, params})
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, varlinkTimeout)
		defer cancel()
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	if _, err := conn.Write(append(req, 0)); err != nil {
		return nil, fmt.Errorf("varlink %s on %s: %w", method, sock, err)
	}
	br := bufio.NewReader(&limitedConn{r: conn, n: varlinkMaxReply})
	msg, err := br.ReadBytes(0)
	if err != nil {
		var ne net.Error
		if ctx.Err() != nil {
			err = ctx.Err()
		} else if errors.As(err, &ne) && ne.Timeout() {
			err = context.DeadlineExceeded // the connection's deadline is the context's
		}
		return nil, fmt.Errorf("varlink %s on %s: read reply: %w", method, sock, err)
	}
	return decodeVarlinkReply(bytes.TrimSuffix(msg, []byte{0}))
}

// decodeVarlinkReply takes one reply message apart: its parameters, or its error.
func decodeVarlinkReply(msg []byte) (json.RawMessage, error) {
	var rep struct {
		Parameters json.RawMessage `json:"parameters"`
		Error      string          `json:"error"`
	}
	if err := json.Unmarshal(msg, &rep); err != nil {
		return nil, fmt.Errorf("varlink reply: %w", err)
	}
	if rep.Error != "" {
		return nil, &VarlinkError{Name: rep.Error, Parameters: rep.Parameters}
	}
	return rep.Parameters, nil
}

// limitedConn reads at most n bytes, then fails: a reply larger than any networkd sends is refused
// instead of read without end.
type limitedConn struct {
	r interface{ Read([]byte) (int, error) }
	n int
}

var errVarlinkTooLarge = errors.New("reply larger than 4 MiB")

func (l *limitedConn) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errVarlinkTooLarge
	}
	if len(p) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= n
	return n, err
}
