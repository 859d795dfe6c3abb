// Package kubelet finds the configuration file kubelet really reads and reads what nodedns needs
// from it (docs/contract.md "Kubelet's config"): resolvConf, clusterDNS, clusterDomain.
//
// What lives here, one file per way kubelet is found:
//   - process.go: the running kubelet's own --config and --config-dir, from /proc/PID/cmdline
//     (step 1; the live node's edges call FindProcess), of a process trust.go verifies as root's
//     kubelet from what the kernel says of it (the paths it names are read only when root's too:
//     Load);
//   - unit.go: kubelet's systemd unit, its drop-ins and the EnvironmentFile= files they name, as
//     systemd would start kubelet (step 2), on top of the unit-file and env-file parsers of
//     package systemd, which stay generic;
//   - find.go: the order of the steps, the known paths kubespray and kubeadm write (step 3) and the
//     watches that declare every file the search reads;
//   - flags.go: kubelet's --config, --config-dir and --resolv-conf as its flag set parses them;
//   - config.go: the KubeletConfiguration file, its --config-dir drop-ins (walked as kubelet walks
//     them) and --resolv-conf over both;
//   - rancher.go: RKE2 and k3s, whose units name no kubelet config: the resolv.conf they choose
//     and hand kubelet (their config.yaml and the config.yaml.d drop-ins they read, kubelet-arg in
//     the order they pass it, a drop-in of their kubelet --config-dir after their own,
//     *_RESOLV_CONF, their test of /etc/resolv.conf), from the files or from a running k3s
//     (Complete);
//   - hint.go: how to point kubelet at a file, in each shape's own language;
//   - manage.go: kubelet.manage (docs/contract.md "kubelet.manage"): the one place whose value
//     wins, the edit that points it at nodedns's file or why it cannot, and Writes, the paths it
//     may change; edit.go: those edits as bytes in, bytes out (a YAML scalar, an environment
//     file's variable or --resolv-conf), each checked by reading the result again (fuzzed).
//
// Another way to start kubelet is a new file here, a unit in Units or a step in Find, and its paths
// in Watches (and, for kubelet.manage, in Writes). The package reads through a nodefs.Reader (and
// /proc through nodefs.ReadKernel) and never writes: policy plans kubelet.manage's edit as a change.
package kubelet
