package templating

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Bounds on a PavProvisioner's spec as written, checked in one pass over its
// JSON before it is decoded (CheckSpecBounds), so that what decoding,
// compiling and checking a spec cost is bounded by these numbers, whatever
// the spec holds: literals as well as templates (maxTemplateBytes bounds
// those). Real provisioners are a few KiB (the examples: under 8 KiB), a
// large one with inline scripts ~100 KiB. Kubernetes bounds a pod only by
// the size of the object (1.5 MiB in etcd); these counts are far above what
// pods use (kubelet's own limit on a pod's volumes is per node, 127 for most
// CSI drivers) and keep a decoded pod small.
const (
	// MaxSpecBytes bounds a spec's JSON; an AdmissionReview carries it up to
	// four times (object and old object, each with kubectl's
	// last-applied-configuration annotation).
	MaxSpecBytes = 256 << 10
	// MaxSectionBytes bounds each section (volumeStaging, ...).
	MaxSectionBytes = 128 << 10
	// MaxSpecValues bounds the JSON values (objects, lists, strings,
	// numbers...) of a spec: decoded, each costs a few hundred bytes at
	// most, whatever its size in the JSON (`{}` is two bytes).
	MaxSpecValues = 8192
	// MaxSpecDepth bounds how deeply a spec's values nest (a pod template's
	// deepest fields are ~12 levels below spec).
	MaxSpecDepth = 32
	// Per pod template: containers of all kinds together, volumes, and the
	// env and envFrom entries of each container.
	MaxPodContainers   = 32
	MaxPodVolumes      = 128
	MaxContainerEnvVar = 256
)

// specBounds walks a spec's JSON token by token, holding no more of it than
// one token and the path to it.
type specBounds struct {
	dec    *json.Decoder
	values int
	// containers counts the containers of the pod template being walked.
	containers int
	errs       field.ErrorList
}

// errTooMany stops the walk at the first bound on counts: the rest of the
// spec is not worth reading.
var errTooMany = errors.New("bound exceeded")

// CheckSpecBounds checks a spec's JSON against the bounds above; it reads
// spec as a stream and allocates little more than one token at a time.
func CheckSpecBounds(spec []byte) field.ErrorList {
	if len(spec) > MaxSpecBytes {
		return field.ErrorList{field.Forbidden(specPath, fmt.Sprintf("a spec may have %d bytes of JSON, this has %d", MaxSpecBytes, len(spec)))}
	}
	b := &specBounds{dec: json.NewDecoder(bytes.NewReader(spec))}
	b.dec.UseNumber() // a number stays its text: no float conversion
	t, err := b.dec.Token()
	if err != nil || t != json.Delim('{') {
		if bytes.Equal(bytes.TrimSpace(spec), []byte("null")) {
			return nil
		}
		return field.ErrorList{field.Invalid(specPath, "", "must be an object")}
	}
	for b.dec.More() {
		key, err := b.dec.Token()
		if err != nil {
			return b.malformed(err)
		}
		name, _ := key.(string)
		start := b.dec.InputOffset()
		if err := b.value(specPath.Child(name), 1, name, roleNone); err != nil {
			if errors.Is(err, errTooMany) {
				return b.errs
			}
			return b.malformed(err)
		}
		if n := b.dec.InputOffset() - start; n > MaxSectionBytes {
			b.errs = append(b.errs, field.Forbidden(specPath.Child(name), fmt.Sprintf("a section may have %d bytes of JSON, this has %d", MaxSectionBytes, n)))
		}
	}
	return b.errs
}

func (b *specBounds) malformed(err error) field.ErrorList {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return append(b.errs, field.Invalid(specPath, "", fmt.Sprintf("not JSON: %v", err)))
}

// value reads one value at path, depth levels below spec; key is its key
// in its parent object (or its index), role what it is in a pod template:
// rolePodSpec, roleContainers, roleContainer, roleVolumes, roleEnv, or none.
func (b *specBounds) value(path *field.Path, depth int, key string, role int) error {
	b.values++
	if b.values > MaxSpecValues {
		b.errs = append(b.errs, field.Forbidden(specPath, fmt.Sprintf("a spec may have at most %d JSON values (objects, lists, strings, numbers...)", MaxSpecValues)))
		return errTooMany
	}
	if depth > MaxSpecDepth {
		b.errs = append(b.errs, field.Forbidden(path, fmt.Sprintf("nested more than %d levels below spec", MaxSpecDepth)))
		return errTooMany
	}
	t, err := b.dec.Token()
	if err != nil {
		return err
	}
	switch t {
	case json.Delim('{'):
		if depth == 2 && key == "podTemplate" {
			b.containers = 0
		}
		for b.dec.More() {
			k, err := b.dec.Token()
			if err != nil {
				return err
			}
			name, _ := k.(string)
			if err := b.value(path.Child(name), depth+1, name, childRole(depth, key, role, name)); err != nil {
				return err
			}
		}
	case json.Delim('['):
		n := 0
		for ; b.dec.More(); n++ {
			item := roleNone
			if role == roleContainers {
				item = roleContainer
			}
			if err := b.value(path.Index(n), depth+1, "", item); err != nil {
				return err
			}
		}
		if err := b.checkList(path, role, n); err != nil {
			return err
		}
	default:
		return nil
	}
	_, err = b.dec.Token() // the closing delimiter
	return err
}

// What a value is in a pod template, for the bounds on its lists.
const (
	roleNone = iota
	rolePodSpec
	roleContainers
	roleContainer
	roleVolumes
	roleEnv
)

// childRole is the role of the value under name in an object (at depth,
// under key in its parent, with role).
func childRole(depth int, key string, role int, name string) int {
	switch {
	case depth == 2 && key == "podTemplate" && name == "spec":
		return rolePodSpec
	case role == rolePodSpec && (name == "containers" || name == "initContainers" || name == "ephemeralContainers"):
		return roleContainers
	case role == rolePodSpec && name == "volumes":
		return roleVolumes
	case role == roleContainer && (name == "env" || name == "envFrom"):
		return roleEnv
	}
	return roleNone
}

// checkList checks a list's length against the bound of its role.
func (b *specBounds) checkList(path *field.Path, role, n int) error {
	var msg string
	switch role {
	case roleContainers:
		b.containers += n
		if b.containers > MaxPodContainers {
			msg = fmt.Sprintf("a pod template may have at most %d containers of all kinds together, this has %d so far", MaxPodContainers, b.containers)
		}
	case roleVolumes:
		if n > MaxPodVolumes {
			msg = fmt.Sprintf("a pod template may have at most %d volumes, this has %d", MaxPodVolumes, n)
		}
	case roleEnv:
		if n > MaxContainerEnvVar {
			msg = fmt.Sprintf("a container may have at most %d entries in env and in envFrom, this has %d", MaxContainerEnvVar, n)
		}
	}
	if msg == "" {
		return nil
	}
	b.errs = append(b.errs, field.Forbidden(path, msg))
	return errTooMany
}
