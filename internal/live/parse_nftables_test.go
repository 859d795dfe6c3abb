package live

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"
	"github.com/nodedns/nodedns/probes"
	"golang.org/x/sys/unix"
)

// The expressions below are what google/nftables v0.3.0 decodes from rules written by iptables-nft
// 1.8.9, ip6tables-nft 1.8.9 and nft 1.0.6 (Debian 12, kernel 6.18), dumped in a scratch network
// namespace; the xt match shapes are those older iptables-nft releases leave untranslated.

func l4proto(p byte) []expr.Any {
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}}}
}

func nfproto(p byte) []expr.Any {
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}}}
}

// daddr loads the destination address (offset 16 in IPv4, 24 in IPv6; as many bytes as addr has)
// and compares it with op.
func daddr(op expr.CmpOp, offset uint32, addr ...byte) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: uint32(len(addr))},
		&expr.Cmp{Op: op, Register: 1, Data: addr},
	}
}

func dport(op expr.CmpOp, port uint16) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: op, Register: 1, Data: binary.BigEndian.AppendUint16(nil, port)},
	}
}

// ctTarget is xtables' CT target, revision 2, as iptables-nft 1.8.9 writes it: a 72-byte
// xt_ct_target_info_v1 whose first u16 (host order) holds the flags and the second the zone.
// `-j NOTRACK` sets flags 3 (XT_CT_NOTRACK | XT_CT_NOTRACK_ALIAS), `-j CT --notrack` 1.
func ctTarget(flags, zone uint16) *expr.Target {
	info := make(xt.Unknown, 72)
	binary.NativeEndian.PutUint16(info[0:], flags)
	binary.NativeEndian.PutUint16(info[2:], zone)
	return &expr.Target{Name: "CT", Rev: 2, Info: &info}
}

func exprs(parts ...any) []expr.Any {
	var out []expr.Any
	for _, p := range parts {
		switch x := p.(type) {
		case []expr.Any:
			out = append(out, x...)
		case expr.Any:
			out = append(out, x)
		}
	}
	return out
}

