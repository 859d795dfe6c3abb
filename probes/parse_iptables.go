package probes

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"
	"golang.org/x/sys/unix"
)

// RawRule is one rule of a raw-table (before conntrack) PREROUTING or OUTPUT chain, reduced to what a
// NOTRACK rule for DNS needs. An invalid Dst, a zero Proto or a zero DPort matches anything.
type RawRule struct {
	Family  int    // 4 or 6
	Chain   string // PREROUTING or OUTPUT (nf_tables: by hook)
	Dst     netip.Prefix
	Proto   uint8 // unix.IPPROTO_UDP, unix.IPPROTO_TCP, 0 for any
	DPort   uint16
	Notrack bool
	// Other is set when the rule matches on something else too (interface, mark, negation...): it
	// does not prove coverage on its own.
	Other bool
}

// Backend is one firewall backend's raw-table rules.
type Backend struct {
	Name  string // "nf_tables" or "iptables-legacy"
	Rules []RawRule
	Err   error
}

// ReadFirewall reads the raw-table rules of both backends: nf_tables over netlink (iptables-nft and
// native nft rules) and iptables-legacy's tables.
func ReadFirewall(ctx context.Context) []Backend {
	return []Backend{readNftables(), readLegacy(ctx)}
}

// nfConntrackPriority is NF_IP_PRI_CONNTRACK: a notrack must run at a lower (earlier) priority to
// take effect, as the raw table's -300 does.
const nfConntrackPriority = -200

func readNftables() Backend {
	b := Backend{Name: "nf_tables"}
	c, err := nftables.New()
	if err != nil {
		b.Err = fmt.Errorf("open nf_tables netlink: %w", err)
		return b
	}
	chains, err := c.ListChains()
	if err != nil {
		b.Err = fmt.Errorf("list nf_tables chains: %w", err)
		return b
	}
	for _, ch := range chains {
		if ch.Hooknum == nil || ch.Priority == nil || int(*ch.Priority) >= nfConntrackPriority {
			continue
		}
		var chain string
		switch *ch.Hooknum {
		case *nftables.ChainHookPrerouting:
			chain = "PREROUTING"
		case *nftables.ChainHookOutput:
			chain = "OUTPUT"
		default:
			continue
		}
		var fams []int
		switch ch.Table.Family {
		case nftables.TableFamilyIPv4:
			fams = []int{4}
		case nftables.TableFamilyIPv6:
			fams = []int{6}
		case nftables.TableFamilyINet:
			fams = []int{4, 6}
		default:
			continue
		}
		rules, err := c.GetRules(ch.Table, ch)
		if err != nil {
			b.Err = errors.Join(b.Err, fmt.Errorf("list rules of %s %s: %w", ch.Table.Name, ch.Name, err))
			continue
		}
		for _, r := range rules {
			for _, f := range fams {
				if rr, ok := nftRule(f, chain, r.Exprs); ok {
					b.Rules = append(b.Rules, rr)
				}
			}
		}
	}
	return b
}

