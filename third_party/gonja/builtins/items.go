package builtins

import "github.com/nikolalohinski/gonja/v2/exec"

// itemFilters walk the items of their input or build a list of them: each
// is bounded by exec.Evaluator.CheckItems (PaV; a 4 MiB string is 4 million
// items, which took seconds to build, past every limit).
var itemFilters = []string{"batch", "dictsort", "groupby", "items", "join", "list", "map", "max", "min",
	"reject", "rejectattr", "reverse", "select", "selectattr", "slice", "sort", "sum", "unique"}

// boundItemFilters wraps the filters of itemFilters in Filters.
func boundItemFilters() {
	for _, name := range itemFilters {
		f, ok := Filters.Get(name)
		if !ok {
			panic("no filter " + name)
		}
		must(Filters.Replace(name, func(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
			if stop := e.CheckItems(name, in); stop != nil {
				return stop
			}
			return f(e, in, params)
		}))
	}
}
