// Package authoring is PaV's offline tools for writing a PavProvisioner:
// `pav validate` (the webhook's checks and a trial render of every phase,
// each problem at its position in the file) and `pav render` (one phase
// evaluated with the context PaV would give it, or the pods PaV would
// create). Both run the processes' own rules (templating, protocol,
// controller), so that what they show is what PaV does.
package authoring

import "github.com/spf13/cobra"

// Commands are `pav validate` and `pav render`, with their flags.
func Commands() []*cobra.Command {
	return []*cobra.Command{newValidateCmd(), newRenderCmd()}
}
