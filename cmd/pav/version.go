package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// Set at build time with -ldflags -X (hack/version.sh): version is PaV's
// release; commit and dirty ("true" or "false") stand in for the Go toolchain's
// build info, which has no VCS information for a build in a git worktree or
// with -buildvcs=false.
var (
	version = "dev"
	commit  = ""
	dirty   = ""
)

// buildInfo is what `pav version` reports.
type buildInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Dirty     bool   `json:"dirty"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// readBuildInfo reports the stamped version with the commit and dirty flag
// the Go toolchain recorded (vcs.revision, vcs.modified), else the stamped
// ones; with neither (go run, go test) the commit is "unknown".
func readBuildInfo(version, commit, dirty string, bi *debug.BuildInfo, ok bool) buildInfo {
	info := buildInfo{Version: version, Commit: commit, Dirty: dirty == "true", GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Commit = s.Value
			case "vcs.modified":
				info.Dirty = s.Value == "true"
			}
		}
	}
	if info.Commit == "" {
		info.Commit = "unknown"
	}
	return info
}

func currentBuildInfo() buildInfo {
	bi, ok := debug.ReadBuildInfo()
	return readBuildInfo(version, commit, dirty, bi, ok)
}

func init() { rootCmd.AddCommand(newVersionCmd()) }

func newVersionCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print PaV's version, commit, whether the tree was modified, and Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			info := currentBuildInfo()
			w := cmd.OutOrStdout()
			switch output {
			case "":
				tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
				fmt.Fprintf(tw, "version:\t%s\ncommit:\t%s\ndirty:\t%t\ngo:\t%s\nplatform:\t%s\n", info.Version, info.Commit, info.Dirty, info.GoVersion, info.Platform)
				return tw.Flush()
			case "json":
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(info)
			default:
				return fmt.Errorf("--output %q: want json, or nothing for text", output)
			}
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json (default: text)")
	return cmd
}
