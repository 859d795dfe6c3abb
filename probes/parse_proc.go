package probes

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/miekg/dns"

	"github.com/nodedns/nodedns/resolvconf"
)

// CacheProcess is the running cache (node-cache or coredns) bound to a cache address.
type CacheProcess struct {
	PID      int
	Comm     string
	Corefile string // the config path as the process sees it
	// Forwards are the forward lines of the Corefile's server blocks.
	Forwards []Forward
	// Resolv are the resolv.conf files forward reads, as the process sees them (its mount namespace).
	Resolv map[string]*resolvconf.File
	Err    error // the Corefile or a resolv.conf could not be read
}

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

// socketInodes returns the inodes of sockets bound to any of addrs on port 53 (UDP, or TCP
// listening), from the proc net tables of the reader's network namespace.
func socketInodes(proc string, addrs []netip.Addr) map[string]bool {
	inodes := map[string]bool{}
	for _, t := range []string{"udp", "udp6", "tcp", "tcp6"} {
		data, err := os.ReadFile(filepath.Join(proc, "net", t))
		if err != nil {
			continue
		}
		for _, e := range ParseProcNet(data) {
			if e.Port != 53 || (strings.HasPrefix(t, "tcp") && e.State != 0x0A) {
				continue
			}
			if slices.Contains(addrs, e.Addr) {
				inodes[e.Inode] = true
			}
		}
	}
	return inodes
}

// ProcNetEntry is one socket of /proc/net/{udp,tcp}{,6}.
type ProcNetEntry struct {
	Addr  netip.Addr
	Port  uint16
	State int
	Inode string
}

// ParseProcNet reads /proc/net/udp-style tables: local address as hex in host byte order per 32-bit
// word, port as hex, state, inode in column 10. Lines it cannot read are skipped.
func ParseProcNet(data []byte) []ProcNetEntry {
	var out []ProcNetEntry
	for i, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) < 10 {
			continue
		}
		hostHex, portHex, ok := strings.Cut(f[1], ":")
		if !ok {
			continue
		}
		raw, err := hex.DecodeString(hostHex)
		if err != nil || (len(raw) != 4 && len(raw) != 16) {
			continue
		}
		// Each 32-bit word is printed in host order (little-endian on every platform we ship).
		for w := 0; w+4 <= len(raw); w += 4 {
			raw[w], raw[w+1], raw[w+2], raw[w+3] = raw[w+3], raw[w+2], raw[w+1], raw[w]
		}
		a, _ := netip.AddrFromSlice(raw)
		port, err := strconv.ParseUint(portHex, 16, 16)
		if err != nil {
			continue
		}
		st, _ := strconv.ParseInt(f[3], 16, 32)
		out = append(out, ProcNetEntry{Addr: a.Unmap(), Port: uint16(port), State: int(st), Inode: f[9]})
	}
	return out
}

// cacheComms are the process names of a NodeLocal DNSCache.
var cacheComms = []string{"node-cache", "coredns"}

// FindCacheProcess finds the node-cache or coredns process holding a socket bound to a cache address
// on port 53 and reads its Corefile's forward lines and the resolv.conf files they name, through
// /proc/PID/root (its own mount namespace: a pod's /etc/resolv.conf, not the host's). It returns nil
// when no such process runs.
func FindCacheProcess(proc string, addrs []netip.Addr) *CacheProcess {
	inodes := socketInodes(proc, addrs)
	if len(inodes) == 0 {
		return nil
	}
	dirs, _ := os.ReadDir(proc)
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join(proc, d.Name(), "comm"))
		if err != nil || !slices.Contains(cacheComms, strings.TrimSpace(string(comm))) {
			continue
		}
		fds, _ := os.ReadDir(filepath.Join(proc, d.Name(), "fd"))
		for _, fd := range fds {
			t, err := os.Readlink(filepath.Join(proc, d.Name(), "fd", fd.Name()))
			if err != nil || !strings.HasPrefix(t, "socket:[") {
				continue
			}
			if inodes[strings.TrimSuffix(strings.TrimPrefix(t, "socket:["), "]")] {
				return readCacheProcess(proc, pid, strings.TrimSpace(string(comm)))
			}
		}
	}
	return nil
}

