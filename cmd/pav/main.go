// Command pav is PaV's single binary: the controller, the node plugin, and the
// offline authoring tools. Each subcommand lives in its own file and registers
// itself on rootCmd from an init function; the authoring tools' flags and
// logic are package authoring's.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	cliflag "k8s.io/component-base/cli/flag"

	"github.com/albertofaria/pav/authoring"
)

var rootCmd = &cobra.Command{
	Use:           "pav",
	Short:         "PaV (Pods-as-Volumes): volume provisioners written as pod templates",
	SilenceUsage:  true,
	SilenceErrors: true,
}

func init() { rootCmd.AddCommand(authoring.Commands()...) }

func main() {
	tuneGarbageCollector()
	asKubectlPlugin(rootCmd, os.Args[0])
	// Every flag is spelt with dashes; underscores are read as dashes.
	rootCmd.SetGlobalNormalizationFunc(cliflag.WordSepNormalizeFunc)
	if err := rootCmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
