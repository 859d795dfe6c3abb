package main

// pod.go: the resolv.conf a pod gets from kubelet's own pod DNS configurer
// (pkg/kubelet/network/dns, Configurer.GetPodDNS), fed what kubelet feeds it (pkg/kubelet/kubelet.go,
// NewMainKubelet: dns.NewConfigurer(..., clusterDNS, kubeCfg.ClusterDomain, kubeCfg.ResolverConfig)),
// the values of an effective KubeletConfiguration. The configurer reads the resolvConf file itself
// (os.Open of the path), so this runs chrooted in the node's tree.
//
// The output is the DNS configuration kubelet hands the container runtime, one line per keyword as a
// runtime writes it into the pod's /etc/resolv.conf: "nameserver ADDR" per server, then
// "search D1 D2 ...", then "options O1 O2 ..." (sorted: the configurer merges options in a map).

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/kubernetes/pkg/kubelet/network/dns"
)

func pod(args []string) error {
	fs := flag.NewFlagSet("pod", flag.ContinueOnError)
	resolvConf := fs.String("resolv-conf", "/etc/resolv.conf", "kubelet's resolvConf (empty as kubelet allows)")
	clusterDNS := fs.String("cluster-dns", "", "kubelet's clusterDNS, comma-separated")
	clusterDomain := fs.String("cluster-domain", "", "kubelet's clusterDomain")
	policy := fs.String("policy", string(v1.DNSDefault), "the pod's dnsPolicy: Default, ClusterFirst, ClusterFirstWithHostNet or None")
	namespace := fs.String("namespace", "default", "the pod's namespace (ClusterFirst's search list names it)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var servers []net.IP
	for _, s := range strings.Split(*clusterDNS, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		ip := net.ParseIP(s)
		if ip == nil {
			// kubelet's validation refuses such a configuration before NewMainKubelet would skip it.
			return fmt.Errorf("invalid clusterDNS address %q", s)
		}
		servers = append(servers, ip)
	}
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "judge", Namespace: *namespace},
		Spec:       v1.PodSpec{DNSPolicy: v1.DNSPolicy(*policy)},
	}
	nodeRef := &v1.ObjectReference{Kind: "Node", Name: "judge"}
	c := dns.NewConfigurer(record.NewFakeRecorder(16), nodeRef, nil, servers, *clusterDomain, *resolvConf)
	cfg, err := c.GetPodDNS(context.Background(), p)
	if err != nil {
		return fmt.Errorf("pod dns: %w", err)
	}
	var b strings.Builder
	for _, s := range cfg.Servers {
		fmt.Fprintf(&b, "nameserver %s\n", s)
	}
	if len(cfg.Searches) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(cfg.Searches, " "))
	}
	if len(cfg.Options) > 0 {
		opts := append([]string(nil), cfg.Options...)
		sort.Strings(opts)
		fmt.Fprintf(&b, "options %s\n", strings.Join(opts, " "))
	}
	_, err = os.Stdout.WriteString(b.String())
	return err
}
