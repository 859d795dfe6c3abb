// Package live is the running node as the self-check's live checks reach it: New fills probes.Host's
// seams with the real thing. The nodelocaldns interface, local routes and policy rules come over
// rtnetlink (internal/hostnet); the raw-table NOTRACK rules from nf_tables over netlink and from
// iptables-legacy-save; the DNS probes go out through miekg/dns; the cache's process, the node's
// other DNS servers and a process's start come from /proc, with their Corefiles and resolv.conf
// files read through each process's own root (proc.go); the pod network namespaces and the probes
// sent from inside them come from podnet; the reboot baseline is kept through the node's store.
// probes judges what these read and imports none of this.
//
// Its tests run `nodedns check` on nodes built in namespaces with a real CoreDNS, iptables and nft
// (live_test.go, per suite where the tools encode rules their own way), and the /proc readers
// against fake /proc trees (proc_test.go).
package live

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/nftables"
	"github.com/miekg/dns"
	"github.com/nodedns/nodedns/internal/hostnet"
	"github.com/nodedns/nodedns/internal/live/podnet"
	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/probes"
	"github.com/nodedns/nodedns/probes/podprobe"
)

// New returns the real node's live seams. timeout bounds every DNS query (config probes.timeout).
func New(timeout time.Duration, state probes.StateStore) *probes.Host {
	return &probes.Host{
		Net:            hostnet.New(),
		Firewall:       ReadFirewall,
		DNS:            DNSClient{Timeout: timeout},
		DNSPort:        53,
		FindCache:      func(addrs []netip.Addr) *probes.CacheProcess { return FindCacheProcess(procRoot, addrs) },
		FindDNSServers: func() []*probes.CacheProcess { return FindDNSServers(procRoot) },
		ProcStat:       readProcStat,
		BootID:         readBootID,
		Uptime:         readUptime,
		State:          state,
		Random:         randomLabel,
		Pods: func(ctx context.Context, log *slog.Logger) ([]podprobe.Pod, error) {
			return podnet.Find(ctx, podnet.Options{Logger: log})
		},
		ProbePods: podnet.Probe,
		HostPIDNS: inInitialPIDNS,
	}
}

// procRoot is the proc filesystem the cache's process is found in.
const procRoot = "/proc"

// readProcStat reads /proc/PID/stat.
func readProcStat(pid int) ([]byte, error) {
	return nodefs.ReadKernel(filepath.Join(procRoot, strconv.Itoa(pid), "stat"), procKind)
}

// procPIDInitIno is the inode of the initial PID namespace (PROC_PID_INIT_INO in the kernel's
// include/linux/proc_ns.h, fixed since Linux 3.8): /proc/self/ns/pid links to pid:[4026531836]
// exactly when nodedns runs in the host's PID namespace.
const procPIDInitIno = 0xEFFFFFFC

func inInitialPIDNS() bool {
	l, err := os.Readlink("/proc/self/ns/pid")
	return err == nil && l == fmt.Sprintf("pid:[%d]", uint32(procPIDInitIno))
}

func readBootID() (string, error) {
	b, err := nodefs.ReadKernel("/proc/sys/kernel/random/boot_id", procKind)
	if err != nil {
		return "", fmt.Errorf("read boot id: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

func readUptime() (time.Duration, error) {
	b, err := nodefs.ReadKernel("/proc/uptime", procKind)
	if err != nil {
		return 0, fmt.Errorf("read uptime: %w", err)
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, fmt.Errorf("read uptime: empty /proc/uptime")
	}
	s, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0, fmt.Errorf("read uptime: %w", err)
	}
	return time.Duration(s * float64(time.Second)), nil
}

func randomLabel() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "nodedns-" + hex.EncodeToString(b[:])
}

// DNSClient is the real Exchanger: miekg/dns over UDP or TCP with a per-query timeout.
type DNSClient struct{ Timeout time.Duration }

// Exchange implements Exchanger.
func (c DNSClient) Exchange(ctx context.Context, m *dns.Msg, network string, server netip.AddrPort) (*dns.Msg, error) {
	cl := &dns.Client{Net: network, Timeout: c.Timeout, UDPSize: dns.DefaultMsgSize}
	r, _, err := cl.ExchangeContext(ctx, m, server.String())
	if err != nil {
		return nil, fmt.Errorf("query %s %s over %s at %s: %w", m.Question[0].Name, dns.TypeToString[m.Question[0].Qtype], network, server, err)
	}
	return r, nil
}

// ReadFirewall reads the raw-table rules of both backends: nf_tables over netlink (iptables-nft and
// native nft rules) and iptables-legacy's tables.
func ReadFirewall(ctx context.Context) []probes.Backend {
	return []probes.Backend{readNftables(), readLegacy(ctx)}
}

// nfConntrackPriority is NF_IP_PRI_CONNTRACK: a notrack must run at a lower (earlier) priority to
// take effect, as the raw table's -300 does.
const nfConntrackPriority = -200

func readNftables() probes.Backend {
	b := probes.Backend{Name: "nf_tables"}
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

// readLegacy reads iptables-legacy's raw tables with iptables-legacy-save. Legacy tables live in the
// kernel as x_tables blobs read with getsockopt(IPT_SO_GET_ENTRIES), whose layout is per match and
// target revision; iptables-legacy-save is the one maintained decoder of them (no Go library
// reads them). The table list in /proc/net/ip_tables_names (per network namespace) is read first,
// so a node without a legacy raw table runs no command and loads no module.
func readLegacy(ctx context.Context) probes.Backend {
	b := probes.Backend{Name: "iptables-legacy"}
	for _, v := range []struct {
		family int
		names  string
		cmd    string
	}{{4, "/proc/net/ip_tables_names", "iptables-legacy-save"}, {6, "/proc/net/ip6_tables_names", "ip6tables-legacy-save"}} {
		names, err := nodefs.ReadKernel(v.names, procKind)
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
		rs, err := probes.ParseIptablesSave(v.family, out)
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
