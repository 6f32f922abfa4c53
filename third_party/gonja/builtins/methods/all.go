// Package methods provides built-in method implementations for template types.
package methods

import "github.com/nikolalohinski/gonja/v2/exec"

var All = exec.Methods{
	Bool:  boolMethods,
	Str:   strMethods.With(pyStrMethods),
	Int:   intMethods,
	Float: floatMethods,
	Dict:  dictMethods.With(pyDictMethods),
	List:  listMethods.With(pyListMethods),
}
