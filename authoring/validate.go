package authoring

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/spf13/cobra"
	yamlv3 "go.yaml.in/yaml/v3"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/templating"
)

func newValidateCmd() *cobra.Command {
	var files []string
	var recursive bool
	var output string
	cmd := &cobra.Command{
		Use:   "validate [-f] FILE|DIR... [-R] [-o text|json]",
		Short: "Check PavProvisioners offline, reporting every problem with its position",
		Long: `Check every PavProvisioner in the given files (multi-document YAML; "-" is
standard input; a directory means its .yaml, .yml and .json files, with -R
those of its subdirectories too; files may be given with -f or as
arguments) as PaV's admission webhook would: the CRD's rules, templates
that compile (unknown filters, tests and functions included), well-typed
literal values and valid pod templates; and names a template reads that
its phase's context lacks (the webhook only warns of these, so that
provisioners it accepted before keep working).

A valid provisioner is then rendered on trial: every phase it has, with a
synthetic context (a claim "trial-claim" of 1Gi in namespace "default", a
WaitForFirstConsumer class "trial-class" whose scheduler picked node
"trial-node", the PV its creation makes, a VolumeAttributesClass
"trial-vac", a snapshot with handle "trial-node/<uid>"; class parameters a
template reads get values "trial-<name>"; get_pvc finds any claim), so a
template that produces invalid YAML, an invalid pod, a value of the wrong
type or an evaluation error is reported at its place. A staging pod whose
containers all run inline shell scripts (sh -c ...) that never mention
"pav" cannot create /pav/volume: a warning.

Prints "valid", or every problem as FILE:LINE:COLUMN: [warning: ]WHAT and
exits with status 1 (warnings count). With -o json, prints a JSON array of
findings, one object per problem with file, line, column, severity ("error"
or "warning") and message, "[]" when valid; the exit status is the same.
Documents of other kinds are skipped.`,
		Args:          cobra.ArbitraryArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			files = append(files, args...)
			if len(files) == 0 {
				return errors.New("no file given: use -f FILE")
			}
			if output != "text" && output != "json" {
				return fmt.Errorf("unknown output format %q: use text or json", output)
			}
			paths, err := expandPaths(files, recursive)
			if err != nil {
				return err
			}
			var found []finding
			count := 0
			for _, f := range paths {
				docs, err := readDocuments(f)
				var syntax *yamlSyntaxError
				if errors.As(err, &syntax) {
					found = append(found, finding{File: f, Line: syntax.line, Severity: severityError, Message: syntax.msg})
					continue
				}
				if err != nil {
					return err
				}
				for _, d := range docs {
					if d.kind() != v1alpha1.Kind {
						fmt.Fprintf(cmd.ErrOrStderr(), "%s: skipping %s: not a PavProvisioner\n", f, d.where())
						continue
					}
					count++
					p, errs := decodeProvisioner(d)
					var warnings field.ErrorList
					if p != nil {
						invalid, w := templating.CheckWithTrial(cmd.Context(), p)
						errs, warnings = append(errs, invalid...), w
					}
					for _, e := range errs {
						found = append(found, d.finding(f, e, severityError))
					}
					for _, e := range warnings {
						found = append(found, d.finding(f, e, severityWarning))
					}
				}
			}
			if output == "json" {
				if found == nil {
					found = []finding{}
				}
				b, err := json.MarshalIndent(found, "", "  ")
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), string(b))
			} else {
				for _, x := range found {
					fmt.Fprintln(cmd.OutOrStdout(), x.String())
				}
			}
			if len(found) > 0 {
				return fmt.Errorf("%d problem(s) found", len(found))
			}
			if count == 0 {
				return errors.New("no PavProvisioner found")
			}
			if output == "text" {
				fmt.Fprintln(cmd.OutOrStdout(), "valid")
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, `file or directory holding PavProvisioners ("-" for standard input); repeatable`)
	cmd.Flags().BoolVarP(&recursive, "recursive", "R", false, "with -f DIR, also the files of its subdirectories")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text (FILE:LINE:COLUMN: ...) or json (an array of {file, line, column, severity, message})")
	return cmd
}

const (
	severityError   = "error"
	severityWarning = "warning"
)

// finding is one problem of a file, where it is (line and column 0 when
// unknown).
type finding struct {
	File     string `json:"file"`
	Line     int    `json:"line"`
	Column   int    `json:"column"`
	Severity string `json:"severity"`
	Message  string `json:"message"`
}

// String is FILE:LINE:COLUMN: [warning: ]MESSAGE, as compilers print.
func (f finding) String() string {
	pos := f.File
	if f.Line > 0 {
		pos += fmt.Sprintf(":%d", f.Line)
		if f.Column > 0 {
			pos += fmt.Sprintf(":%d", f.Column)
		}
	}
	if f.Severity == severityWarning {
		return pos + ": warning: " + f.Message
	}
	return pos + ": " + f.Message
}

