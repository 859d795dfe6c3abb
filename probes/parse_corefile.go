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

// AllForwards returns the forward lines of a Corefile's server blocks, in file order.
func AllForwards(blocks []ServerBlock) []Forward {
	var out []Forward
	for _, b := range blocks {
		out = append(out, b.Forwards...)
	}
	return out
}

// ServerBlock is one server block of a Corefile: its zones, its forward lines and the zones its
// kubernetes plugin answers itself.
type ServerBlock struct {
	Zones    []string
	Line     int
	Forwards []Forward
	// Kubernetes is the block's kubernetes plugin, nil without one.
	Kubernetes *KubernetesPlugin
}

// KubernetesPlugin is a `kubernetes [ZONES...] { fallthrough [ZONES...] }` line: the plugin answers
// every name in Zones (the server block's when the line names none) itself, NXDOMAIN included, except
// those fallthrough passes on to the next plugin (all of them when fallthrough names no zone).
type KubernetesPlugin struct {
	Zones          []string
	Fallthrough    []string
	FallthroughAll bool
	Line           int
}

// Answers reports whether the plugin answers zone z itself, so that no forward of its block sees z.
func (k *KubernetesPlugin) Answers(z string) bool {
	if k == nil || k.FallthroughAll || !slices.ContainsFunc(k.Zones, func(p string) bool { return InZone(z, p) }) {
		return false
	}
	return !slices.ContainsFunc(k.Fallthrough, func(p string) bool { return InZone(z, p) })
}

// InZone reports whether name is zone or under it (both as normZone returns them; "." holds every
// name).
func InZone(name, zone string) bool {
	return zone == "." || name == zone || strings.HasSuffix(name, "."+zone)
}

// BlockFor returns the server block that serves zone z as CoreDNS picks it: the block whose zone is
// the longest one z is in (ports are not told apart: node-local caches and CoreDNS serve port 53).
// nil when no block holds z.
func BlockFor(blocks []ServerBlock, z string) *ServerBlock {
	var best *ServerBlock
	bestLen := -1
	for i := range blocks {
		for _, bz := range blocks[i].Zones {
			n := len(bz)
			if bz == "." {
				n = 0
			}
			if InZone(z, bz) && n > bestLen {
				best, bestLen = &blocks[i], n
			}
		}
	}
	return best
}

// ParseServerBlocks returns the server blocks of a Corefile with their forward lines and kubernetes
// plugin, in file order. It reads CoreDNS's Caddyfile syntax: server blocks `ZONE[:PORT]... {
// plugin args... }`, `#` comments, nested blocks for plugin options. Snippets, imports and
// environment placeholders are not expanded: a forward using them is returned as written.
func ParseServerBlocks(data []byte) ([]ServerBlock, error) {
	var out []ServerBlock
	var cur *ServerBlock
	inKube := false // inside the kubernetes plugin's own block (depth 2)
	depth := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	n := 0
	words := func(s string) []string {
		var w []string
		for _, x := range strings.Fields(s) {
			if x = strings.Trim(x, "{}"); x != "" {
				w = append(w, x)
			}
		}
		return w
	}
	for sc.Scan() {
		n++
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		if len(strings.Fields(line)) == 0 {
			continue
		}
		opens := strings.Count(line, "{")
		closes := strings.Count(line, "}")
		switch {
		case depth == 0 && opens > 0:
			var zones []string
			for _, w := range words(line) {
				for z := range strings.SplitSeq(w, ",") {
					if z != "" {
						zones = append(zones, normZone(z))
					}
				}
			}
			out = append(out, ServerBlock{Zones: zones, Line: n})
			cur = &out[len(out)-1]
		case depth == 1 && cur != nil:
			// Options in a block on the same line (`forward . 10.0.0.1 { force_tcp }`) are not targets.
			head, _, _ := strings.Cut(line, "{")
			w := strings.Fields(head)
			switch {
			case len(w) >= 3 && w[0] == "forward":
				cur.Forwards = append(cur.Forwards, Forward{Zones: cur.Zones, From: normZone(w[1]), To: w[2:], Line: n})
			case len(w) >= 1 && w[0] == "kubernetes":
				k := &KubernetesPlugin{Line: n}
				for _, z := range w[1:] {
					k.Zones = append(k.Zones, normZone(z))
				}
				if len(k.Zones) == 0 {
					k.Zones = slices.Clone(cur.Zones)
				}
				cur.Kubernetes = k
				inKube = opens > closes
			}
		case depth == 2 && inKube:
			if w := words(line); len(w) >= 1 && w[0] == "fallthrough" {
				if len(w) == 1 {
					cur.Kubernetes.FallthroughAll = true
				}
				for _, z := range w[1:] {
					cur.Kubernetes.Fallthrough = append(cur.Kubernetes.Fallthrough, normZone(z))
				}
			}
		}
		depth += opens - closes
		if depth < 2 {
			inKube = false
		}
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

// ForwardTarget reads one forward TO: an address ("10.0.0.2", "dns://10.0.0.2:53", "[fd00::2]:53",
// "tls://1.1.1.1") or a resolv.conf path. ok is false for anything else (a placeholder).
func ForwardTarget(to string) (addr netip.Addr, file string, ok bool) {
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
