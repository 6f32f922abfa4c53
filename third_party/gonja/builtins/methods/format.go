package methods

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/nikolalohinski/gonja/v2/builtins/methods/pystring"
	"github.com/nikolalohinski/gonja/v2/exec"
)

// formatMethod is str.format with the conversions !r, !s and !a, which
// pystring lacks (PaV): each converted argument (and a list, dict or none,
// which pystring cannot format) is replaced by its repr or str, passed by a
// name of its own, and automatic field numbers are made explicit so that
// the others keep theirs.
func formatMethod(s string, _ *exec.Value, a *exec.VarArgs) (any, error) {
	kwargs := map[string]any{}
	for k, v := range a.KwArgs {
		kwargs[k] = v.Interface()
	}
	var out strings.Builder
	auto := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c == '{' || c == '}') && i+1 < len(s) && s[i+1] == c {
			out.WriteString(s[i : i+2])
			i++
			continue
		}
		if c != '{' {
			out.WriteByte(c)
			continue
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return nil, fmt.Errorf("Single '{' encountered in format string")
		}
		field := s[i+1 : i+end]
		i += end
		name, rest := field, ""
		if j := strings.IndexAny(field, "!:"); j >= 0 {
			name, rest = field[:j], field[j:]
		}
		if name == "" {
			name = strconv.Itoa(auto)
			auto++
		}
		if !strings.HasPrefix(rest, "!") {
			// a list, dict or none formats as its str(), which pystring lacks
			if arg, err := formatArg(name, a); err == nil && (arg.IsList() || arg.IsDict() || arg.IsNil()) {
				rest = "!s" + rest
			}
		}
		if strings.HasPrefix(rest, "!") && len(rest) >= 2 {
			arg, err := formatArg(name, a)
			if err != nil {
				return nil, err
			}
			conv := exec.PyStr(arg)
			if rest[1] == 'r' || rest[1] == 'a' {
				conv = exec.PyRepr(arg)
			} else if rest[1] != 's' {
				return nil, fmt.Errorf("Unknown conversion specifier %c", rest[1])
			}
			name = fmt.Sprintf("pav_converted_%d", len(kwargs))
			kwargs[name] = conv
			rest = rest[2:]
		}
		out.WriteString("{" + name + rest + "}")
	}
	args := make([]any, len(a.Args))
	for i, v := range a.Args {
		args[i] = v.Interface()
	}
	return pystring.PyString(out.String()).Format(args, kwargs)
}

// formatArg is the argument a replacement field names: a position or a
// keyword.
func formatArg(name string, a *exec.VarArgs) (*exec.Value, error) {
	if n, err := strconv.Atoi(name); err == nil {
		if n < 0 || n >= len(a.Args) {
			return nil, fmt.Errorf("Replacement index %d out of range for positional args tuple", n)
		}
		return a.Args[n], nil
	}
	v, ok := a.KwArgs[name]
	if !ok {
		return nil, fmt.Errorf("KeyError: '%s'", name)
	}
	return v, nil
}
