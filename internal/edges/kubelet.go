package edges

import (
	"context"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/kubelet"
	"github.com/nodedns/nodedns/internal/node"
	"github.com/nodedns/nodedns/internal/nodefs"
)

// kubeletProcess is step 1 of docs/contract.md "Kubelet's config": the running kubelet's own
// --config, from /proc/PID/cmdline (kubelet.FindProcess). It beats whatever the unit files say (a unit edited without a
// restart, a kubelet started by hand or by another supervisor) and is used only on the live node.
type kubeletProcess struct {
	cfg   config.Config
	proc  string        // "/proc"; a fake tree in tests
	files nodefs.Reader // the node's files, to read the config found
}

func (kubeletProcess) Name() string { return "kubelet process" }

func (k kubeletProcess) Observe(_ context.Context, s *node.Snapshot) error {
	if k.cfg.Kubelet.Config != "" && k.cfg.Kubelet.Config != config.KubeletConfigAuto {
		return nil // a path in the config names the file directly
	}
	found, ok, err := kubelet.FindProcess(k.proc)
	if err != nil {
		return err
	}
	if ok {
		s.UseKubeletConfig(k.files, kubelet.Complete(k.files, found))
	}
	return nil
}
