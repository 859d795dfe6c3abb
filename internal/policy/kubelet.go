package policy

import (
	"fmt"
	"slices"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/netplan"
)

// blockOnKubelet keeps every target unchanged while kubelet's config cannot be read or parsed
// (docs/contract.md "Kubelet's config" and invariant 5): its clusterDNS decides the loop addresses
// and its clusterDomain the cluster search domains, so every file and setting nodedns writes
// depends on it. A hook or a kubelet file written from a guess could leave out the very cache
// address the broken file lists. The targets a plan would change, and those whose content always
// derives from it (kubelet's resolv.conf, an edited /etc/resolv.conf, resolved's drop-in, the dhclient
// hook, netplan's file), are blocked with the file's own error, whether or not they would change.
func (p *Plan) blockOnKubelet(s *node.Snapshot, cfg config.Config) {
	err := s.Kubelet.Err
	if err == nil {
		return
	}
	reason := fmt.Sprintf("kubelet's config %s cannot be used (%v): its clusterDNS and clusterDomain decide the loop addresses and cluster search domains, so nothing that depends on them is changed; fix the file", s.Kubelet.Path, err)
	var targets []string
	add := func(t string) {
		if t != "" && !slices.Contains(targets, t) {
			targets = append(targets, t)
		}
	}
	add(cfg.Kubelet.ResolvConf)
	for _, c := range p.Changes {
		add(c.Path)
	}
	for _, a := range p.Actions {
		add(a.Target())
	}
	if s.ResolvConf.Exists && !s.ResolvConfManagedByResolved() {
		add(node.EtcResolvConf) // edited in place: which nameserver loops is the question
	}
	if s.ResolvedInUse() {
		add(node.ResolvedDropIn)
	}
	if s.DhclientConf {
		add(node.DhclientHook)
	}
	if NetplanMode(cfg, s) != config.NetplanOff {
		add(netplan.NodednsFile)
	}
	for _, b := range p.Blocked {
		add(b.Target)
	}
	p.Changes, p.Actions = nil, nil
	blocked := make([]Blocked, 0, len(targets))
	for _, t := range targets {
		blocked = append(blocked, Blocked{Target: t, Reason: reason})
	}
	p.Blocked = blocked
}
