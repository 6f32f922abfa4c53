// Package crds holds PaV's CustomResourceDefinition manifest, embedded so that
// the pav binary can install or check it without files on disk.
package crds

import (
	_ "embed"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// CustomResourceDefinition is the YAML manifest of the
// pavprovisioners.pav.albertofaria.github.io CRD.
//
//go:embed pavprovisioners.yaml
var CustomResourceDefinition []byte

// Name is the CRD's metadata.name.
const Name = "pavprovisioners.pav.albertofaria.github.io"

// Unstructured decodes CustomResourceDefinition (a fresh copy on each call),
// ready for a dynamic client's Create or Apply.
func Unstructured() (*unstructured.Unstructured, error) {
	var obj map[string]interface{}
	if err := yaml.Unmarshal(CustomResourceDefinition, &obj); err != nil {
		return nil, fmt.Errorf("decoding the embedded CRD manifest: %w", err)
	}
	return &unstructured.Unstructured{Object: obj}, nil
}
