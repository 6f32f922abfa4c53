package templating

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// Expected values are what PyYAML 6.0.3's yaml.safe_load returns for each
// input (json.dumps of it, or the error), as the original PaV parses a
// field's output with {% set yaml = true %}. Differences by choice: integers
// beyond int64 and .inf/.nan are errors here (JSON cannot hold them), and
// timestamps stay text.
func TestParseYAMLLikePyYAML(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    interface{} // a JSON value, decoded
		kind    string      // for scalars: the Go type expected
		wantErr string
	}{
		{in: "y", want: "y"}, {in: "n", want: "n"},
		{in: "yes", want: true}, {in: "No", want: false}, {in: "ON", want: true}, {in: "off", want: false},
		{in: "true", want: true}, {in: "False", want: false}, {in: "TRUE", want: true},
		{in: "0o17", want: "0o17"},
		{in: "017", want: 15.0, kind: "int64"}, {in: "0x1F", want: 31.0, kind: "int64"}, {in: "0b1010", want: 10.0, kind: "int64"},
		{in: "1_000", want: 1000.0, kind: "int64"}, {in: "190:20:30", want: 685230.0, kind: "int64"},
		{in: "-42", want: -42.0, kind: "int64"}, {in: "+7", want: 7.0, kind: "int64"}, {in: "0", want: 0.0, kind: "int64"}, {in: "00", want: 0.0, kind: "int64"},
		{in: "1e3", want: "1e3"},
		{in: "1.0e+3", want: 1000.0, kind: "float64"}, {in: "1.5", want: 1.5, kind: "float64"}, {in: ".5", want: 0.5, kind: "float64"},
		{in: "-1.5e-3", want: -0.0015, kind: "float64"}, {in: "1_000.5", want: 1000.5, kind: "float64"}, {in: "190:20:30.15", want: 685230.15, kind: "float64"},
		{in: "~", want: nil}, {in: "null", want: nil}, {in: "Null", want: nil}, {in: "NULL", want: nil}, {in: "", want: nil},
		{in: "a: ", want: map[string]interface{}{"a": nil}},
		{in: "=", wantErr: "could not determine a constructor"},
		{in: "2001-12-14", want: "2001-12-14"},
		{in: "'yes'", want: "yes"}, {in: `"017"`, want: "017"}, {in: "!!str 017", want: "017"},
		{in: "!!int '42'", want: 42.0, kind: "int64"}, {in: "!!float 1", want: 1.0, kind: "float64"},
		{in: "a: 1\nb: [x, y: z, {c: d}]", want: map[string]interface{}{"a": 1.0, "b": []interface{}{"x", map[string]interface{}{"y": "z"}, map[string]interface{}{"c": "d"}}}},
		{in: "base: &b {x: 1, y: 2}\nover:\n  <<: *b\n  y: 3", want: map[string]interface{}{
			"base": map[string]interface{}{"x": 1.0, "y": 2.0}, "over": map[string]interface{}{"x": 1.0, "y": 3.0}}},
		{in: "one: &o {a: 1}\ntwo: &t {a: 2, b: 2}\nm:\n  <<: [*o, *t]\n  c: 3", want: map[string]interface{}{
			"m": map[string]interface{}{"a": 1.0, "b": 2.0, "c": 3.0}, "one": map[string]interface{}{"a": 1.0}, "two": map[string]interface{}{"a": 2.0, "b": 2.0}}},
		{in: "1: one\nyes: b\n~: c\n1.5: d", want: map[string]interface{}{"1": "one", "true": "b", "null": "c", "1.5": "d"}},
		{in: "- |\n  line1\n  line2\n- >\n  folded\n  text", want: []interface{}{"line1\nline2\n", "folded text"}},
		{in: "key: value # comment", want: map[string]interface{}{"key": "value"}},
		{in: "a: b\n---\nc: d", wantErr: "expected a single YAML document"},
		{in: "9223372036854775807", want: 9223372036854775807.0, kind: "int64"},
		{in: "9223372036854775808", wantErr: "does not fit in 64 bits"},
		{in: ".inf", wantErr: "JSON has no infinity"},
		{in: "x: .NaN", wantErr: "JSON has no infinity"},
		{in: "[1, 2", wantErr: "did not find expected"},
	} {
		got, err := parseYAML(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: got %v, %v; want an error containing %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if tc.kind != "" && reflect.TypeOf(got).String() != tc.kind {
			t.Errorf("%q: got a %T, want a %s", tc.in, got, tc.kind)
		}
		b, err := json.Marshal(got)
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		var norm interface{}
		_ = json.Unmarshal(b, &norm)
		if !reflect.DeepEqual(norm, tc.want) {
			t.Errorf("%q: got %s, want %v", tc.in, b, tc.want)
		}
	}
}

// Jinja drops one trailing newline of a template (keep_trailing_newline is
// off), whether or not the field has any Jinja syntax.
func TestTrailingNewlineDropped(t *testing.T) {
	c := compiled(t, withSection(`
volumeCreation:
  capacity: 1Gi
  handle: "line\n"
volumeDeletion:
  podTemplate:
    spec:
      containers:
        - name: d
          image: img
          args: ["plain\n\n", "{{ 'x' }}\n"]
`))
	cfg, err := c.Creation(context.Background(), dynReq(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if *cfg.Handle != "line" {
		t.Errorf("handle %q, want %q", *cfg.Handle, "line")
	}
	d, err := c.Deletion(context.Background(), dynReq(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := d.PodTemplate.Spec.Containers[0].Args; !reflect.DeepEqual(got, []string{"plain\n", "x"}) {
		t.Errorf("args %q, want one trailing newline dropped from each", got)
	}
}
