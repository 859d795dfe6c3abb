package kubeletjudge

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/nodedns/nodedns/internal/nodefs"
	"github.com/nodedns/nodedns/systemd"
)

// FromUnit is how systemd starts unit's command on the tree under root: the arguments of its
// ExecStart= after the program, with the environment of Environment= and the EnvironmentFile=s
// expanded, and that environment (NAME=value, for RKE2 and k3s, which read variables of it).
//
// The reader is nodedns's own systemd package (FindUnit, ParseServiceUnit, ParseEnvFile, MergeEnv,
// ExpandArgv), which systemd/unit_pid1_test.go checks against systemd 252 and 262 as PID 1, and
// TestKubeletEnvFilesUnderSystemd (cmd/nodedns) against systemd for the env files of these tests:
// the judge of what kubelet then makes of the arguments is the real kubelet.
func FromUnit(root, unit string) (Start, []string, error) {
	r := nodefs.NewReader(root)
	file, dropIns, errs := systemd.FindUnit(r, unit)
	if file == "" {
		return Start{}, nil, fmt.Errorf("no unit %s under %s", unit, root)
	}
	if len(errs) > 0 {
		return Start{}, nil, errors.Join(errs...)
	}
	var ufs []systemd.UnitFile
	for _, p := range append([]string{file}, dropIns...) {
		data, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			return Start{}, nil, err
		}
		ufs = append(ufs, systemd.UnitFile{Path: p, Data: data})
	}
	u := systemd.ParseServiceUnit(unit, ufs)
	if u.Err != nil {
		return Start{}, nil, u.Err
	}
	if len(u.ExecStart) != 1 {
		return Start{}, nil, fmt.Errorf("%s has %d ExecStart= commands", unit, len(u.ExecStart))
	}
	lists := [][]systemd.EnvVar{u.Environment}
	for _, ef := range u.EnvironmentFiles {
		// systemd expands a glob in EnvironmentFile= when the command starts (exec_context_load_environment).
		matches, _ := filepath.Glob(filepath.Join(root, ef.Path))
		if len(matches) == 0 {
			if ef.Optional {
				continue
			}
			return Start{}, nil, fmt.Errorf("%s: EnvironmentFile=%s does not exist: systemd does not start %s", ef.Source, ef.Path, unit)
		}
		for _, m := range matches {
			data, err := os.ReadFile(m)
			if errors.Is(err, fs.ErrNotExist) && ef.Optional {
				continue
			}
			if err != nil {
				return Start{}, nil, err
			}
			vars, _, err := systemd.ParseEnvFile(path.Join("/", strings.TrimPrefix(m, root)), data)
			if err != nil {
				return Start{}, nil, err
			}
			lists = append(lists, vars)
		}
	}
	env := systemd.MergeEnv(lists...)
	var args []string
	for _, a := range systemd.ExpandArgv(u.ExecStart[0].Argv, env)[1:] {
		args = append(args, a.Value)
	}
	var envs []string
	for _, v := range env {
		envs = append(envs, v.Name+"="+v.Value)
	}
	return Start{Args: args, How: "the ExecStart= of " + unit + " as nodedns's systemd package expands it"}, envs, nil
}
