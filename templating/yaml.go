package templating

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// parseYAML parses a template's output (a field with {% set yaml = true %})
// as the original PaV does, with PyYAML's yaml.safe_load: YAML 1.1's implicit
// types with PyYAML's exact resolvers (so `yes`/`on` are booleans but `y` is
// a string, `017` is octal 15 but `0o17` a string, `1e3` a string but
// `1.0e+3` a float), merge keys, and exactly one document. go-yaml parses the
// syntax; the resolvers below decide what each plain scalar is.
//
// Values come out as JSON-like Go values: map[string]interface{},
// []interface{}, string, int64, float64, bool, nil. Mapping keys become
// strings the way Python's json.dumps writes them (1 -> "1", true ->
// "true"), timestamps keep their text (PyYAML makes dates of them, which the
// original PaV's Kubernetes client writes back as the same ISO text), and
// values JSON cannot hold (.inf, .nan, integers beyond int64) are errors.
func parseYAML(s string) (interface{}, error) {
	dec := yaml.NewDecoder(strings.NewReader(s))
	var doc yaml.Node
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return nil, nil // an empty document is null
	} else if err != nil {
		return nil, err
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("expected a single YAML document, found another one at line %d", extra.Line)
	}
	return fromNode(&doc, 0)
}

// maxYAMLDepth bounds nesting (aliases can make a small text deep).
const maxYAMLDepth = 200