// nftRule reads the shapes iptables-nft 1.8 and nft write for `-d ADDR -p udp --dport 53 -j
// NOTRACK`: meta l4proto (or ip protocol), payload network daddr (with an optional bitwise mask),
// payload transport dport (or an xt udp/tcp match), then notrack or xt CT with XT_CT_NOTRACK.
// It returns false for rules of the other family in an inet table.
func nftRule(family int, chain string, exprs []expr.Any) (RawRule, bool) {
	rr := RawRule{Family: family, Chain: chain}
	type load struct {
		kind   string // "l4proto", "daddr", "dport", "nfproto", "other"
		len    int
		mask   []byte
		offset uint32
	}
	var cur load
	daddrOff := uint32(16)
	if family == 6 {
		daddrOff = 24
	}
	for _, e := range exprs {
		switch x := e.(type) {
		case *expr.Meta:
			switch x.Key {
			case expr.MetaKeyL4PROTO:
				cur = load{kind: "l4proto"}
			case expr.MetaKeyNFPROTO:
				cur = load{kind: "nfproto"}
			default:
				cur = load{kind: "other"}
			}
		case *expr.Payload:
			switch {
			case x.Base == expr.PayloadBaseNetworkHeader && x.Offset == daddrOff && int(x.Len) == addrLen(family):
				cur = load{kind: "daddr", len: int(x.Len)}
			case x.Base == expr.PayloadBaseNetworkHeader && family == 4 && x.Offset == 9 && x.Len == 1,
				x.Base == expr.PayloadBaseNetworkHeader && family == 6 && x.Offset == 6 && x.Len == 1:
				cur = load{kind: "l4proto"}
			case x.Base == expr.PayloadBaseTransportHeader && x.Offset == 2 && x.Len == 2:
				cur = load{kind: "dport"}
			default:
				cur = load{kind: "other", offset: x.Offset}
			}
		case *expr.Bitwise:
			cur.mask = x.Mask
		case *expr.Cmp:
			if x.Op != expr.CmpOpEq {
				rr.Other = true
				continue
			}
			switch cur.kind {
			case "l4proto":
				if len(x.Data) == 1 {
					rr.Proto = x.Data[0]
				}
			case "nfproto":
				if len(x.Data) == 1 && (x.Data[0] == unix.NFPROTO_IPV4) != (family == 4) {
					return rr, false
				}
			case "daddr":
				if a, ok := netip.AddrFromSlice(x.Data); ok {
					bits := a.BitLen()
					if cur.mask != nil {
						bits = maskBits(cur.mask)
					}
					rr.Dst = netip.PrefixFrom(a, bits).Masked()
				}
			case "dport":
				if len(x.Data) == 2 {
					rr.DPort = binary.BigEndian.Uint16(x.Data)
				}
			default:
				rr.Other = true
			}
		case *expr.Match:
			switch info := x.Info.(type) {
			case *xt.Udp:
				rr.Proto = unix.IPPROTO_UDP
				rr.DPort = portOf(info.DstPorts, info.InvFlags&xt.UdpInvDestPorts != 0, &rr)
			case *xt.Tcp:
				rr.Proto = unix.IPPROTO_TCP
				rr.DPort = portOf(info.DstPorts, info.InvFlags&xt.TcpInvDestPorts != 0, &rr)
			case *xt.Comment:
			default:
				rr.Other = true
			}
		case *expr.Notrack:
			rr.Notrack = true
		case *expr.Target:
			rr.Notrack = rr.Notrack || xtNotrack(x)
		case *expr.Counter, *expr.Verdict:
		default:
			rr.Other = true
		}
	}
	return rr, true
}

func portOf(r [2]uint16, inv bool, rr *RawRule) uint16 {
	switch {
	case inv:
		rr.Other = true
	case r[0] == 0 && r[1] == 0xffff:
		return 0
	case r[0] == r[1]:
		return r[0]
	default:
		rr.Other = true
	}
	return 0
}

// xtNotrack reads an xtables target: NOTRACK (old iptables) or CT whose xt_ct_target_info flags
// (first u16, host order) carry XT_CT_NOTRACK; iptables-nft 1.8.9 writes `-j NOTRACK` as CT rev 2.
func xtNotrack(t *expr.Target) bool {
	switch t.Name {
	case "NOTRACK":
		return true
	case "CT":
		if u, ok := t.Info.(*xt.Unknown); ok && len(*u) >= 2 {
			return binary.NativeEndian.Uint16((*u)[:2])&1 != 0
		}
	}
	return false
}

func addrLen(family int) int {
	if family == 6 {
		return 16
	}
	return 4
}

func maskBits(m []byte) int {
	n := 0
	for _, b := range m {
		for i := 7; i >= 0; i-- {
			if b&(1<<i) == 0 {
				return n
			}
			n++
		}
	}
	return n
}

