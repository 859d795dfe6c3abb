package kubelet

import (
	"fmt"
	"strings"
)

// Point says how an operator points kubelet at file in the shape's own language: where is the file
// to edit, step what to do there (for a pending step, "there" is where). On a kubespray or plain
// node it is resolvConf in kubelet's config; with a --config-dir, a drop-in there (it is merged over
// the config); with --resolv-conf, that flag (it wins over both); on kubeadm, kubeadm's
// KubeletConfiguration (its unit has 10-kubeadm.conf); on RKE2 and k3s, a kubelet-arg in their config.yaml.
func Point(k Config, file string) (where, step string) {
	restart := "restart kubelet"
	switch k.Shape {
	case ShapeRKE2, ShapeK3s:
		restart = "restart " + k.Shape
		if k.Unit != "" {
			restart = "restart " + k.Unit
		}
		where = k.RancherConfig
		if where == "" {
			where = RancherConfig(k.Shape)
		}
		return where, fmt.Sprintf("add `kubelet-arg: [resolv-conf=%s]` there (%s passes it to kubelet over its own choice), then %s", file, k.Shape, restart)
	}
	if strings.HasPrefix(k.ResolvConfFrom, "--resolv-conf") {
		return "kubelet's --resolv-conf", fmt.Sprintf("set --resolv-conf=%s where it is set (%s; the flag wins over kubelet's config), then %s", file, k.ResolvConfFrom, restart)
	}
	where = k.Path
	if where == "" {
		where = "kubelet's config"
	}
	switch {
	case k.ConfigDir != "":
		return k.ConfigDir, fmt.Sprintf("set resolvConf: %s in a drop-in there that sorts after every other (kubelet merges them over %s; resolvConf is set now by %s), then %s", file, where, orNone(k.ResolvConfFrom), restart)
	case k.Kubeadm:
		return where, fmt.Sprintf("set resolvConf: %s there and in kubeadm's KubeletConfiguration (kubeadm init/join/upgrade --config rewrites this file), then %s", file, restart)
	}
	return where, fmt.Sprintf("set resolvConf: %s there (kubespray: kube_resolv_conf), then %s", file, restart)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
