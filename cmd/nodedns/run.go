package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newRunCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "run",
		Short: "Run the daemon: apply, then watch and re-apply (not implemented yet)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return &exitError{1, errors.New("run: not implemented yet (use `nodedns apply` from a timer until the daemon lands)")}
		},
	}
}
