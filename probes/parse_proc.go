package probes

import (
	"encoding/hex"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/nodedns/nodedns/probes/podprobe"
	"github.com/nodedns/nodedns/resolvconf"
)

// CacheProcess is the running cache (node-cache or coredns) bound to a cache address.
type CacheProcess struct {
	PID      int
	Comm     string
	Corefile string // the config path as the process sees it
	// Forwards are the forward lines of the Corefile's server blocks, Blocks the blocks themselves.
	Forwards []Forward
	Blocks   []ServerBlock
	// Resolv are the resolv.conf files forward reads, as the process sees them (its mount namespace).
	Resolv map[string]*resolvconf.File
	Err    error // the Corefile or a resolv.conf could not be read
	// NetNS is the process's network namespace (FindDNSServers), to tell which pod it is; HostNet
	// is set when that is the host's (nodedns's own).
	NetNS   podprobe.NSID
	HostNet bool
	// Root: its real, effective, saved and file system uids are all 0. PrivilegedPort: it is in the
	// host's network namespace, where binding port 53 takes CAP_NET_BIND_SERVICE
	// (net.ipv4.ip_unprivileged_port_start above 53): no unprivileged user's process holds such a
	// socket. FindDNSServers fills both, for serverTrust.
	Root, PrivilegedPort bool
}

// ProcNetEntry is one socket of /proc/net/{udp,tcp}{,6}.
type ProcNetEntry struct {
	Addr  netip.Addr
	Port  uint16
	State int
	UID   uint32 // the socket's owner (column 8)
	Inode string
}

// ParseProcNet reads /proc/net/udp-style tables: local address as hex in host byte order per 32-bit
// word, port as hex, state, owner uid in column 8, inode in column 10. Lines it cannot read are skipped.
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
		uid, err := strconv.ParseUint(f[7], 10, 32)
		if err != nil {
			continue
		}
		out = append(out, ProcNetEntry{Addr: a.Unmap(), Port: uint16(port), State: int(st), UID: uint32(uid), Inode: f[9]})
	}
	return out
}

// userHZ is the unit of the clock-tick fields of /proc/PID/stat (USER_HZ: 100 on every Linux
// architecture nodedns ships for, whatever the kernel's HZ).
const userHZ = 100

// ParseProcStatStart returns a process's start time after boot, field 22 (starttime) of its
// /proc/PID/stat. The command name (field 2) is in parentheses and may hold spaces and parentheses
// itself, so fields are counted after the last ')'.
func ParseProcStatStart(data []byte) (time.Duration, error) {
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc stat: no command name")
	}
	f := strings.Fields(s[i+1:])
	// After the name come state (field 3) ... starttime (field 22): index 22-3.
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc stat: %d fields after the command name, want at least 20", len(f))
	}
	ticks, err := strconv.ParseUint(f[19], 10, 63)
	if err != nil {
		return 0, fmt.Errorf("/proc stat: starttime: %w", err)
	}
	if ticks > uint64(1<<63-1)/uint64(time.Second/userHZ) {
		return 0, fmt.Errorf("/proc stat: starttime %d out of range", ticks)
	}
	return time.Duration(ticks) * (time.Second / userHZ), nil
}
