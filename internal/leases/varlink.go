package leases

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// NetworkdVarlinkSocket is systemd-networkd's varlink socket (interface io.systemd.Network). networkd
// 262 keeps no lease file (/run/systemd/netif/leases/ stays empty and the link state has no
// DHCP_LEASE=; networkd 257 still writes both); its DHCPv4 lease is in the reply to
// io.systemd.Network.Describe, under Interfaces[].DHCPv4Client.Lease (what `networkctl --json=short
// status LINK` shows as .DHCPv4Client.Lease). Measured with Debian testing's networkd 262.
const NetworkdVarlinkSocket = "/run/systemd/netif/io.systemd.Network"

// NetworkdDescribeMethod is the method whose reply ParseNetworkdDescribe reads.
const NetworkdDescribeMethod = "io.systemd.Network.Describe"

// describeReply is the part of io.systemd.Network.Describe's reply nodedns reads. networkd 262 puts
// the lease there as the DHCP message the server sent: the header's yiaddr and the options as
// hex strings, each with its tag.
type describeReply struct {
	Interfaces []struct {
		Index        int    `json:"Index"`
		Name         string `json:"Name"`
		DHCPv4Client *struct {
			Lease *struct {
				Message *struct {
					Yiaddr  string `json:"yiaddr"`
					Options []struct {
						Tag  int    `json:"tag"`
						Data string `json:"data"`
					} `json:"options"`
				} `json:"Message"`
			} `json:"Lease"`
		} `json:"DHCPv4Client"`
	} `json:"Interfaces"`
}

// DHCP option tags read from the lease message (RFC 2132, RFC 3397).
const (
	optSubnetMask   = 1
	optRouter       = 3
	optDNS          = 6
	optDomainName   = 15
	optMTU          = 26
	optDomainSearch = 119
)

// ParseNetworkdDescribe reads the DHCPv4 leases out of the parameters of networkd's
// io.systemd.Network.Describe reply (pure: bytes in, leases out). Each lease carries Path
// NetworkdVarlinkSocket, Client Networkd, its link's index and name, and no expiry (networkd holds
// it while it is in the reply). A link whose lease cannot be read is an error naming the link; the
// other links' leases are still returned.
func ParseNetworkdDescribe(params []byte) ([]Lease, error) {
	var rep describeReply
	if err := json.Unmarshal(params, &rep); err != nil {
		return nil, fmt.Errorf("%s: %s reply: %w", NetworkdVarlinkSocket, NetworkdDescribeMethod, err)
	}
	var out []Lease
	var errs []error
	for _, i := range rep.Interfaces {
		if i.DHCPv4Client == nil || i.DHCPv4Client.Lease == nil || i.DHCPv4Client.Lease.Message == nil {
			continue
		}
		m := i.DHCPv4Client.Lease.Message
		l := Lease{Path: NetworkdVarlinkSocket, Client: Networkd, Interface: i.Name, IfIndex: i.Index}
		err := func() error {
			addr, err := hexIPv4(m.Yiaddr)
			if err != nil {
				return fmt.Errorf("yiaddr: %w", err)
			}
			bits := 32
			var search []string
			for _, o := range m.Options {
				data, err := hex.DecodeString(o.Data)
				if err != nil {
					return fmt.Errorf("option %d: %w", o.Tag, err)
				}
				switch o.Tag {
				case optSubnetMask:
					if len(data) != 4 {
						return fmt.Errorf("option 1 (subnet mask): %d bytes", len(data))
					}
					b, ok := maskBits(netip.AddrFrom4([4]byte(data)))
					if !ok {
						return fmt.Errorf("option 1: non-contiguous subnet mask %s", netip.AddrFrom4([4]byte(data)))
					}
					bits = b
				case optRouter:
					if l.Routers, err = ipv4List(data); err != nil {
						return fmt.Errorf("option 3 (router): %w", err)
					}
				case optDNS:
					if l.DNS, err = ipv4List(data); err != nil {
						return fmt.Errorf("option 6 (DNS servers): %w", err)
					}
				case optDomainName:
					l.DomainName = strings.TrimRight(string(data), "\x00")
				case optMTU:
					if len(data) == 2 {
						l.MTU = int(binary.BigEndian.Uint16(data))
					}
				case optDomainSearch:
					if search, err = decodeDomainSearch(data); err != nil {
						return fmt.Errorf("option 119 (domain search): %w", err)
					}
				}
			}
			l.SearchDomains = search
			if addr.IsValid() && !addr.IsUnspecified() {
				l.Address = netip.PrefixFrom(addr, bits)
			}
			return nil
		}()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: DHCPv4 lease of %s (ifindex %d): %w", NetworkdVarlinkSocket, i.Name, i.Index, err))
			continue
		}
		out = append(out, l)
	}
	return out, errors.Join(errs...)
}

func hexIPv4(s string) (netip.Addr, error) {
	b, err := hex.DecodeString(s)
	if err != nil {
		return netip.Addr{}, err
	}
	if len(b) != 4 {
		return netip.Addr{}, fmt.Errorf("%d bytes, want 4", len(b))
	}
	return netip.AddrFrom4([4]byte(b)), nil
}

func ipv4List(b []byte) ([]netip.Addr, error) {
	if len(b) == 0 || len(b)%4 != 0 {
		return nil, fmt.Errorf("%d bytes, not a list of IPv4 addresses", len(b))
	}
	var out []netip.Addr
	for i := 0; i < len(b); i += 4 {
		out = append(out, netip.AddrFrom4([4]byte(b[i:i+4])))
	}
	return out, nil
}

// decodeDomainSearch decodes option 119 (RFC 3397): DNS names in wire format, one after another,
// with compression pointers into the option's own data. Names are returned with a trailing dot, as
// lease files write them.
func decodeDomainSearch(b []byte) ([]string, error) {
	var out []string
	for pos := 0; pos < len(b); {
		name, next, err := wireName(b, pos)
		if err != nil {
			return out, err
		}
		if name != "" {
			out = append(out, name)
		}
		pos = next
	}
	return out, nil
}

// wireName reads one wire-format name at pos; next is the offset after it in the uncompressed
// stream. Pointers must point backwards, so a loop cannot be followed forever.
func wireName(b []byte, pos int) (name string, next int, err error) {
	var labels []string
	next = -1
	limit := pos
	for {
		if pos >= len(b) {
			return "", 0, errors.New("name runs past the end")
		}
		n := int(b[pos])
		switch {
		case n == 0:
			if next < 0 {
				next = pos + 1
			}
			if len(labels) == 0 {
				return "", next, nil
			}
			name = strings.Join(labels, ".") + "."
			if len(name) > 254 {
				return "", 0, errors.New("name longer than 253 bytes")
			}
			return name, next, nil
		case n&0xc0 == 0xc0:
			if pos+1 >= len(b) {
				return "", 0, errors.New("truncated pointer")
			}
			ptr := (n&0x3f)<<8 | int(b[pos+1])
			if ptr >= limit {
				return "", 0, errors.New("pointer does not point backwards")
			}
			if next < 0 {
				next = pos + 2
			}
			pos, limit = ptr, ptr
		case n&0xc0 != 0:
			return "", 0, fmt.Errorf("bad label type %#x", n&0xc0)
		default:
			if pos+1+n > len(b) {
				return "", 0, errors.New("label runs past the end")
			}
			labels = append(labels, string(b[pos+1:pos+1+n]))
			pos += 1 + n
		}
	}
}
