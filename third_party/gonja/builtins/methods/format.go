package methods

import (
	"github.com/nikolalohinski/gonja/v2/exec"
)

// formatMethod is Python's str.format, or Markup's for a Markup (PaV:
// exec.PyStrFormat; upstream's pystring lacked conversions, grouping and
// most of the spec language).
func formatMethod(s string, self *exec.Value, a *exec.VarArgs) (any, error) {
	return exec.PyStrFormat(s, a.Args, a.KwArgs, a.Limits, self.Safe)
}
