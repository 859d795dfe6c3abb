package edges

import (
	"bufio"
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// serveVarlink answers each connection on a fresh unix socket with reply (nil: never answers).
// It stands in for a daemon's misbehaviour, which the real networkd cannot be made to show; the
// real networkd 262 is asked in the privileged test of cmd/nodedns.
func serveVarlink(t *testing.T, reply func(req string) []byte) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "varlink")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, err := bufio.NewReader(c).ReadString(0)
				if err != nil {
					return
				}
				if out := reply(strings.TrimSuffix(req, "\x00")); out != nil {
					_, _ = c.Write(out)
				} else {
					time.Sleep(10 * time.Second)
				}
			}()
		}
	}()
	return sock
}

func TestVarlinkCall(t *testing.T) {
	var got string
	sock := serveVarlink(t, func(req string) []byte {
		got = req
		return []byte(`{"parameters":{"Interfaces":[]}}` + "\x00")
	})
	params, err := varlinkCall(context.Background(), sock, "io.systemd.Network.Describe", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got != `{"method":"io.systemd.Network.Describe","parameters":{}}` {
		t.Errorf("request %q", got)
	}
	if string(params) != `{"Interfaces":[]}` {
		t.Errorf("parameters %s", params)
	}
}

func TestVarlinkCallErrors(t *testing.T) {
	errSock := serveVarlink(t, func(string) []byte {
		return []byte(`{"error":"org.varlink.service.MethodNotFound","parameters":{"method":"x"}}` + "\x00")
	})
	_, err := varlinkCall(context.Background(), errSock, "x", nil)
	var ve *VarlinkError
	if !errors.As(err, &ve) || ve.Name != "org.varlink.service.MethodNotFound" {
		t.Errorf("error reply: %v", err)
	}

	silent := serveVarlink(t, func(string) []byte { return nil })
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := varlinkCall(ctx, silent, "x", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a daemon that never answers: err = %v, want the deadline", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("the call outlived its deadline")
	}

	huge := serveVarlink(t, func(string) []byte {
		return []byte(`{"parameters":{"x":"` + strings.Repeat("a", varlinkMaxReply) + `"}}`)
	})
	if _, err := varlinkCall(context.Background(), huge, "x", nil); !errors.Is(err, errVarlinkTooLarge) {
		t.Errorf("an endless reply: err = %v", err)
	}

	if _, err := varlinkCall(context.Background(), filepath.Join(t.TempDir(), "none"), "x", nil); err == nil {
		t.Error("no socket: no error")
	}
}
