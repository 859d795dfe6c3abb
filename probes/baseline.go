package probes

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/policy"
)

// StatePath is the node path of the reboot baseline (docs/contract.md "Where things live": /var/lib/nodedns).
const StatePath = config.BaselineFile

// StateStore loads and saves the reboot baseline (internal/live's FileState keeps it at StatePath).
type StateStore interface {
	// Load returns the file's bytes, or an error wrapping fs.ErrNotExist when there is none.
	Load() ([]byte, error)
	Save(data []byte) error
}

// Baseline is what the node-local cache needed at the last boot where every check passed: the
// interface, its addresses, its local-table routes and the raw-table NOTRACK rules. None of these is
// persistent (node-cache recreates them at start), so after a reboot each must come back.
type Baseline struct {
	Version   int       `json:"version"`
	BootID    string    `json:"bootID"`
	Written   time.Time `json:"written"`
	Interface string    `json:"interface"`
	LinkType  string    `json:"linkType,omitempty"`
	Addresses []string  `json:"addresses"`
	Routes    []string  `json:"routes"`
	Rules     []string  `json:"rules"`
}

// ParseBaseline reads a state file; unknown fields are ignored, a missing boot id is an error.
func ParseBaseline(data []byte) (Baseline, error) {
	var b Baseline
	if err := json.Unmarshal(data, &b); err != nil {
		return b, fmt.Errorf("%s: %w", StatePath, err)
	}
	if b.BootID == "" {
		return b, fmt.Errorf("%s: no bootID", StatePath)
	}
	// A baseline written before kernel-made addresses were left out may list the interface's old
	// fe80:: and its local route, which no boot brings back (currentBaseline).
	b.Addresses = slices.DeleteFunc(b.Addresses, func(s string) bool {
		p, err := netip.ParsePrefix(s)
		return err == nil && policy.KernelMade(p.Addr())
	})
	b.Routes = slices.DeleteFunc(b.Routes, func(s string) bool {
		f := strings.Fields(s) // local PREFIX dev NAME table local
		if len(f) < 2 {
			return false
		}
		p, err := netip.ParsePrefix(f[1])
		return err == nil && policy.KernelMade(p.Addr())
	})
	return b, nil
}

func ruleID(r RawRule) string {
	p := "any"
	switch r.Proto {
	case 17:
		p = "udp"
	case 6:
		p = "tcp"
	}
	return fmt.Sprintf("%s %s -d %s --dport %d NOTRACK", r.Chain, p, r.Dst, r.DPort)
}

// currentBaseline is the baseline the node would record now (without boot id and time).
func (env *Env) currentBaseline(ctx context.Context) Baseline {
	b := Baseline{Version: 1, Addresses: []string{}, Routes: []string{}, Rules: []string{}}
	nv := env.Host.netState(env.Config.NodeLocalDNS.Interface)
	if nv.link == nil {
		return b
	}
	b.Interface, b.LinkType = nv.link.Name, nv.link.Type
	for _, p := range nv.link.Addrs {
		// The kernel's fe80:: follows the interface's MAC, which a bridge or dummy gets afresh at
		// every boot: not something the next boot must bring back (nor a cache address).
		if !policy.KernelMade(p.Addr()) {
			b.Addresses = append(b.Addresses, p.String())
		}
	}
	for _, r := range nv.routes {
		if r.LinkIndex == nv.link.Index && !policy.KernelMade(r.Dst.Addr()) {
			b.Routes = append(b.Routes, "local "+r.Dst.String()+" dev "+nv.link.Name+" table local")
		}
	}
	for _, bk := range env.Host.firewall(ctx) {
		for _, r := range bk.Rules {
			if !r.Notrack || r.Other || !slices.ContainsFunc(env.Plan.Facts.CacheAddrs, func(a netip.Addr) bool { return r.Dst.IsValid() && r.Dst.Contains(a) }) {
				continue
			}
			if id := ruleID(r); !slices.Contains(b.Rules, id) {
				b.Rules = append(b.Rules, id)
			}
		}
	}
	slices.Sort(b.Addresses)
	slices.Sort(b.Routes)
	slices.Sort(b.Rules)
	return b
}

// SaveBaseline records the node's current baseline when the report is ok, so the next boot can be
// compared with it. It writes only when something changed (a new boot or a new address), not on
// every check.
func SaveBaseline(ctx context.Context, env *Env, rep Report) error {
	if env.Host == nil || env.Host.State == nil || rep.Status != OK {
		return nil
	}
	boot, err := env.Host.BootID()
	if err != nil {
		return err
	}
	b := env.currentBaseline(ctx)
	if b.Interface == "" {
		return nil
	}
	b.BootID = boot
	if data, err := env.Host.State.Load(); err == nil {
		if old, err := ParseBaseline(data); err == nil {
			b.Written = old.Written
			if sameBaseline(old, b) {
				return nil
			}
		}
	}
	b.Written = time.Now().UTC().Truncate(time.Second)
	data, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return fmt.Errorf("save reboot baseline: %w", err)
	}
	if err := env.Host.State.Save(append(data, '\n')); err != nil {
		return fmt.Errorf("save reboot baseline: %w", err)
	}
	return nil
}

func sameBaseline(a, b Baseline) bool {
	return a.Version == b.Version && a.BootID == b.BootID && a.Interface == b.Interface && a.LinkType == b.LinkType &&
		slices.Equal(a.Addresses, b.Addresses) && slices.Equal(a.Routes, b.Routes) && slices.Equal(a.Rules, b.Rules)
}