func TestNftRule(t *testing.T) {
	cacheDst := netip.MustParsePrefix("169.254.25.10/32")
	comment := xt.Comment("NodeLocal DNS Cache: skip conntrack")
	eq := expr.CmpOpEq
	tests := []struct {
		name   string
		family int
		exprs  []expr.Any
		want   probes.RawRule
		ok     bool
	}{
		{
			name: "iptables-nft -d ADDR -p udp --dport 53 -j NOTRACK", family: 4,
			exprs: exprs(l4proto(unix.IPPROTO_UDP), daddr(eq, 16, 169, 254, 25, 10), dport(eq, 53), &expr.Counter{}, ctTarget(3, 0)),
			want:  probes.RawRule{Dst: cacheDst, Proto: unix.IPPROTO_UDP, DPort: 53, Notrack: true}, ok: true,
		},
		{
			// iptables-nft 1.8.13 (Debian forky), dumped the same way: the address first, the
			// protocol as the ip header's protocol byte.
			name: "iptables-nft 1.8.13 -d ADDR -p udp --dport 53 -j NOTRACK", family: 4,
			exprs: exprs(daddr(eq, 16, 169, 254, 25, 10),
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 9, Len: 1}, &expr.Cmp{Op: eq, Register: 1, Data: []byte{unix.IPPROTO_UDP}},
				dport(eq, 53), &expr.Counter{}, ctTarget(3, 0)),
			want: probes.RawRule{Dst: cacheDst, Proto: unix.IPPROTO_UDP, DPort: 53, Notrack: true}, ok: true,
		},
		{
			name: "iptables-nft -p tcp -m tcp --dport 53 -m comment -j CT --notrack", family: 4,
			exprs: exprs(l4proto(unix.IPPROTO_TCP), daddr(eq, 16, 169, 254, 25, 10), dport(eq, 53), &expr.Match{Name: "comment", Info: &comment}, &expr.Counter{}, ctTarget(1, 0)),
			want:  probes.RawRule{Dst: cacheDst, Proto: unix.IPPROTO_TCP, DPort: 53, Notrack: true}, ok: true,
		},
		{
			name: "iptables-nft -j CT --zone 1 is no NOTRACK", family: 4,
			exprs: exprs(l4proto(unix.IPPROTO_UDP), daddr(eq, 16, 169, 254, 25, 10), dport(eq, 53), &expr.Counter{}, ctTarget(0, 1)),
			want:  probes.RawRule{Dst: cacheDst, Proto: unix.IPPROTO_UDP, DPort: 53}, ok: true,
		},
		{
			name: "iptables-nft -d 169.254.16.0/20: a masked load", family: 4,
			exprs: exprs(l4proto(unix.IPPROTO_UDP),
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
				&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: []byte{255, 255, 240, 0}, Xor: []byte{0, 0, 0, 0}},
				&expr.Cmp{Op: eq, Register: 1, Data: []byte{169, 254, 16, 0}},
				dport(eq, 53), &expr.Counter{}, ctTarget(3, 0)),
			want: probes.RawRule{Dst: netip.MustParsePrefix("169.254.16.0/20"), Proto: unix.IPPROTO_UDP, DPort: 53, Notrack: true}, ok: true,
		},
		{
			// iptables-nft loads only the two bytes of a prefix on a byte boundary. The decoder does
			// not read a short load as a prefix: the rule counts as matching on something else, so it
			// never proves coverage on its own.
			name: "iptables-nft -d 169.254.0.0/16: a short load", family: 4,
			exprs: exprs(l4proto(unix.IPPROTO_UDP), daddr(eq, 16, 169, 254), dport(eq, 53), &expr.Counter{}, ctTarget(3, 0)),
			want:  probes.RawRule{Proto: unix.IPPROTO_UDP, DPort: 53, Notrack: true, Other: true}, ok: true,
		},
		{
			name: "iptables-nft ! -d ADDR", family: 4,
			exprs: exprs(l4proto(unix.IPPROTO_UDP), daddr(expr.CmpOpNeq, 16, 169, 254, 25, 10), dport(eq, 53), &expr.Counter{}, ctTarget(3, 0)),
			want:  probes.RawRule{Proto: unix.IPPROTO_UDP, DPort: 53, Notrack: true, Other: true}, ok: true,
		},
		{
			name: "iptables-nft ! --dport 53", family: 4,
			exprs: exprs(l4proto(unix.IPPROTO_UDP), daddr(eq, 16, 169, 254, 25, 10), dport(expr.CmpOpNeq, 53), &expr.Counter{}, ctTarget(3, 0)),
			want:  probes.RawRule{Dst: cacheDst, Proto: unix.IPPROTO_UDP, Notrack: true, Other: true}, ok: true,
		},
		{
			name: "iptables-nft -i eth0 --dport 53:54", family: 4,
			exprs: exprs(&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1}, &expr.Cmp{Op: eq, Register: 1, Data: []byte("eth0\x00")},
				l4proto(unix.IPPROTO_UDP),
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
				&expr.Range{Op: eq, Register: 1, FromData: []byte{0, 53}, ToData: []byte{0, 54}},
				&expr.Counter{}, ctTarget(3, 0)),
			want: probes.RawRule{Proto: unix.IPPROTO_UDP, Notrack: true, Other: true}, ok: true,
		},
		{
			name: "ip6tables-nft -d fd00::10/128", family: 6,
			exprs: exprs(l4proto(unix.IPPROTO_UDP), daddr(eq, 24, 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10), dport(eq, 53), &expr.Counter{}, ctTarget(3, 0)),
			want:  probes.RawRule{Dst: netip.MustParsePrefix("fd00::10/128"), Proto: unix.IPPROTO_UDP, DPort: 53, Notrack: true}, ok: true,
		},
		{
			name: "nft inet: ip daddr ADDR udp dport 53 notrack, read for IPv4", family: 4,
			exprs: exprs(nfproto(unix.NFPROTO_IPV4), daddr(eq, 16, 169, 254, 25, 10), l4proto(unix.IPPROTO_UDP), dport(eq, 53), &expr.Notrack{}),
			want:  probes.RawRule{Dst: cacheDst, Proto: unix.IPPROTO_UDP, DPort: 53, Notrack: true}, ok: true,
		},
		{
			name: "nft inet: an IPv4 rule is not an IPv6 one", family: 6,
			exprs: exprs(nfproto(unix.NFPROTO_IPV4), daddr(eq, 16, 169, 254, 25, 10), l4proto(unix.IPPROTO_UDP), dport(eq, 53), &expr.Notrack{}),
			ok:    false,
		},
		{
			name: "nft inet: an IPv6 rule is not an IPv4 one", family: 4,
			exprs: exprs(nfproto(unix.NFPROTO_IPV6), daddr(eq, 24, 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10), l4proto(unix.IPPROTO_TCP), dport(eq, 53), &expr.Notrack{}),
			ok:    false,
		},
		{
			name: "nft inet: meta l4proto first, th dport, a counter", family: 4,
			exprs: exprs(l4proto(unix.IPPROTO_UDP), nfproto(unix.NFPROTO_IPV4), daddr(eq, 16, 169, 254, 25, 10), dport(eq, 53), &expr.Counter{}, &expr.Notrack{}),
			want:  probes.RawRule{Dst: cacheDst, Proto: unix.IPPROTO_UDP, DPort: 53, Notrack: true}, ok: true,
		},
		{
			name: "ip protocol from the IPv4 header", family: 4,
			exprs: exprs(&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 9, Len: 1}, &expr.Cmp{Op: eq, Register: 1, Data: []byte{unix.IPPROTO_TCP}}, &expr.Notrack{}),
			want:  probes.RawRule{Proto: unix.IPPROTO_TCP, Notrack: true}, ok: true,
		},
		{
			name: "next header from the IPv6 header", family: 6,
			exprs: exprs(&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 6, Len: 1}, &expr.Cmp{Op: eq, Register: 1, Data: []byte{unix.IPPROTO_UDP}}, &expr.Notrack{}),
			want:  probes.RawRule{Proto: unix.IPPROTO_UDP, Notrack: true}, ok: true,
		},
		{
			name: "an xt udp match for port 53 and the old NOTRACK target", family: 4,
			exprs: exprs(daddr(eq, 16, 169, 254, 25, 10), &expr.Match{Name: "udp", Info: &xt.Udp{SrcPorts: [2]uint16{0, 0xffff}, DstPorts: [2]uint16{53, 53}}}, &expr.Target{Name: "NOTRACK"}),
			want:  probes.RawRule{Dst: cacheDst, Proto: unix.IPPROTO_UDP, DPort: 53, Notrack: true}, ok: true,
		},
		{
			name: "an xt udp match for any port", family: 4,
			exprs: exprs(&expr.Match{Name: "udp", Info: &xt.Udp{DstPorts: [2]uint16{0, 0xffff}}}, &expr.Notrack{}),
			want:  probes.RawRule{Proto: unix.IPPROTO_UDP, Notrack: true}, ok: true,
		},
		{
			name: "an xt udp match for a port range", family: 4,
			exprs: exprs(&expr.Match{Name: "udp", Info: &xt.Udp{DstPorts: [2]uint16{53, 54}}}, &expr.Notrack{}),
			want:  probes.RawRule{Proto: unix.IPPROTO_UDP, Notrack: true, Other: true}, ok: true,
		},
		{
			name: "an xt tcp match with ! --dport", family: 4,
			exprs: exprs(&expr.Match{Name: "tcp", Info: &xt.Tcp{DstPorts: [2]uint16{53, 53}, InvFlags: xt.TcpInvDestPorts}}, &expr.Notrack{}),
			want:  probes.RawRule{Proto: unix.IPPROTO_TCP, Notrack: true, Other: true}, ok: true,
		},
		{
			name: "another xt match", family: 4,
			exprs: exprs(&expr.Match{Name: "mark", Info: &xt.Unknown{1, 0, 0, 0}}, &expr.Notrack{}),
			want:  probes.RawRule{Notrack: true, Other: true}, ok: true,
		},
		{
			name: "an expression the decoder does not know", family: 4,
			exprs: exprs(daddr(eq, 16, 169, 254, 25, 10), &expr.Lookup{SourceRegister: 1, SetName: "cache"}, &expr.Notrack{}),
			want:  probes.RawRule{Dst: cacheDst, Notrack: true, Other: true}, ok: true,
		},
		{
			name: "a CT target whose info is cut short", family: 4,
			exprs: exprs(daddr(eq, 16, 169, 254, 25, 10), &expr.Target{Name: "CT", Rev: 2, Info: &xt.Unknown{1}}),
			want:  probes.RawRule{Dst: cacheDst}, ok: true,
		},
		{
			name: "an accept verdict is no NOTRACK", family: 4,
			exprs: exprs(daddr(eq, 16, 169, 254, 25, 10), &expr.Verdict{Kind: expr.VerdictAccept}),
			want:  probes.RawRule{Dst: cacheDst}, ok: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := nftRule(tc.family, "PREROUTING", tc.exprs)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v (rule %+v)", ok, tc.ok, got)
			}
			if !ok {
				return
			}
			want := tc.want
			want.Family, want.Chain = tc.family, "PREROUTING"
			if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
				t.Errorf("rule (-want +got):\n%s", diff)
			}
		})
	}
}

