// Package cmdtest runs a pav command in-process in a unit test.
package cmdtest

import (
	"bytes"
	"testing"

	"github.com/spf13/cobra"
)

// Run executes cmd with args and returns what it wrote to its standard
// output and error.
func Run(t testing.TB, cmd *cobra.Command, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err = cmd.Execute()
	return out.String(), errOut.String(), err
}
