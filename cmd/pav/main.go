// Command pav is PaV's single binary: the controller, the node plugin, and the
// offline authoring tools. Each subcommand lives in its own file and registers
// itself on rootCmd from an init function.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	cliflag "k8s.io/component-base/cli/flag"
)

// kubeletDirFlagHelp describes --kubelet-dir, which the controller and the
// node plugin must agree on: the controller puts its pods' /pav directories
// under it, the node plugin reads them there and serves its sockets there.
const kubeletDirFlagHelp = "kubelet's root directory on the nodes (its --root-dir), the same for the controller and the node plugin: PaV's pods keep /pav under it, and the node plugin's sockets go there"

var rootCmd = &cobra.Command{
	Use:           "pav",
	Short:         "PaV (Pods-as-Volumes): volume provisioners written as pod templates",
	SilenceUsage:  true,
	SilenceErrors: true,
}

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
