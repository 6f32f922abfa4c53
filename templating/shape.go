package templating

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// checkShape checks a JSON-like value (possibly holding templateValue{}
// placeholders) against the Go type it will be decoded into, reporting each
// unknown field and each literal of the wrong type with its exact path.
// Placeholders are skipped: their type is only known after evaluation.
// Once it finds nothing, decoding the (fully literal) value cannot fail.
func checkShape(v interface{}, t reflect.Type, path *field.Path) field.ErrorList {
	if _, ok := v.(templateValue); ok {
		return nil
	}
	if v == nil {
		return nil // null decodes into anything as its zero value
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return checkUnmarshaler(v, t, path)
	}
	switch t.Kind() {
	case reflect.Struct:
		return checkStruct(v, t, path)
	case reflect.Slice:
		return checkSlice(v, t, path)
	case reflect.Map:
		m, ok := v.(map[string]interface{})
		if !ok {
			return field.ErrorList{field.Invalid(path, describe(v), "must be an object")}
		}
		var errs field.ErrorList
		for _, k := range sortedKeys(m) {
			errs = append(errs, checkShape(m[k], t.Elem(), path.Key(k))...)
		}
		return errs
	}
	return checkScalar(v, t, path)
}

// checkUnmarshaler lets a type with its own JSON decoding (Quantity,
// IntOrString, Time, RawExtension...) judge a literal value.
func checkUnmarshaler(v interface{}, t reflect.Type, path *field.Path) field.ErrorList {
	if hasTemplate(v) {
		return nil
	}
	data, err := json.Marshal(v)
	if err != nil {
		return field.ErrorList{field.Invalid(path, describe(v), err.Error())}
	}
	if err := json.Unmarshal(data, reflect.New(t).Interface()); err != nil {
		return field.ErrorList{field.Invalid(path, describe(v), cleanJSONError(err))}
	}
	return nil
}

func checkStruct(v interface{}, t reflect.Type, path *field.Path) field.ErrorList {
	m, ok := v.(map[string]interface{})
	if !ok {
		return field.ErrorList{field.Invalid(path, describe(v), "must be an object")}
	}
	fields := jsonFields(t)
	var errs field.ErrorList
	for _, k := range sortedKeys(m) {
		ft, ok := fields[k]
		if !ok {
			errs = append(errs, field.Forbidden(path.Child(k), "unknown field"))
			continue
		}
		errs = append(errs, checkShape(m[k], ft, path.Child(k))...)
	}
	return errs
}

func checkSlice(v interface{}, t reflect.Type, path *field.Path) field.ErrorList {
	if t.Elem().Kind() == reflect.Uint8 { // []byte: base64 string
		if s, ok := v.(string); ok {
			data, _ := json.Marshal(s)
			if err := json.Unmarshal(data, new([]byte)); err != nil {
				return field.ErrorList{field.Invalid(path, describe(v), "must be base64-encoded data")}
			}
			return nil
		}
		return field.ErrorList{field.Invalid(path, describe(v), "must be a string (base64-encoded data)")}
	}
	l, ok := v.([]interface{})
	if !ok {
		return field.ErrorList{field.Invalid(path, describe(v), "must be a list")}
	}
	var errs field.ErrorList
	for i, item := range l {
		errs = append(errs, checkShape(item, t.Elem(), path.Index(i))...)
	}
	return errs
}

// checkScalar checks a literal against a string, boolean or number type
// (an interface takes anything).
func checkScalar(v interface{}, t reflect.Type, path *field.Path) field.ErrorList {
	switch t.Kind() {
	case reflect.String:
		if _, ok := v.(string); !ok {
			return field.ErrorList{field.Invalid(path, describe(v), "must be a string")}
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			return field.ErrorList{field.Invalid(path, describe(v), "must be a boolean (true or false)")}
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		i, ok := asInt(v)
		if !ok {
			return field.ErrorList{field.Invalid(path, describe(v), "must be an integer")}
		}
		z := reflect.New(t).Elem()
		var overflow bool
		if z.CanInt() {
			overflow = z.OverflowInt(i)
		} else {
			overflow = i < 0 || z.OverflowUint(uint64(i))
		}
		if overflow {
			return field.ErrorList{field.Invalid(path, i, fmt.Sprintf("out of range for %s", t.Kind()))}
		}
	case reflect.Float32, reflect.Float64:
		switch v.(type) {
		case int64, float64:
		default:
			return field.ErrorList{field.Invalid(path, describe(v), "must be a number")}
		}
	}
	return nil
}

var unmarshalerType = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()

func asInt(v interface{}) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<63 {
			return int64(x), true
		}
	}
	return 0, false
}

var jsonFieldsCache sync.Map // reflect.Type -> map[string]reflect.Type

// jsonFields maps the JSON names of a struct's fields (inline structs
// flattened, case-sensitive as Kubernetes decodes) to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if f, ok := jsonFieldsCache.Load(t); ok {
		return f.(map[string]reflect.Type)
	}
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && (name == "" || opts == "inline" || strings.Contains(opts, "inline")) {
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					out[k] = v
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = ft
	}
	jsonFieldsCache.Store(t, out)
	return out
}

func sortedKeys(m map[string]interface{}) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// describe renders a value for an error message, compactly.
func describe(v interface{}) interface{} {
	switch x := v.(type) {
	case string:
		return shorten(x)
	case int64, float64, bool:
		return x
	case nil:
		return nil
	case []interface{}:
		return "<list>"
	case map[string]interface{}:
		return "<object>"
	}
	return fmt.Sprintf("%v", v)
}

// cleanJSONError drops encoding/json's Go type names where they say nothing
// to a provisioner author.
func cleanJSONError(err error) string {
	s := err.Error()
	s = strings.TrimPrefix(s, "json: ")
	return s
}
