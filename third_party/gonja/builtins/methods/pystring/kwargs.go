package pystring

import (
	"fmt"
	"reflect"
	"strconv"

	"github.com/nikolalohinski/gonja/v2/builtins/methods/pyerrors"
)

// AttributeGetter is used to resolve nested kw-args.
type AttributeGetter interface {
	Get(string) (any, bool)
}

// KwArgs adds AttributeGetter interface to map[string]any
type KwArgs map[string]any

func (k KwArgs) Get(key string) (any, bool) {
	v, ok := k[key]
	return v, ok
}

// ListArgs adds AttributeGetter interface to []any.
type ListArgs []any

func (k ListArgs) Get(key string) (any, bool) {
	idx, err := strconv.Atoi(key)
	if err != nil || idx < 0 || idx >= len(k) {
		return "", false
	}
	return k[idx], true
}

func getNestedKwArgs(keys []string, kwarg AttributeGetter) (any, error) {
	if len(keys) == 0 {
		// Shouldn't happen if all other logic is correct
		return "", fmt.Errorf("%w: empty key", pyerrors.ErrInternal)
	}

	key := keys[0]
	tail := keys[1:]

	// Recursion stop case
	if len(tail) == 0 {
		if val, ok := kwarg.Get(key); ok {
			return val, nil
		}
		return "", fmt.Errorf("%w: '%s'", pyerrors.ErrKey, key)
	}

	// Fetch key
	maybeVal, ok := kwarg.Get(key)
	if !ok {
		return "", fmt.Errorf("%w: '%s'", pyerrors.ErrKey, key)
	}

	// See if we can recurse down to sub-keys
	if sub, ok := subGetter(maybeVal); ok {
		return getNestedKwArgs(tail, sub)
	}
	return "", fmt.Errorf("%w: '%#v' is not a sub-gettable for key %s", pyerrors.ErrValue, maybeVal, key)
}

// subGetter is the AttributeGetter of a value that has sub-keys: a getter,
// a slice or array (by index), a struct (by field name), a map with string
// keys.
func subGetter(maybeVal any) (AttributeGetter, bool) {
	switch val := maybeVal.(type) {
	case AttributeGetter:
		return val, true
	case map[string]any:
		return KwArgs(val), true
	case []any:
		return ListArgs(val), true
	}
	v := reflect.ValueOf(maybeVal)
	if v.Kind() == reflect.Slice || v.Kind() == reflect.Array {
		listArgs := make([]any, v.Len())
		for i := 0; i < v.Len(); i++ {
			listArgs[i] = v.Index(i).Interface()
		}
		return ListArgs(listArgs), true
	}
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	switch {
	case v.Kind() == reflect.Struct:
		fieldMap := make(map[string]any)
		for i := 0; i < v.NumField(); i++ {
			fieldMap[v.Type().Field(i).Name] = v.Field(i).Interface()
		}
		return KwArgs(fieldMap), true
	case v.Kind() == reflect.Map && v.Type().Key().Kind() == reflect.String:
		mapField := make(map[string]any)
		for _, key := range v.MapKeys() {
			mapField[key.String()] = v.MapIndex(key).Interface()
		}
		return KwArgs(mapField), true
	}
	return nil, false
}
