package protocol

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Bounds of the attributes a creation pod returns in /pav/volume-attributes:
// they are copied into a pod annotation and then into the PV, and every
// staging pod's context carries them.
const (
	MaxVolumeAttributesBytes     = 16 << 10
	MaxVolumeAttributes          = 64
	MaxVolumeAttributeValueBytes = 4 << 10
)

// ParseVolumeAttributes reads what a creation pod wrote to
// /pav/volume-attributes: a JSON object of at most MaxVolumeAttributes
// strings, in at most MaxVolumeAttributesBytes. Keys are written like label
// keys (an optional DNS subdomain prefix and "/", then a name), none under
// csi.storage.k8s.io/ (reserved, as in StorageClass parameters) nor equal to
// one of class's parameters: the attributes join the parameters in the PV's
// volumeAttributes and may not replace one. Values are at most
// MaxVolumeAttributeValueBytes long. The error names the first key (in
// order) that breaks a rule.
func ParseVolumeAttributes(raw string, class *storagev1.StorageClass) (map[string]string, error) {
	if len(raw) > MaxVolumeAttributesBytes {
		return nil, fmt.Errorf("it is longer than %d bytes", MaxVolumeAttributesBytes)
	}
	if strings.TrimSpace(raw) == "" {
		return nil, fmt.Errorf("it is empty or could not be read: write a JSON object of strings ({} for none)")
	}
	var obj map[string]interface{}
	if err := json.Unmarshal([]byte(raw), &obj); err != nil || obj == nil {
		if err == nil {
			err = fmt.Errorf("null")
		}
		return nil, fmt.Errorf("it is not a JSON object of strings: %v", err)
	}
	if len(obj) > MaxVolumeAttributes {
		return nil, fmt.Errorf("it has %d keys; at most %d are allowed", len(obj), MaxVolumeAttributes)
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make(map[string]string, len(obj))
	for _, k := range keys {
		v, ok := obj[k].(string)
		switch {
		case !ok:
			return nil, fmt.Errorf("the value of key %q is not a string (a JSON %s)", k, jsonKind(obj[k]))
		case strings.HasPrefix(k, reservedParameterPrefix):
			return nil, fmt.Errorf("key %q is reserved: keys under %s are Kubernetes' own", k, reservedParameterPrefix)
		case len(validation.IsQualifiedName(k)) > 0:
			return nil, fmt.Errorf("key %q is not a valid key (written as a label key): %s", k, strings.Join(validation.IsQualifiedName(k), "; "))
		case class != nil && hasKey(class.Parameters, k):
			return nil, fmt.Errorf("key %q is a parameter of StorageClass %q: attributes join the class's parameters and may not replace one", k, class.Name)
		case len(v) > MaxVolumeAttributeValueBytes:
			return nil, fmt.Errorf("the value of key %q is %d bytes long; at most %d are allowed", k, len(v), MaxVolumeAttributeValueBytes)
		}
		out[k] = v
	}
	return out, nil
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

// jsonKind names the JSON type of a value decoded into an interface{}.
func jsonKind(v interface{}) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case []interface{}:
		return "array"
	default:
		return "object"
	}
}
