package jinja

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// toJSONIndent is |tojson(indent=...): with indent set, Python's json.dumps
// puts each item on its own line, prefixed by indent once per level, and
// separates items with "," alone.
func toJSONIndent(v interface{}, indent *string) (string, error) {
	w := &jsonWriter{indent: indent}
	if err := w.write(v); err != nil {
		return "", err
	}
	return w.b.String(), nil
}

type jsonWriter struct {
	b      strings.Builder
	indent *string
	level  int
}

// open, sep and close lay out the items of a container.
func (w *jsonWriter) open(c byte) {
	w.b.WriteByte(c)
	w.level++
	w.newline()
}

func (w *jsonWriter) sep() {
	if w.indent == nil {
		w.b.WriteString(", ")
		return
	}
	w.b.WriteByte(',')
	w.newline()
}

func (w *jsonWriter) close(c byte) {
	w.level--
	w.newline()
	w.b.WriteByte(c)
}

func (w *jsonWriter) newline() {
	if w.indent != nil {
		w.b.WriteByte('\n')
		for i := 0; i < w.level; i++ {
			w.b.WriteString(*w.indent)
		}
	}
}

func (w *jsonWriter) write(v interface{}) error {
	b := &w.b
	if w.b.Len() > maxOutputBytes {
		return fmt.Errorf("result too long")
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case string:
		writeJSONString(b, x)
	case float32:
		writeJSONFloat(b, float64(x))
	case float64:
		writeJSONFloat(b, x)
	case map[string]interface{}:
		return w.writeObject(x)
	case *exec.Value:
		return w.writeValue(x)
	case []interface{}:
		return w.writeArray(x)
	default:
		return w.writeReflected(reflect.ValueOf(v))
	}
	return nil
}

func writeJSONFloat(b *strings.Builder, f float64) {
	switch {
	case math.IsNaN(f):
		b.WriteString("NaN")
	case math.IsInf(f, 1):
		b.WriteString("Infinity")
	case math.IsInf(f, -1):
		b.WriteString("-Infinity")
	default:
		b.WriteString(exec.PyFloatString(f))
	}
}

func writeJSONString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '<', '>', '&', '\'':
			fmt.Fprintf(b, `\u%04x`, r)
		default:
			switch {
			case r == utf8.RuneError:
				b.WriteString(`\ufffd`)
			case r < 0x20 || (r >= 0x7f && r <= 0xffff):
				fmt.Fprintf(b, `\u%04x`, r)
			case r > 0xffff:
				r -= 0x10000
				fmt.Fprintf(b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
			default:
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// undefinedIn says why v, or an item of it, is undefined, or "" if none is:
// JSON has no undefined.
func undefinedIn(v *exec.Value) string {
	switch {
	case v.IsUndefined():
		return v.UndefinedReason()
	case v.IsList():
		for i := 0; i < v.Len(); i++ {
			if r := undefinedIn(v.Index(i)); r != "" {
				return r
			}
		}
	case v.IsDict():
		for _, k := range v.Keys() {
			if item, ok := v.GetItem(k.Interface()); ok {
				if r := undefinedIn(item); r != "" {
					return r
				}
			}
		}
	}
	return ""
}

// writeObject writes a mapping with its keys sorted, as Python's
// json.dumps(sort_keys=True) does.
func (w *jsonWriter) writeObject(x map[string]interface{}) error {
	keys := make([]string, 0, len(x))
	for k := range x {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return w.writeEntries(len(keys), func(i int) (string, interface{}, error) { return keys[i], x[keys[i]], nil })
}

// writeValue writes a template's value: a dict it built may have keys
// that are not strings (1, None), which Python's json.dumps writes as
// strings, sorted as they are (so 1 and 'x' cannot be sorted: an error).
func (w *jsonWriter) writeValue(v *exec.Value) error {
	switch {
	case v.IsDict():
		pairs, _ := exec.PyPairs(v)
		return w.writePairs(pairs)
	case v.IsList():
		items := make([]interface{}, v.Len())
		for i := range items {
			items[i] = v.Index(i)
		}
		return w.writeArray(items)
	}
	return w.write(v.ToGoSimpleType(false))
}

func (w *jsonWriter) writePairs(pairs []*exec.Pair) error {
	sorted := slices.Clone(pairs)
	var cmpErr error
	sort.SliceStable(sorted, func(i, j int) bool {
		c, err := exec.PyCompare(sorted[i].Key.Interface(), sorted[j].Key.Interface(), true)
		if err != nil && cmpErr == nil {
			cmpErr = err
		}
		return c < 0
	})
	if cmpErr != nil {
		return cmpErr
	}
	return w.writeEntries(len(sorted), func(i int) (string, interface{}, error) {
		key, err := jsonKey(sorted[i].Key)
		return key, sorted[i].Value, err
	})
}

// writeEntries writes a mapping of n entries, entry(i) giving the i-th
// key and value, in that order.
func (w *jsonWriter) writeEntries(n int, entry func(i int) (string, interface{}, error)) error {
	if n == 0 {
		w.b.WriteString("{}")
		return nil
	}
	w.open('{')
	for i := 0; i < n; i++ {
		if i > 0 {
			w.sep()
		}
		key, value, err := entry(i)
		if err != nil {
			return err
		}
		writeJSONString(&w.b, key)
		w.b.WriteString(": ")
		if err := w.write(value); err != nil {
			return err
		}
	}
	w.close('}')
	return nil
}

// jsonKey is the string json.dumps makes of a dict's key.
func jsonKey(k *exec.Value) (string, error) {
	switch {
	case k.IsString():
		return k.String(), nil
	case k.IsBool():
		return map[bool]string{true: "true", false: "false"}[k.Bool()], nil
	case k.IsNil():
		return "null", nil
	case k.IsFloat():
		var b strings.Builder
		writeJSONFloat(&b, k.Float())
		return b.String(), nil
	case exec.IsInt(k):
		return strconv.FormatInt(exec.AsInt(k), 10), nil
	}
	return "", fmt.Errorf("keys must be str, int, float, bool or None, not %s", exec.PyType(k))
}

// writeArray writes a list.
func (w *jsonWriter) writeArray(x []interface{}) error {
	if len(x) == 0 {
		w.b.WriteString("[]")
		return nil
	}
	w.open('[')
	for i, e := range x {
		if i > 0 {
			w.sep()
		}
		if err := w.write(e); err != nil {
			return err
		}
	}
	w.close(']')
	return nil
}

// writeReflected writes the values of Go types the cases of write do not
// name: integers, other slices and arrays, maps with string keys.
func (w *jsonWriter) writeReflected(rv reflect.Value) error {
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		w.b.WriteString(strconv.FormatInt(rv.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		w.b.WriteString(strconv.FormatUint(rv.Uint(), 10))
	case reflect.Slice, reflect.Array:
		items := make([]interface{}, rv.Len())
		for i := range items {
			items[i] = rv.Index(i).Interface()
		}
		return w.write(items)
	case reflect.Map:
		m := map[string]interface{}{}
		it := rv.MapRange()
		for it.Next() {
			k, ok := it.Key().Interface().(string)
			if !ok {
				return fmt.Errorf("keys must be strings")
			}
			m[k] = it.Value().Interface()
		}
		return w.write(m)
	default:
		return fmt.Errorf("object of type %s is not JSON serializable", map[bool]string{true: "function", false: "object"}[rv.Kind() == reflect.Func])
	}
	return nil
}
