package probes

import (
	"bufio"
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Forward is one `forward FROM TO...` line of a Corefile and the zones of its server block.
type Forward struct {
	Zones []string
	From  string
	To    []string
	Line  int
}

// ParseCorefile returns the forward lines of a Corefile (CoreDNS's Caddyfile syntax: server blocks
// `ZONE[:PORT]... { plugin args... }`, `#` comments, nested blocks for plugin options). Snippets,
// imports and environment placeholders are not expanded: a forward using them is returned as written.
func ParseCorefile(data []byte) ([]Forward, error) {
	var out []Forward
	var zones []string
	depth := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		opens := strings.Count(line, "{")
		closes := strings.Count(line, "}")
		words := slices.DeleteFunc(slices.Clone(f), func(s string) bool { return s == "{" || s == "}" })
		for i, w := range words {
			words[i] = strings.Trim(w, "{}")
		}
		switch {
		case depth == 0 && opens > 0:
			zones = nil
			for _, w := range words {
				for z := range strings.SplitSeq(w, ",") {
					if z != "" {
						zones = append(zones, normZone(z))
					}
				}
			}
		case depth == 1:
			// Options in a block on the same line (`forward . 10.0.0.1 { force_tcp }`) are not targets.
			head, _, _ := strings.Cut(line, "{")
			if w := strings.Fields(head); len(w) >= 3 && w[0] == "forward" {
				out = append(out, Forward{Zones: zones, From: normZone(w[1]), To: w[2:], Line: n})
			}
		}
		depth += opens - closes
		if depth < 0 {
			return out, fmt.Errorf("line %d: unbalanced }", n)
		}
	}
	if err := sc.Err(); err != nil {
		return out, err
	}
	if depth != 0 {
		return out, fmt.Errorf("unbalanced {: %d block(s) not closed", depth)
	}
	return out, nil
}

// normZone strips a scheme and port from a server block key or forward FROM ("dns://.:53" -> ".").
func normZone(z string) string {
	if i := strings.Index(z, "://"); i >= 0 {
		z = z[i+3:]
	}
	if i := strings.LastIndexByte(z, ':'); i >= 0 && !strings.Contains(z[:i], ":") {
		z = z[:i]
	}
	z = strings.ToLower(z)
	if z != "." {
		z = strings.TrimSuffix(z, ".")
	}
	return z
}

// forwardTarget reads one forward TO: an address ("10.0.0.2", "dns://10.0.0.2:53", "[fd00::2]:53",
// "tls://1.1.1.1") or a resolv.conf path. ok is false for anything else (a placeholder).
func forwardTarget(to string) (addr netip.Addr, file string, ok bool) {
	if strings.HasPrefix(to, "/") {
		return netip.Addr{}, to, true
	}
	if i := strings.Index(to, "://"); i >= 0 {
		to = to[i+3:]
	}
	if ap, err := netip.ParseAddrPort(to); err == nil {
		return ap.Addr().Unmap(), "", true
	}
	if a, err := netip.ParseAddr(strings.Trim(to, "[]")); err == nil {
		return a.Unmap(), "", true
	}
	return netip.Addr{}, "", false
}