// readLegacy reads iptables-legacy's raw tables with iptables-legacy-save. Legacy tables live in the
// kernel as x_tables blobs read with getsockopt(IPT_SO_GET_ENTRIES), whose layout is per match and
// target revision; iptables-legacy-save is the one maintained decoder of them (no Go library
// reads them). The table list in /proc/net/ip_tables_names (per network namespace) is read first,
// so a node without a legacy raw table runs no command and loads no module.
func readLegacy(ctx context.Context) Backend {
	b := Backend{Name: "iptables-legacy"}
	for _, v := range []struct {
		family int
		names  string
		cmd    string
	}{{4, "/proc/net/ip_tables_names", "iptables-legacy-save"}, {6, "/proc/net/ip6_tables_names", "ip6tables-legacy-save"}} {
		names, err := os.ReadFile(v.names)
		if err != nil || !slicesContainsLine(names, "raw") {
			continue
		}
		path, err := exec.LookPath(v.cmd)
		if err != nil {
			b.Err = errors.Join(b.Err, fmt.Errorf("a legacy raw table exists (%s) but %s is not installed to read it", v.names, v.cmd))
			continue
		}
		out, err := exec.CommandContext(ctx, path, "-t", "raw").Output()
		if err != nil {
			b.Err = errors.Join(b.Err, fmt.Errorf("%s -t raw: %w", v.cmd, err))
			continue
		}
		rs, err := ParseIptablesSave(v.family, out)
		if err != nil {
			b.Err = errors.Join(b.Err, fmt.Errorf("%s -t raw: %w", v.cmd, err))
		}
		b.Rules = append(b.Rules, rs...)
	}
	return b
}

func slicesContainsLine(data []byte, want string) bool {
	for _, l := range bytes.Split(data, []byte("\n")) {
		if strings.TrimSpace(string(l)) == want {
			return true
		}
	}
	return false
}

// ParseIptablesSave reads the raw table's PREROUTING and OUTPUT rules from iptables-save output
// (`-A PREROUTING -d 169.254.25.10/32 -p udp -m udp --dport 53 -j NOTRACK`). Rules of other tables
// and chains are skipped; a rule it cannot read makes an error naming the line, and the others are
// still returned.
func ParseIptablesSave(family int, data []byte) ([]RawRule, error) {
	var out []RawRule
	var errs []error
	table := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "*"):
			table = line[1:]
			continue
		case !strings.HasPrefix(line, "-A "):
			continue
		}
		if table != "raw" {
			continue
		}
		f := strings.Fields(line)
		chain := f[1]
		if chain != "PREROUTING" && chain != "OUTPUT" {
			continue
		}
		rr := RawRule{Family: family, Chain: chain}
		if err := parseSaveArgs(&rr, f[2:]); err != nil {
			errs = append(errs, fmt.Errorf("line %d: %w", n, err))
			continue
		}
		out = append(out, rr)
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}

func parseSaveArgs(rr *RawRule, f []string) error {
	neg := false
	for i := 0; i < len(f); i++ {
		arg := func() (string, error) {
			if i+1 >= len(f) {
				return "", fmt.Errorf("%s without a value", f[i])
			}
			i++
			return f[i], nil
		}
		switch f[i] {
		case "!":
			neg = true
			continue
		case "-d", "--destination":
			v, err := arg()
			if err != nil {
				return err
			}
			p, err := parsePrefix(v)
			if err != nil {
				return err
			}
			rr.Dst = p
		case "-p", "--protocol":
			v, err := arg()
			if err != nil {
				return err
			}
			switch strings.ToLower(v) {
			case "udp", "17":
				rr.Proto = unix.IPPROTO_UDP
			case "tcp", "6":
				rr.Proto = unix.IPPROTO_TCP
			case "all", "0":
			default:
				rr.Other = true
			}
		case "--dport", "--destination-port":
			v, err := arg()
			if err != nil {
				return err
			}
			if strings.ContainsAny(v, ":,") {
				rr.Other = true
				break
			}
			p, err := strconv.ParseUint(v, 10, 16)
			if err != nil {
				return fmt.Errorf("--dport %q: %w", v, err)
			}
			rr.DPort = uint16(p)
		case "-j", "--jump":
			v, err := arg()
			if err != nil {
				return err
			}
			switch v {
			case "NOTRACK":
				rr.Notrack = true
			case "CT":
				rr.Notrack = slicesContains(f[i+1:], "--notrack")
			}
		case "-m", "--match":
			v, err := arg()
			if err != nil {
				return err
			}
			if v != "udp" && v != "tcp" && v != "comment" {
				rr.Other = true
			}
		case "--comment":
			if _, err := arg(); err != nil {
				return err
			}
		case "-s", "--source", "-i", "--in-interface", "-o", "--out-interface", "--sport", "--source-port":
			if _, err := arg(); err != nil {
				return err
			}
			rr.Other = true
		}
		if neg {
			rr.Other = true
			neg = false
		}
	}
	return nil
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func parsePrefix(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("-d %q: %w", s, err)
		}
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("-d %q: %w", s, err)
	}
	return p.Masked(), nil
}