func fromNode(n *yaml.Node, depth int) (interface{}, error) {
	if depth > maxYAMLDepth {
		return nil, fmt.Errorf("YAML nested deeper than %d levels", maxYAMLDepth)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return fromNode(n.Content[0], depth+1)
	case yaml.AliasNode:
		return fromNode(n.Alias, depth+1)
	case yaml.SequenceNode:
		out := make([]interface{}, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := fromNode(c, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		return fromMapping(n, depth)
	case yaml.ScalarNode:
		return scalar(n)
	}
	return nil, fmt.Errorf("line %d: unsupported YAML node", n.Line)
}

// fromMapping builds a mapping; merge keys (<<) bring in the keys of the
// mappings they name that the mapping does not set itself, as PyYAML does.
func fromMapping(n *yaml.Node, depth int) (map[string]interface{}, error) {
	out := map[string]interface{}{}
	var merged []map[string]interface{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && isMergeKey(k) {
			srcs := []*yaml.Node{v}
			if resolved(v).Kind == yaml.SequenceNode {
				srcs = resolved(v).Content
			}
			for _, src := range srcs {
				if resolved(src).Kind != yaml.MappingNode {
					return nil, fmt.Errorf("line %d: a merge key (<<) needs a mapping or a list of mappings", src.Line)
				}
				m, err := fromMapping(resolved(src), depth+1)
				if err != nil {
					return nil, err
				}
				merged = append(merged, m)
			}
			continue
		}
		key, err := fromNode(k, depth+1)
		if err != nil {
			return nil, err
		}
		name, err := keyString(key, k.Line)
		if err != nil {
			return nil, err
		}
		val, err := fromNode(v, depth+1)
		if err != nil {
			return nil, err
		}
		out[name] = val
	}
	if len(merged) == 0 {
		return out, nil
	}
	// Earlier merge sources win over later ones; the mapping's own keys over all.
	result := map[string]interface{}{}
	for _, m := range merged {
		for k, v := range m {
			if _, seen := result[k]; !seen {
				result[k] = v
			}
		}
	}
	for k, v := range out {
		result[k] = v
	}
	return result, nil
}

func resolved(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isMergeKey(k *yaml.Node) bool {
	return k.Value == "<<" && (k.Style == 0 || k.Tag == "!!merge")
}

// keyString turns a mapping key into a string as json.dumps would.
func keyString(k interface{}, line int) (string, error) {
	switch x := k.(type) {
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case nil:
		return "null", nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case float64:
		return pyFloatRepr(x), nil
	}
	return "", fmt.Errorf("line %d: a mapping key must be a scalar", line)
}

// PyYAML's implicit resolvers (resolver.py, YAML 1.1), for plain scalars.
var (
	yamlBool  = regexp.MustCompile(`^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$`)
	yamlFloat = regexp.MustCompile(`^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$`)
	yamlInt   = regexp.MustCompile(`^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$`)
	yamlNull  = regexp.MustCompile(`^(?:~|null|Null|NULL|)$`)
	yamlTime  = regexp.MustCompile(`^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]|[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?(?:[Tt]|[ \t]+)[0-9][0-9]?:[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$`)
	yamlValue = regexp.MustCompile(`^(?:=)$`)
)

// scalar resolves and constructs a scalar as PyYAML's SafeLoader does.
func scalar(n *yaml.Node) (interface{}, error) {
	v := n.Value
	tag := ""
	switch {
	case n.Style&yaml.TaggedStyle != 0:
		tag = n.Tag // written explicitly, e.g. !!str 123
	case n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0:
		return v, nil // only plain scalars are resolved implicitly
	default:
		switch {
		case yamlBool.MatchString(v):
			tag = "!!bool"
		case yamlInt.MatchString(v):
			tag = "!!int"
		case yamlFloat.MatchString(v):
			tag = "!!float"
		case yamlNull.MatchString(v):
			tag = "!!null"
		case yamlTime.MatchString(v):
			tag = "!!timestamp"
		case yamlValue.MatchString(v):
			return nil, fmt.Errorf("line %d: could not determine a constructor for the tag 'tag:yaml.org,2002:value'", n.Line)
		default:
			return v, nil
		}
	}
	switch tag {
	case "!!str", "!!timestamp":
		return v, nil
	case "!!null":
		return nil, nil
	case "!!bool":
		switch strings.ToLower(v) {
		case "yes", "true", "on":
			return true, nil
		case "no", "false", "off":
			return false, nil
		}
	case "!!int":
		return yamlInteger(v, n.Line)
	case "!!float":
		return yamlFloatValue(v, n.Line)
	default:
		return nil, fmt.Errorf("line %d: could not determine a constructor for the tag %q", n.Line, tag)
	}
	return nil, fmt.Errorf("line %d: %q is not a %s", n.Line, v, tag)
}

// yamlInteger is PyYAML's construct_yaml_int.
func yamlInteger(s string, line int) (interface{}, error) {
	v := strings.ReplaceAll(s, "_", "")
	sign := int64(1)
	if strings.HasPrefix(v, "-") {
		sign, v = -1, v[1:]
	} else if strings.HasPrefix(v, "+") {
		v = v[1:]
	}
	n := new(big.Int)
	ok := true
	switch {
	case v == "0":
		return int64(0), nil
	case strings.HasPrefix(v, "0b"):
		_, ok = n.SetString(v[2:], 2)
	case strings.HasPrefix(v, "0x"):
		_, ok = n.SetString(v[2:], 16)
	case strings.HasPrefix(v, "0"):
		_, ok = n.SetString(v[1:], 8)
	case strings.Contains(v, ":"):
		for _, part := range strings.Split(v, ":") {
			d, err := strconv.ParseInt(part, 10, 64)
			if err != nil {
				ok = false
				break
			}
			n.Mul(n, big.NewInt(60)).Add(n, big.NewInt(d))
		}
	default:
		_, ok = n.SetString(v, 10)
	}
	if !ok {
		return nil, fmt.Errorf("line %d: %q is not an integer", line, s)
	}
	n.Mul(n, big.NewInt(sign))
	if !n.IsInt64() {
		return nil, fmt.Errorf("line %d: the integer %s does not fit in 64 bits", line, s)
	}
	return n.Int64(), nil
}

// yamlFloatValue is PyYAML's construct_yaml_float, refusing what JSON cannot hold.
func yamlFloatValue(s string, line int) (interface{}, error) {
	v := strings.ToLower(strings.ReplaceAll(s, "_", ""))
	sign := 1.0
	if strings.HasPrefix(v, "-") {
		sign, v = -1, v[1:]
	} else if strings.HasPrefix(v, "+") {
		v = v[1:]
	}
	if v == ".inf" || v == ".nan" {
		return nil, fmt.Errorf("line %d: %s is not a number PaV can use (JSON has no infinity or NaN)", line, s)
	}
	if strings.Contains(v, ":") {
		f := 0.0
		for _, part := range strings.Split(v, ":") {
			d, err := strconv.ParseFloat(part, 64)
			if err != nil {
				return nil, fmt.Errorf("line %d: %q is not a number", line, s)
			}
			f = f*60 + d
		}
		return sign * f, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsInf(f, 0) {
		return nil, fmt.Errorf("line %d: %q is not a number PaV can use", line, s)
	}
	return sign * f, nil
}

// pyFloatRepr is Python's repr of a float (as json.dumps writes keys).
func pyFloatRepr(f float64) string {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eEn") {
		s += ".0"
	}
	return s
}
