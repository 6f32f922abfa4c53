package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/templating"
)

func init() { rootCmd.AddCommand(newValidateCmd()) }

func newValidateCmd() *cobra.Command {
	var files []string
	cmd := &cobra.Command{
		Use:   "validate -f FILE",
		Short: "Check PavProvisioners offline, reporting every problem with its field path",
		Long: `Check every PavProvisioner in the given files (multi-document YAML; "-" is
standard input) as PaV's admission webhook would: the CRD's rules, templates
that compile (unknown filters, tests and functions included), well-typed
literal values and valid pod templates. Prints "valid", or every problem and
exits with status 1. Documents of other kinds are skipped.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(files) == 0 {
				return errors.New("no file given: use -f FILE")
			}
			problems, count := 0, 0
			for _, f := range files {
				docs, err := readDocuments(f)
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
					if p != nil {
						errs = append(errs, templating.Validate(p)...)
					}
					for _, e := range errs {
						fmt.Fprintf(cmd.OutOrStdout(), "%s: %s: %s\n", f, d.where(), e.Error())
					}
					problems += len(errs)
				}
			}
			if problems > 0 {
				return fmt.Errorf("%d problem(s) found", problems)
			}
			if count == 0 {
				return errors.New("no PavProvisioner found")
			}
			fmt.Fprintln(cmd.OutOrStdout(), "valid")
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, `file holding PavProvisioners ("-" for standard input); repeatable`)
	return cmd
}

// document is one YAML document of a file.
type document struct {
	index int // 1-based
	json  []byte
	obj   map[string]interface{}
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
	return docs, nil
}

// decodeProvisioner decodes strictly: unknown and duplicate fields are
// problems (the API server would drop them silently).
func decodeProvisioner(d *document) (*v1alpha1.PavProvisioner, field.ErrorList) {
	p := &v1alpha1.PavProvisioner{}
	strict, err := sigsjson.UnmarshalStrict(d.json, p)
	if err != nil {
		return nil, field.ErrorList{field.Invalid(field.NewPath("(document)"), field.OmitValueType{}, cleanDecodeError(err))}
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

// errorLines formats an error, one line per problem of an aggregate.
func errorLines(err error) string {
	var agg utilerrors.Aggregate
	if errors.As(err, &agg) {
		lines := make([]string, len(agg.Errors()))
		for i, e := range agg.Errors() {
			lines[i] = e.Error()
		}
		return strings.Join(lines, "\n")
	}
	return err.Error()
}

func cleanDecodeError(err error) string { return strings.TrimPrefix(err.Error(), "json: ") }
