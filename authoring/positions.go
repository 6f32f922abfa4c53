package authoring

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
)

// yamlNodes parses a file's documents with their positions (sigs.k8s.io/yaml,
// which decodes them, keeps none), skipping empty documents as
// readDocuments does. nil if the file does not parse.
func yamlNodes(data []byte) []*yamlv3.Node {
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	var out []*yamlv3.Node
	for {
		var doc yamlv3.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			return nil
		}
		if len(doc.Content) == 0 || (doc.Content[0].Kind == yamlv3.ScalarNode && doc.Content[0].Tag == "!!null") {
			continue
		}
		out = append(out, doc.Content[0])
	}
}

// locate finds the node a field path ("spec.a[0].b", as field.Path prints
// it) names under root, or the deepest node on the way when the path goes
// further than the document (a required field that is missing). key is the
// mapping key whose value that node is (nil for a list item or the root):
// where a reader looks for a field.
func locate(root *yamlv3.Node, path string) (n, key *yamlv3.Node) {
	n, rest := root, path
	if rest == "(document)" {
		return n, nil
	}
	for rest != "" {
		if n.Kind == yamlv3.AliasNode && n.Alias != nil {
			n = n.Alias
		}
		switch {
		case strings.HasPrefix(rest, "["):
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return n, key
			}
			inside := rest[1:end]
			rest = strings.TrimPrefix(rest[end+1:], ".")
			if i, err := strconv.Atoi(inside); err == nil && n.Kind == yamlv3.SequenceNode {
				if i < 0 || i >= len(n.Content) {
					return n, key
				}
				n, key = n.Content[i], nil
				continue
			}
			k, v := mappingEntry(n, inside)
			if v == nil {
				return n, key
			}
			n, key = v, k
		default:
			if n.Kind != yamlv3.MappingNode {
				return n, key
			}
			// Keys may hold dots (labels): the longest key that fits wins.
			var best, bestKey *yamlv3.Node
			bestLen := -1
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i].Value
				if len(k) > bestLen && (rest == k || strings.HasPrefix(rest, k+".") || strings.HasPrefix(rest, k+"[")) {
					best, bestKey, bestLen = n.Content[i+1], n.Content[i], len(k)
				}
			}
			if best == nil {
				return n, key
			}
			n, key, rest = best, bestKey, strings.TrimPrefix(rest[bestLen:], ".")
		}
	}
	return n, key
}

func mappingEntry(n *yamlv3.Node, key string) (k, v *yamlv3.Node) {
	if n.Kind != yamlv3.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i], n.Content[i+1]
		}
	}
	return nil, nil
}

// templatePosition is where in the file a template's line and column
// (1-based) are, the template being scalar n. Exact for block scalars (|,
// >: their lines are the template's) and for the first line of other
// scalars; a later line of a quoted or plain scalar that spans lines, which
// YAML folds, gets the template's column.
func templatePosition(n *yamlv3.Node, lines []string, line, col int) (int, int) {
	switch {
	case n.Style&(yamlv3.LiteralStyle|yamlv3.FoldedStyle) != 0:
		// The block's indentation is its first non-empty line's.
		indent := 0
		for _, text := range lines[min(n.Line, len(lines)):] {
			if strings.TrimSpace(text) != "" {
				indent = len(text) - len(strings.TrimLeft(text, " "))
				break
			}
		}
		return n.Line + line, indent + col
	case line > 1:
		return n.Line + line - 1, col
	case n.Style&(yamlv3.DoubleQuotedStyle|yamlv3.SingleQuotedStyle) != 0:
		return n.Line, n.Column + col // after the opening quote
	default:
		return n.Line, n.Column + col - 1
	}
}

// yamlSyntaxError is a YAML syntax error at its line in the file (the
// decoder of a single document counts lines from the document's start).
type yamlSyntaxError struct {
	file string
	line int
	msg  string
}

func (e *yamlSyntaxError) Error() string { return fmt.Sprintf("%s:%d: %s", e.file, e.line, e.msg) }

var yamlLineError = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntaxError is the first syntax error of a file's documents, decoded as
// one stream so that its line is the file's; nil if none is found.
func syntaxError(data []byte) *yamlSyntaxError {
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	for {
		var doc yamlv3.Node
		err := dec.Decode(&doc)
		if err == nil {
			continue
		}
		if m := yamlLineError.FindStringSubmatch(err.Error()); m != nil {
			line, _ := strconv.Atoi(m[1])
			return &yamlSyntaxError{line: line, msg: "YAML: " + m[2]}
		}
		return nil // io.EOF, or an error without a line
	}
}