func readCacheProcess(proc string, pid int, comm string) *CacheProcess {
	cp := &CacheProcess{PID: pid, Comm: comm, Corefile: "Corefile", Resolv: map[string]*resolvconf.File{}}
	base := filepath.Join(proc, strconv.Itoa(pid))
	cmdline, _ := os.ReadFile(filepath.Join(base, "cmdline"))
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	for i, a := range args {
		switch {
		case (a == "-conf" || a == "--conf") && i+1 < len(args):
			cp.Corefile = args[i+1]
		case strings.HasPrefix(a, "-conf="), strings.HasPrefix(a, "--conf="):
			cp.Corefile = a[strings.IndexByte(a, '=')+1:]
		}
	}
	in := func(p string) string {
		if path.IsAbs(p) {
			return filepath.Join(base, "root", p)
		}
		return filepath.Join(base, "cwd", p)
	}
	data, err := readLimited(in(cp.Corefile), 1<<20)
	if err != nil {
		cp.Err = fmt.Errorf("read the Corefile of %s (pid %d): %w", comm, pid, err)
		return cp
	}
	cp.Forwards, err = ParseCorefile(data)
	if err != nil {
		cp.Err = fmt.Errorf("%s (pid %d): %w", cp.Corefile, pid, err)
	}
	for _, f := range cp.Forwards {
		for _, to := range f.To {
			if _, file, ok := forwardTarget(to); ok && file != "" {
				if _, done := cp.Resolv[file]; done {
					continue
				}
				data, err := readLimited(filepath.Join(base, "root", file), resolvconf.MaxSize)
				if err != nil {
					cp.Err = fmt.Errorf("read %s of %s (pid %d): %w", file, comm, pid, err)
					continue
				}
				rf, err := resolvconf.Parse(data)
				if err != nil {
					cp.Err = fmt.Errorf("%s of %s (pid %d): %w", file, comm, pid, err)
					continue
				}
				cp.Resolv[file] = rf
			}
		}
	}
	return cp
}

func readLimited(p string, limit int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", p, limit)
	}
	return data, nil
}

// isStub reports whether a is systemd-resolved's stub listener (127.0.0.53) or its proxy (127.0.0.54).
func isStub(a netip.Addr) bool {
	return a == netip.AddrFrom4([4]byte{127, 0, 0, 53}) || a == netip.AddrFrom4([4]byte{127, 0, 0, 54})
}

