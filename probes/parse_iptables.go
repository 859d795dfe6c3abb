package probes

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

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
