// Package v1alpha1 holds the Go types of the PavProvisioner custom resource
// (pav.albertofaria.github.io/v1alpha1).
//
// Everything under spec except provisioningModes may be a Jinja template, and a
// template may even replace a list or an object (`{% set yaml = true %}`), so the
// phase sections keep their fields as untyped JSON values (Value). The typed,
// evaluated form of each phase lives in package templating.
//
// The deep copies, the clientset and the lister (crds/generated)
// and the CRD schema (crds/pavprovisioners.yaml) are generated from these
// types by `make generate` (hack/generate.sh).
//
// +k8s:deepcopy-gen=package
// +groupName=pav.albertofaria.github.io
// +groupGoName=Pav
package v1alpha1