// resolvedLoops lists the loop addresses systemd-resolved forwards to: its global and per-link
// servers as configured, and its uplink view /run/systemd/resolve/resolv.conf.
func resolvedLoops(env *Env) []netip.Addr {
	s := env.Snapshot
	var all []netip.Addr
	if s.Resolved != nil {
		for _, sv := range s.Resolved.DNS {
			all = append(all, sv.Addr)
		}
	}
	for _, l := range s.Links {
		all = append(all, l.DNS...)
	}
	if s.ResolvedResolv.File != nil {
		all = append(all, s.ResolvedResolv.File.Nameservers()...)
	}
	var out []netip.Addr
	for _, a := range all {
		if env.Plan.Facts.IsLoop(a, false) && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// chainLoops walks the cache's upstream chain: the forward targets of every server block that is not
// the cluster domain or a reverse zone (those forward to kube-dns on purpose), the resolv.conf files
// they name, and systemd-resolved behind a loopback stub.
func chainLoops(env *Env, cp *CacheProcess) (loops []string, upstreams []string) {
	f := env.Plan.Facts
	judge := func(a netip.Addr, via string) {
		upstreams = append(upstreams, a.String()+via)
		switch {
		case a.IsLoopback():
			if !isStub(a) {
				return // another local resolver (dnsmasq, unbound): not followed
			}
			if rl := resolvedLoops(env); len(rl) > 0 {
				loops = append(loops, fmt.Sprintf("%s%s is systemd-resolved's stub, and resolved forwards to %s (%s): queries loop through the stub, which CoreDNS's loop plugin does not catch", a, via, addrList(rl), f.LoopKind(rl[0])))
			}
		case f.IsLoop(a, false):
			loops = append(loops, fmt.Sprintf("%s%s is %s", a, via, f.LoopKind(a)))
		}
	}
	for _, fw := range cp.Forwards {
		if slices.ContainsFunc(fw.Zones, func(z string) bool { return f.IsClusterDomain(z) || strings.HasSuffix(z, ".arpa") || z == "arpa" }) {
			continue
		}
		for _, to := range fw.To {
			a, file, ok := forwardTarget(to)
			switch {
			case !ok:
			case file != "":
				if rf := cp.Resolv[file]; rf != nil {
					for _, ns := range rf.Nameservers() {
						judge(ns, fmt.Sprintf(" (from %s, read through /proc/%d/root)", file, cp.PID))
					}
				}
			default:
				judge(a, fmt.Sprintf(" (%s line %d)", cp.Corefile, fw.Line))
			}
		}
	}
	return loops, upstreams
}

type dnsLoop struct{}

func (dnsLoop) ID() string { return "dns.loop" }

func (dnsLoop) Run(ctx context.Context, env *Env) Result {
	if env.Host == nil {
		return liveSkipped()
	}
	l := env.Host
	cp := FindCacheProcess(l.Proc, env.Plan.Facts.CacheAddrs)
	p := env.probeCache(ctx)

	// The live probe: a random name the cache cannot have cached (the CoreDNS loop plugin's shape,
	// <random>.<random>. HINFO), sent through the cache so it travels the whole upstream chain.
	var probe *answer
	if p.answered {
		name := l.Random() + "." + l.Random() + "."
		a := l.query(ctx, []answer{{server: p.probed[0], network: "udp", name: name, qtype: dns.TypeHINFO}})[0]
		probe = &a
	}
	probeFailed := probe != nil && (probe.err != nil || probe.msg.Rcode == dns.RcodeServerFailure)

	if cp == nil {
		if !p.answered {
			return Result{Status: Unknown, Message: "the cache is down (no process bound to a cache address answers): a loop cannot be probed"}
		}
		return Result{Status: Unknown, Message: fmt.Sprintf("no node-cache or coredns process bound to %s port 53 was found: the upstream chain cannot be read (probe: %s)", addrList(env.Plan.Facts.CacheAddrs), probe),
			Hint: "run nodedns on the host (host PID namespace) so it can read the cache's /proc"}
	}
	who := fmt.Sprintf("%s (pid %d)", cp.Comm, cp.PID)
	loops, ups := chainLoops(env, cp)
	if len(loops) > 0 {
		msg := who + " forwards in a loop: " + strings.Join(loops, "; ")
		switch {
		case probeFailed:
			msg += fmt.Sprintf("; confirmed: %s", probe)
		case probe != nil:
			msg += fmt.Sprintf("; a random name still got %s (another upstream answers first: the loop bites when it fails)", dns.RcodeToString[probe.msg.Rcode])
		}
		return Result{Status: Problem, Message: msg,
			Hint: "give the cache real upstreams: " + hintApply + " (kubelet's resolvConf and resolved's DNS= lose the loop address), then restart the node-local-dns pod"}
	}
	if cp.Err != nil {
		return Result{Status: Unknown, Message: who + ": " + cp.Err.Error()}
	}
	switch {
	case probe == nil:
		return Result{Status: Unknown, Message: fmt.Sprintf("%s forwards to %s (no loop address), but the cache does not answer: a loop cannot be probed", who, strings.Join(ups, ", "))}
	case probeFailed:
		return Result{Status: Unknown, Message: fmt.Sprintf("%s forwards to %s (no loop address), but a random name failed: %s (an upstream fails, or a loop nodedns cannot see)", who, strings.Join(ups, ", "), probe),
			Hint: "query the upstreams directly with dig; check the cache's logs"}
	}
	if len(ups) == 0 {
		return Result{Status: OK, Message: fmt.Sprintf("%s forwards nothing outside the cluster domain; a random name got %s", who, dns.RcodeToString[probe.msg.Rcode])}
	}
	return Result{Status: OK, Message: fmt.Sprintf("%s forwards to %s: no loop address; a random name got %s", who, strings.Join(ups, ", "), dns.RcodeToString[probe.msg.Rcode])}
}
