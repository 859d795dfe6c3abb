package node

// kubeletconfig.go puts kubelet's config into the snapshot: package kubelet finds it from the
// node's files (docs/contract.md "Kubelet's config") and reads it; the running kubelet's own command
// line comes first on a live node, where the edges read it and hand it in through UseKubeletConfig.

import (
	"errors"
	"path"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/kubelet"
	"github.com/nodedns/nodedns/internal/nodefs"
)

// readKubelet finds kubelet's config from the node's files and reads it.
func (s *Snapshot) readKubelet(r nodefs.Reader, cfg config.Config) {
	found, in, ps := kubelet.Find(r, cfg)
	for _, p := range ps {
		s.problem(SourceUnit, p.Path, p.Line, p.Msg)
	}
	s.kubeletInputs = in
	s.loadKubelet(r, found)
	s.KubeletFiles = s.Kubelet
	s.readKubeletManage(r, cfg)
}

// loadKubelet reads the config found and its --config-dir drop-ins; a config that cannot be used is
// a problem with its file and line.
func (s *Snapshot) loadKubelet(r nodefs.Reader, found kubelet.Found) {
	s.Kubelet = kubelet.Load(r, found)
	err := s.Kubelet.Err
	if err == nil {
		return
	}
	p, line, msg := s.Kubelet.Path, 0, err.Error()
	var ke *kubelet.Error
	if errors.As(err, &ke) {
		p, line, msg = ke.Path, ke.Line, ke.Msg
	}
	s.problem(SourceKubelet, p, line, msg)
}

// UseKubeletConfig replaces the kubelet config Observe found in the node's files by the one found
// (the running kubelet's --config, read by the live node's edges), reading it and the resolv.conf it
// names through r, the reader Observe read the node with. Problems of the config read before are
// dropped with it.
func (s *Snapshot) UseKubeletConfig(r nodefs.Reader, found kubelet.Found) {
	if found.Unit == "" && found.Shape == s.Kubelet.Shape {
		// The process does not say which unit started it; the files do.
		found.Unit, found.Kubeadm = s.Kubelet.Unit, s.Kubelet.Kubeadm
	}
	kept := s.Problems[:0]
	for _, p := range s.Problems {
		if p.Source != SourceKubelet {
			kept = append(kept, p)
		}
	}
	s.Problems = kept
	before := s.Kubelet.ResolvConf
	s.loadKubelet(r, found)
	if s.Kubelet.ResolvConf == before {
		return
	}
	s.KubeletResolv = ResolvFile{}
	if s.Kubelet.ResolvConf == "" {
		return
	}
	for _, rf := range []ResolvFile{s.ResolvConf, s.ResolvedResolv, s.ResolvedStub, s.NodednsResolv} {
		if rf.Path == path.Clean(s.Kubelet.ResolvConf) {
			s.KubeletResolv = rf
			return
		}
	}
	s.KubeletResolv = s.readResolv(r, s.Kubelet.ResolvConf)
}

// KubeletSources are the node paths (files and directories) that decided which kubelet config was
// read, for the daemon's watches: the kubelet unit and drop-ins, their environment files, the
// config and its --config-dir.
func (s *Snapshot) KubeletSources() (paths, dirs []string) {
	return s.kubeletInputs.Sources(s.Kubelet)
}