// fuzzExprs turns fuzz bytes into a rule's expressions: each expression takes a selector byte and
// its fields from the bytes after it, so the fuzzer reaches every shape nftRule reads, in any order
// and with any lengths.
func fuzzExprs(data []byte) []expr.Any {
	b := bytes.NewReader(data)
	next := func() byte { c, _ := b.ReadByte(); return c }
	take := func(n byte) []byte {
		out := make([]byte, int(n))
		k, _ := b.Read(out)
		return out[:k]
	}
	u16 := func() uint16 { return uint16(next())<<8 | uint16(next()) }
	var out []expr.Any
	for b.Len() > 0 && len(out) < 64 {
		switch next() % 13 {
		case 0:
			out = append(out, &expr.Meta{Key: expr.MetaKey(next() % 32), Register: 1})
		case 1:
			out = append(out, &expr.Payload{DestRegister: 1, Base: expr.PayloadBase(next() % 3), Offset: uint32(next()), Len: uint32(next() % 20)})
		case 2:
			out = append(out, &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Mask: take(next() % 20)})
		case 3:
			out = append(out, &expr.Cmp{Op: expr.CmpOp(next() % 6), Register: 1, Data: take(next() % 20)})
		case 4:
			out = append(out, &expr.Match{Name: "udp", Info: &xt.Udp{DstPorts: [2]uint16{u16(), u16()}, InvFlags: xt.UdpInvFlagset(next())}})
		case 5:
			out = append(out, &expr.Match{Name: "tcp", Info: &xt.Tcp{DstPorts: [2]uint16{u16(), u16()}, InvFlags: xt.TcpInvFlagset(next())}})
		case 6:
			c := xt.Comment(take(next() % 8))
			out = append(out, &expr.Match{Name: "comment", Info: &c})
		case 7:
			out = append(out, &expr.Match{Name: "mark"})
		case 8:
			u := xt.Unknown(take(next() % 8))
			out = append(out, &expr.Target{Name: []string{"CT", "NOTRACK", "ACCEPT"}[next()%3], Rev: 2, Info: &u})
		case 9:
			out = append(out, &expr.Target{Name: "CT"})
		case 10:
			out = append(out, &expr.Notrack{})
		case 11:
			out = append(out, &expr.Counter{})
		case 12:
			out = append(out, &expr.Verdict{Kind: expr.VerdictAccept}, &expr.Range{Op: expr.CmpOpEq, Register: 1})
		}
	}
	return out
}

