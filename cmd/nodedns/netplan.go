package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newNetplanCmd(g *globals) *cobra.Command {
	nc := &cobra.Command{Use: "netplan", Short: "netplan integration", Args: cobra.NoArgs}
	pin := &cobra.Command{
		Use:   "pin",
		Short: "Pin the current DHCP lease as static netplan config (not implemented yet)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return &exitError{1, errors.New("netplan pin: not implemented yet")}
		},
	}
	pin.Flags().Bool("dry-run", false, "print the file and a diff instead of writing it")
	nc.AddCommand(pin)
	return nc
}