// expandPaths replaces each directory by its manifest files (.yaml, .yml,
// .json), sorted, those of subdirectories too if recursive, as kubectl does.
func expandPaths(paths []string, recursive bool) ([]string, error) {
	var out []string
	for _, p := range paths {
		info, err := os.Stat(p)
		if p == "-" || (err == nil && !info.IsDir()) {
			out = append(out, p)
			continue
		}
		if err != nil {
			return nil, err
		}
		err = filepath.WalkDir(p, func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.IsDir() {
				if path != p && !recursive {
					return filepath.SkipDir
				}
				return nil
			}
			switch filepath.Ext(path) {
			case ".yaml", ".yml", ".json":
				out = append(out, path)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// problem formats a problem of the document as FILE:LINE:COLUMN: WHAT:
// FIELD: MESSAGE (see finding).
func (d *document) problem(file string, e *field.Error) string {
	return d.finding(file, e, severityError).String()
}

// finding places a problem of the document: at the template's line and
// column for a template's problem, else at the field's key (or without a
// position if the file's YAML did not parse for positions).
func (d *document) finding(file string, e *field.Error, severity string) finding {
	text := e.Error()
	f := finding{File: file, Severity: severity}
	if d.node == nil {
		f.Message = d.where() + ": " + text
		return f
	}
	n, key := locate(d.node, e.Field)
	f.Line, f.Column = n.Line, n.Column
	if tl, tc, msg, ok := templating.TemplatePosition(e); ok && n.Kind == yamlv3.ScalarNode {
		f.Line, f.Column = templatePosition(n, d.lines, tl, tc)
		text = e.Field + ": " + msg
	} else if key != nil {
		f.Line, f.Column = key.Line, key.Column
	}
	f.Message = d.where() + ": " + text
	return f
}

// document is one YAML document of a file.
type document struct {
	index int // 1-based
	json  []byte
	obj   map[string]interface{}
	node  *yamlv3.Node // for positions; nil when unknown
	lines []string     // the file's
}

func (d *document) kind() string { s, _ := d.obj["kind"].(string); return s }

func (d *document) name() string {
	md, _ := d.obj["metadata"].(map[string]interface{})
	s, _ := md["name"].(string)
	return s
}

func (d *document) where() string {
	if n := d.name(); n != "" {
		return fmt.Sprintf("%s %q", d.kind(), n)
	}
	return fmt.Sprintf("document %d", d.index)
}

// readDocuments splits a (multi-document) YAML file, skipping empty documents.
func readDocuments(path string) ([]*document, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs []*document
	for i := 1; ; i++ {
		raw, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		j, err := yaml.YAMLToJSON(raw)
		if err != nil {
			if se := syntaxError(data); se != nil {
				se.file = path
				return nil, se
			}
			return nil, fmt.Errorf("%s: document %d: %w", path, i, err)
		}
		if s := strings.TrimSpace(string(j)); s == "null" || s == "" {
			i--
			continue
		}
		var obj map[string]interface{}
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(j, &obj); err != nil {
			return nil, fmt.Errorf("%s: document %d is not an object: %w", path, i, err)
		}
		docs = append(docs, &document{index: i, json: j, obj: obj})
	}
	if nodes := yamlNodes(data); len(nodes) == len(docs) {
		lines := strings.Split(string(data), "\n")
		for i, d := range docs {
			d.node, d.lines = nodes[i], lines
		}
	}
	return docs, nil
}

// decodeProvisioner decodes strictly: unknown and duplicate fields are
// problems (the API server would drop them silently).
func decodeProvisioner(d *document) (*v1alpha1.PavProvisioner, field.ErrorList) {
	p := &v1alpha1.PavProvisioner{}
	strict, err := sigsjson.UnmarshalStrict(d.json, p)
	if err != nil {
		return nil, field.ErrorList{decodeError(d.json, err)}
	}
	var errs field.ErrorList
	for _, e := range strict {
		var fe sigsjson.FieldError
		if errors.As(e, &fe) && fe.FieldPath() != "" {
			what := "unknown field"
			if strings.HasPrefix(e.Error(), "duplicate") {
				what = "duplicate field"
			}
			errs = append(errs, field.Forbidden(field.NewPath(fe.FieldPath()), what))
			continue
		}
		errs = append(errs, field.Invalid(field.NewPath("(document)"), field.OmitValueType{}, e.Error()))
	}
	return p, errs
}

// problemLines formats an error about the document, one line per problem
// of an aggregate, each field's problem placed in file as problem does.
func (d *document) problemLines(file string, err error) string {
	errs := []error{err}
	var agg utilerrors.Aggregate
	if errors.As(err, &agg) {
		errs = agg.Errors()
	}
	lines := make([]string, len(errs))
	for i, e := range errs {
		var fe *field.Error
		if errors.As(e, &fe) {
			lines[i] = d.problem(file, fe)
		} else {
			lines[i] = e.Error()
		}
	}
	return strings.Join(lines, "\n")
}

// decodeError says which field has the wrong type and what it must be, in
// YAML's terms rather than Go's. sigs.k8s.io/json's type error is not
// exported; encoding/json finds the same first mismatch.
func decodeError(data []byte, err error) *field.Error {
	var te *json.UnmarshalTypeError
	if errors.As(json.Unmarshal(data, &v1alpha1.PavProvisioner{}), &te) && te.Field != "" {
		return field.Invalid(field.NewPath(te.Field), field.OmitValueType{}, fmt.Sprintf("must be %s, not %s", kindName(te.Type), article(te.Value)))
	}
	return field.Invalid(field.NewPath("(document)"), field.OmitValueType{}, cleanDecodeError(err))
}

// kindName names what a Go type holds as YAML would.
func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return kindName(t.Elem())
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "another type"
}

// article names a JSON value kind as encoding/json reports it ("number",
// "array", ...) in YAML's terms.
func article(jsonKind string) string {
	switch jsonKind {
	case "array":
		return "a list"
	case "object":
		return "an object"
	case "bool":
		return "true or false"
	case "number":
		return "a number"
	case "string":
		return "a string"
	}
	return jsonKind
}

func cleanDecodeError(err error) string { return strings.TrimPrefix(err.Error(), "json: ") }