func FuzzNftRule(f *testing.F) {
	// meta l4proto udp, ip daddr 169.254.25.10, th dport 53, notrack.
	f.Add(false, []byte{0, 16, 3, 0, 1, 17, 1, 1, 16, 4, 3, 0, 4, 169, 254, 25, 10, 1, 2, 2, 2, 3, 0, 2, 0, 53, 10})
	// meta nfproto ipv4 in an inet table, read for IPv6; then an xt udp match and a CT target.
	f.Add(true, []byte{0, 15, 3, 0, 1, 2, 4, 0, 53, 0, 53, 0, 8, 2, 1, 0, 0})
	f.Fuzz(func(t *testing.T, v6 bool, data []byte) {
		family := 4
		if v6 {
			family = 6
		}
		es := fuzzExprs(data)
		rr, ok := nftRule(family, "OUTPUT", es)
		if rr.Family != family || rr.Chain != "OUTPUT" {
			t.Fatalf("rule of family %d chain %q, want %d OUTPUT", rr.Family, rr.Chain, family)
		}
		if !ok {
			// Only a rule for the other family of an inet table is left out.
			hasNFProto := false
			for _, e := range es {
				if m, isMeta := e.(*expr.Meta); isMeta && m.Key == expr.MetaKeyNFPROTO {
					hasNFProto = true
				}
			}
			if !hasNFProto {
				t.Fatalf("rule dropped without a meta nfproto: %+v", es)
			}
			return
		}
		if rr.Dst.IsValid() && rr.Dst != rr.Dst.Masked() {
			t.Fatalf("destination %s is not masked", rr.Dst)
		}
		probes.NotrackMissing([]probes.Backend{{Rules: []probes.RawRule{rr}}}, []netip.Addr{cache})
	})
}
