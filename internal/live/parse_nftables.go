package live

import (
	"encoding/binary"
	"net/netip"

	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"
	"github.com/nodedns/nodedns/probes"
	"golang.org/x/sys/unix"
)

// nftRule reads the shapes iptables-nft 1.8 and nft write for `-d ADDR -p udp --dport 53 -j
// NOTRACK`: meta l4proto (or ip protocol), payload network daddr (with an optional bitwise mask),
// payload transport dport (or an xt udp/tcp match), then notrack or xt CT with XT_CT_NOTRACK, in
// any order. iptables-nft 1.8.9 (Debian 12) writes meta l4proto first, then daddr; 1.8.13 (Debian
// forky) writes daddr first and the IPv4 protocol as a payload load of the ip header's protocol
// byte (IPv6 still as meta l4proto); both keep `-j NOTRACK` as xt CT revision 2.
// It returns false for rules of the other family in an inet table.
func nftRule(family int, chain string, exprs []expr.Any) (probes.RawRule, bool) {
	rr := probes.RawRule{Family: family, Chain: chain}
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

func portOf(r [2]uint16, inv bool, rr *probes.RawRule) uint16 {
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
