// Package kubelet finds the configuration file kubelet really reads and reads what nodedns needs
// from it (docs/contract.md "Kubelet's config"): resolvConf, clusterDNS, clusterDomain.
//
// What lives here, one file per way kubelet is found:
//   - process.go: the running kubelet's own --config and --config-dir, from /proc/PID/cmdline
//     (step 1; the live node's edges call FindProcess);
//   - unit.go: kubelet's systemd unit, its drop-ins and the EnvironmentFile= files they name, as
//     systemd would start kubelet (step 2), on top of the unit-file and env-file parsers of
//     package systemd, which stay generic;
//   - find.go: the order of the steps, the known paths kubespray and kubeadm write (step 3) and the
//     watches that declare every file the search reads;
//   - flags.go: kubelet's --config, --config-dir and --resolv-conf as its flag set parses them;
//   - config.go: the KubeletConfiguration file, its --config-dir drop-ins (walked as kubelet walks
//     them) and --resolv-conf over both;
//   - rancher.go: RKE2 and k3s, whose units name no kubelet config: the resolv.conf they choose
//     and pass to kubelet (their config.yaml and config.yaml.d, kubelet-arg, *_RESOLV_CONF, their
//     test of /etc/resolv.conf), from the files or from a running k3s (Complete);
//   - hint.go: how to point kubelet at a file, in each shape's own language.
//
// Another way to start kubelet is a new file here, a unit in Units or a step in Find, and its paths
// in Watches. The package reads through a nodefs.Reader (and /proc through nodefs.ReadKernel) and
// never writes.
package kubelet
